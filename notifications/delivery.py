"""One attempt of one delivery: claim it, sign it, POST it, record what happened.

A worker claims a row with a short lease before the HTTP call, so one delivery is never
sent twice at once; the `webhook-id` stays the same on every retry for receivers to
deduplicate. Failures are retried with backoff up to MAX_ATTEMPTS, by the outbox sweep.
The claim also keeps each target to its cap of attempts in flight, and a success is
followed by the target's next due delivery (delivery_turn, notifications.targets).
"""

import json
import logging
import random
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import httpx
from django.conf import settings
from django.db import transaction
from django.db.models import F, Q, QuerySet
from django.utils import timezone
from standardwebhooks.webhooks import Webhook as StandardWebhook

from audit.models import EventType
from audit.services import event_record
from core.ijson import as_doubles
from infra import net as guard
from infra.net import redacted_url
from notifications import outbox, targets
from notifications import senders as channels
from notifications.base import Sent
from notifications.models import WEBHOOK, Delivery, DeliveryStatus
from notifications.outbox import sendable

WEBHOOK_ACTOR = "system:webhooks"
CHANNELS_ACTOR = "system:channels"
logger = logging.getLogger(__name__)
MAX_ATTEMPTS = 8
MAX_BACKOFF_SECONDS = 8 * 60 * 60
REQUEST_TIMEOUT_SECONDS = 10  # each read and write; connecting gets CONNECT_TIMEOUT_SECONDS
CONNECT_TIMEOUT_SECONDS = 3
TURN_SECONDS = 1.0  # how long one task keeps sending to one target (delivery_turn)


@dataclass(frozen=True)
class AttemptOutcome:
    status: str  # "skipped", "delivered", "retry", "failed"
    status_code: int | None = None
    error: str = ""


def backoff_seconds(attempts: int) -> float:
    """Exponential (x4) from BPM_WEBHOOK_RETRY_BASE_SECONDS, capped, with ±20% jitter.

    With the default 15 s base, 8 attempts span about a day.
    """
    delay = min(settings.BPM_WEBHOOK_RETRY_BASE_SECONDS * 4 ** (attempts - 1), MAX_BACKOFF_SECONDS)
    return delay * random.uniform(0.8, 1.2)  # noqa: S311 - jitter, not security


def signer(secret: str) -> StandardWebhook:
    """The Standard Webhooks signer of a secret (raises on a whsec_ secret not in base64)."""
    return StandardWebhook(secret if secret.startswith("whsec_") else secret.encode())


def signed_request(delivery: Delivery) -> tuple[bytes, dict[str, str]]:
    """The body bytes and Standard Webhooks headers for one delivery."""
    # The payload's numbers as the API answers them: jsonb wrote a double of 1e16 or more
    # as a long integer, and a receiver recomputing payloadDigest needs the double.
    body = json.dumps(as_doubles(delivery.body), separators=(",", ":"), ensure_ascii=False)
    now = timezone.now()
    signature = signer(delivery.subscriber.secret).sign(delivery.pk, now, body)
    headers = {
        "content-type": "application/json",
        "user-agent": "BreakpointManager-Webhooks/1.0",
        "webhook-id": delivery.pk,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": signature,
    }
    return body.encode(), headers


def claim(delivery_id: str) -> Delivery | None:
    """Lease a due delivery and count the attempt now, so one cut short by a killed
    worker still counts towards MAX_ATTEMPTS.

    None when it is not pending and due, another worker holds it, or its target already
    has its cap of attempts in flight (the row stays due: a hand-off or the sweep sends it).
    """
    now = timezone.now()
    delivery = _due(delivery_id, now)
    if delivery is None:
        return None
    lease = now + timedelta(seconds=settings.BPM_WEBHOOK_LEASE_SECONDS)
    with transaction.atomic():
        targets.lock_target(delivery)
        if targets.target_full(delivery, now):
            return None
        claimed = (
            _claimable(now)
            .filter(pk=delivery_id)
            .update(locked_until=lease, attempts=F("attempts") + 1)
        )
    if not claimed:
        return None
    return Delivery.objects.select_related("webhook").get(pk=delivery_id)


def _claimable(now: datetime) -> QuerySet[Delivery]:
    """Pending deliveries that are due, sendable and held by no worker."""
    return (
        Delivery.objects.filter(status=DeliveryStatus.PENDING, next_attempt_at__lte=now)
        .filter(sendable())
        .filter(Q(locked_until__isnull=True) | Q(locked_until__lt=now))
    )


def _due(delivery_id: str, now: datetime) -> Delivery | None:
    """The delivery if it could be claimed now (read without a lock: claim re-checks)."""
    return _claimable(now).filter(pk=delivery_id).only("pk", "channel", "webhook_id").first()


def delivery_attempt(delivery_id: str) -> AttemptOutcome:
    """Send one delivery once, if it is pending, due and not held by another worker."""
    delivery = claim(delivery_id)
    if delivery is None:
        return AttemptOutcome("skipped")
    started = time.monotonic()
    if delivery.channel == WEBHOOK:
        sent = _send_webhook(delivery)
    else:
        sent = _send_on_channel(delivery)
    duration_ms = int((time.monotonic() - started) * 1000)
    return _record_attempt(delivery, sent, duration_ms)


def _send_webhook(delivery: Delivery) -> Sent:
    """The signed POST to the subscriber, on its vetted addresses only."""
    status_code, error, retryable = None, "", True
    try:
        addresses = guard.vetted_addresses(delivery.subscriber.url)
        body, headers = signed_request(delivery)
        timeout = httpx.Timeout(REQUEST_TIMEOUT_SECONDS, connect=CONNECT_TIMEOUT_SECONDS)
        with httpx.Client(timeout=timeout, follow_redirects=False) as client:
            response = guard.post_pinned(client, delivery.subscriber.url, addresses, body, headers)
        status_code = response.status_code
        retryable = status_code >= 500 or status_code == 429
        if not 200 <= status_code < 300:
            error = f"HTTP {status_code}"
    except guard.DeliveryRefused as exc:
        error, retryable = f"refused: {exc}", False
    except httpx.HTTPError as exc:
        error = f"{type(exc).__name__}: {exc}"
    return Sent(status_code, _scrubbed(error, delivery.subscriber.url), retryable)


def _send_on_channel(delivery: Delivery) -> Sent:
    """An attempt on a channel (core.channels); a sender's unexpected error is a retryable failure."""
    try:
        return channels.send(delivery)
    except Exception as exc:  # noqa: BLE001 - recorded on the delivery, retried with backoff
        logger.exception("The %s sender failed on delivery %s", delivery.channel, delivery.pk)
        return Sent(error=f"{type(exc).__name__}: {exc}")


def _scrubbed(text: str, url: str) -> str:
    """`text` without the URL's password or query string, wherever an error quoted them."""
    parts = urlsplit(url)
    text = text.replace(url, redacted_url(url))
    for secret in (parts.password, parts.query, parts.fragment):
        if secret:
            text = text.replace(secret, "[redacted]")
    return text


def _record_attempt(delivery: Delivery, sent: Sent, duration_ms: int) -> AttemptOutcome:
    attempts = delivery.attempts  # counted when the delivery was claimed
    now = timezone.now()
    changes: dict[str, Any] = {"reply": {**delivery.reply, **sent.reply}} if sent.reply else {}
    if not sent.error:
        outcome = AttemptOutcome("delivered", sent.status_code)
        changes.update(status=DeliveryStatus.DELIVERED, delivered_at=now)
    elif sent.retryable and attempts < MAX_ATTEMPTS:
        outcome = AttemptOutcome("retry", sent.status_code, sent.error)
        delay = max(backoff_seconds(attempts), sent.retry_after or 0)
        changes["next_attempt_at"] = now + timedelta(seconds=delay)
    else:
        outcome = AttemptOutcome("failed", sent.status_code, sent.error)
        changes["status"] = DeliveryStatus.FAILED
    metadata = {
        "deliveryId": delivery.pk,
        **_destination(delivery),
        "eventType": delivery.event_type,
        "attempt": attempts,
        "statusCode": sent.status_code,
        "durationMs": duration_ms,
        "error": sent.error[:500],
        "outcome": outcome.status,
    }
    with transaction.atomic():
        Delivery.objects.filter(pk=delivery.pk).update(
            attempts=attempts,
            locked_until=None,
            last_status_code=sent.status_code,
            last_error=sent.error[:2000],
            **changes,
        )
        if delivery.breakpoint_id is None:  # no trail to add to: the log keeps it
            logger.info("Delivery attempt", extra={"delivery": metadata})
        else:
            event_record(
                breakpoint_id=delivery.breakpoint_id,
                type=EventType.NOTIFICATION,
                actor=WEBHOOK_ACTOR if delivery.channel == WEBHOOK else CHANNELS_ACTOR,
                metadata=metadata,
            )
    return outcome


def delivery_turn(delivery_id: str) -> AttemptOutcome:
    """A worker's turn with one message: attempt the delivery, then, while its target
    succeeds and TURN_SECONDS last, the target's next due deliveries; the one after that
    goes to the back of the queue, behind other targets' deliveries. So a fast target is
    drained quickly and a slow one takes turns with the others. After a failure nothing
    follows: the sweep sends the target's next ones (backoff per target)."""
    turn_ends = time.monotonic() + TURN_SECONDS
    outcome = first = delivery_attempt(delivery_id)
    sent = delivery_id
    while outcome.status == "delivered":
        following = targets.next_due(sent, timezone.now())
        if following is None:
            break
        if time.monotonic() >= turn_ends:
            outbox.publish_deliveries([following])
            break
        sent = following
        outcome = delivery_attempt(sent)
    return first


def _destination(delivery: Delivery) -> dict[str, Any]:
    """Where it went, for the audit trail: never a URL's credentials."""
    if delivery.channel == WEBHOOK:
        return {"webhookId": delivery.webhook_id, "url": redacted_url(delivery.subscriber.url)}
    target = {key: value for key, value in delivery.target.items() if key != "user"}
    return {"channel": delivery.channel, "target": target}
