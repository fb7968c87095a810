"""One push to one device: what it says, encrypted for that device (RFC 8291, aes128gcm),
signed for the push service (VAPID, RFC 8292) and POSTed to the subscription's endpoint.

What a push says: the breakpoint's title (its explicit key, or its id, when it has none),
the agent, the time left and the review page's URL; never the question, the context or
any other content of its payload (a phone shows it on the lock screen). On an outcome, the
same notification (one tag per breakpoint) says how it ended.

The push service's answer decides the delivery: 2xx delivered; 404 or 410, the
subscription is gone (the browser dropped it): the device is removed and the delivery
fails for good; 408, 429 and 5xx are retried by the outbox (after Retry-After when given);
any other status fails for good.
"""

import base64
import json
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

import http_ece
import httpx
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from django.conf import settings
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from py_vapid import Vapid

from audit.models import EventType
from breakpoints.answers.outcome import outcome_of
from breakpoints.representation.contract import console_url
from channels.models import PushSubscription
from channels.push.subscriptions import base64url_bytes, endpoint_problem
from core.actors import is_reviewer
from core.naming import FALLBACK_KEY
from notifications.base import Sent, retry_after_seconds
from notifications.models import Delivery

TIMEOUT = httpx.Timeout(10.0, connect=5.0)
TITLE_MAX = 120
AGENT_MAX = 64
# A VAPID token's lifetime: at most 24 hours (RFC 8292); one per push, so short is fine.
VAPID_SECONDS = 12 * 60 * 60
GONE = frozenset({404, 410})
RETRYABLE_STATUSES = frozenset({408, 429})
OUTCOMES = frozenset({EventType.RELEASED, EventType.EXPIRED, EventType.CANCELLED})
URGENT = frozenset({EventType.CREATED, EventType.ESCALATED})


def send(delivery: Delivery) -> Sent:
    """One attempt of a push delivery to the device its target names."""
    subscription = (
        PushSubscription.objects.select_related("user")
        .filter(pk=delivery.target.get("subscription"))
        .first()
    )
    if subscription is None:
        return Sent(error="The device was removed: nothing to send to.", retryable=False)
    if not subscription.user.is_active or not is_reviewer(subscription.user):
        return Sent(error="The device's owner is no longer a reviewer.", retryable=False)
    if (problem := endpoint_problem(subscription.endpoint)) is not None:
        return Sent(error=f"Not sent to the device's endpoint: {problem}", retryable=False)
    now = timezone.now()
    notice = push_notice(delivery.event_type, delivery.body.get("data") or {}, now)
    try:
        encrypted = encrypted_for(subscription, json.dumps(notice).encode())
        headers = {
            **vapid_headers(subscription.endpoint),
            "TTL": str(settings.BPM_PUSH_TTL_SECONDS),
            "Content-Encoding": "aes128gcm",
            "Content-Type": "application/octet-stream",
            "Urgency": "high" if delivery.event_type in URGENT else "normal",
            "Topic": f"bpm{notice['id']}"[:32] if notice.get("id") else "",
        }
    except (ValueError, TypeError, http_ece.ECEException) as exc:  # a key; settings' key
        return Sent(error=f"Could not encrypt or sign the push: {exc}", retryable=False)
    headers = {name: value for name, value in headers.items() if value}
    try:
        with httpx.Client(timeout=TIMEOUT, follow_redirects=False) as client:
            response = client.post(subscription.endpoint, content=encrypted, headers=headers)
    except httpx.HTTPError as exc:
        return Sent(error=f"Push service unreachable: {type(exc).__name__}")
    code = response.status_code
    if 200 <= code < 300:
        PushSubscription.objects.filter(pk=subscription.pk).update(last_sent_at=now)
        return Sent(code)
    if code in GONE:
        subscription.delete()
        return Sent(
            code,
            f"The push service no longer knows this device (HTTP {code}): it was removed.",
            retryable=False,
        )
    retryable = code >= 500 or code in RETRYABLE_STATUSES
    retry_after = retry_after_seconds(response.headers.get("retry-after")) if retryable else None
    return Sent(
        code, f"The push service answered HTTP {code}", retryable=retryable, retry_after=retry_after
    )


def push_notice(event_type: str, data: dict[str, Any], now: datetime) -> dict[str, Any]:
    """What the device is told (the service worker shows it): never the payload's content."""
    breakpoint_id = str(data.get("breakpointId") or "")
    expires_at = parse_datetime(str(data.get("expiresAt") or ""))
    seconds_left = max(0, int((expires_at - now).total_seconds())) if expires_at else None
    notice: dict[str, Any] = {
        "event": event_type,
        "id": breakpoint_id,
        "title": _title(data),
        "agent": str(data.get("agentId") or "")[:AGENT_MAX],
        "expiresAt": expires_at.isoformat() if expires_at else None,
        "secondsLeft": seconds_left,
        "url": console_url(breakpoint_id),
        "tag": f"bpm-{breakpoint_id}",
    }
    if event_type in OUTCOMES:
        outcome = outcome_of(data.get("status"), data.get("result"))
        notice["outcome"] = outcome.verdict
        notice["secondsLeft"] = None
    return notice


def _title(data: dict[str, Any]) -> str:
    """The title, else an explicit key, else the id: one line, shortened."""
    for value in (data.get("title"), data.get("key")):
        text = " ".join(str(value).split()) if isinstance(value, str) else ""
        if text and text != FALLBACK_KEY:
            return text if len(text) <= TITLE_MAX else text[: TITLE_MAX - 1] + "…"
    return f"Breakpoint {data.get('breakpointId') or ''}".strip()


def encrypted_for(subscription: PushSubscription, content: bytes) -> bytes:
    """`content` as only that device can read it (RFC 8291, aes128gcm): an ECDH key of
    this push alone, the device's public key and auth secret; the salt is random."""
    device_key = base64url_bytes(subscription.p256dh)
    auth_secret = base64url_bytes(subscription.auth)
    if device_key is None or auth_secret is None:
        raise ValueError("the device's keys are not base64url")
    return bytes(
        http_ece.encrypt(
            content,
            private_key=ec.generate_private_key(ec.SECP256R1()),
            dh=device_key,
            auth_secret=auth_secret,
            version="aes128gcm",
        )
    )


def vapid_headers(endpoint: str) -> dict[str, str]:
    """The Authorization header (vapid t=..., k=...) for the push service of `endpoint`."""
    parts = urlsplit(endpoint)
    claims = {
        "aud": f"{parts.scheme}://{parts.netloc}",
        "sub": settings.BPM_VAPID_SUBJECT,
        "exp": int(timezone.now().timestamp()) + VAPID_SECONDS,
    }
    return dict(vapid_key().sign(claims))


def vapid_key() -> Vapid:
    return Vapid.from_raw(settings.BPM_VAPID_PRIVATE_KEY.encode())


def vapid_public_key() -> str:
    """The application server key browsers subscribe with (base64url, uncompressed point);
    empty when push is off."""
    if not settings.BPM_VAPID_PRIVATE_KEY:
        return ""
    point = vapid_key().public_key.public_bytes(
        serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
    )
    return base64.urlsafe_b64encode(point).rstrip(b"=").decode()
