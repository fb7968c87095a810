"""Webhooks: subscriptions, the transactional outbox, and signed delivery with retries.

The intent to notify is written as WebhookDelivery rows in the transaction of the
change; publishing to the broker happens after commit and may fail harmlessly, since
the outbox sweep re-dispatches every pending row that is due. A worker claims a row
with a short lease before the HTTP call, so one delivery is never sent twice at once;
the `webhook-id` stays the same on every retry for receivers to deduplicate.
"""

import ipaddress
import json
import logging
import random
import socket
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import F, Q, QuerySet
from django.utils import timezone
from standardwebhooks.webhooks import Webhook as StandardWebhook

from audit.models import EventType
from audit.services import event_record
from breakpoints import routing
from breakpoints.models import (
    Breakpoint,
    DeliveryStatus,
    Webhook,
    WebhookDelivery,
    WebhookEventType,
)
from breakpoints.models.webhook import redacted_url
from config.exceptions import InvalidInput, InvalidState, NotFound

logger = logging.getLogger(__name__)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

WEBHOOK_ACTOR = "system:webhooks"
MAX_ATTEMPTS = 8
MAX_BACKOFF_SECONDS = 8 * 60 * 60
REQUEST_TIMEOUT_SECONDS = 10
DUE_BATCH_SIZE = 500
REMOVED_ERROR = "cancelled: the webhook was removed"


# --- subscriptions ---------------------------------------------------------------


def _parse_event_types(event_types: list[str] | None) -> list[str]:
    chosen = [t.strip() for t in (event_types or []) if t.strip()]
    unknown = sorted(set(chosen) - set(WebhookEventType.values))
    if unknown:
        raise InvalidInput(
            f"Unknown event type(s): {', '.join(unknown)}. "
            f"Choose from: {', '.join(WebhookEventType.values)}.",
            {"events": unknown},
        )
    return sorted(set(chosen), key=WebhookEventType.values.index)


def webhook_build(*, url: str, event_types: list[str] | None = None, secret: str = "") -> Webhook:
    """A validated, unsaved subscription: raises InvalidInput on a bad URL, type or secret."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidInput("The webhook URL must be an absolute http(s) URL.", {"url": [url]})
    literal = _literal_address(parts.hostname)
    if (literal is not None or parts.hostname == "localhost") and not _host_allowed(
        parts.hostname, [literal] if literal else _resolve(parts.hostname, parts.port)
    ):
        raise InvalidInput(
            f"{parts.hostname} is a private or loopback address; allow it with "
            "BPM_WEBHOOK_ALLOWED_HOSTS first.",
            {"url": [url]},
        )
    webhook = Webhook(url=url.strip(), event_types=_parse_event_types(event_types))
    if secret:
        webhook.secret = secret
    try:
        _signer(webhook.secret)
        webhook.full_clean()
    except ValidationError as exc:
        raise InvalidInput("The webhook is not valid.", exc.message_dict) from exc
    except Exception as exc:  # standardwebhooks refuses a whsec_ secret that is not base64
        raise InvalidInput(f"The secret is not usable: {exc}", {"secret": [str(exc)]}) from exc
    return webhook


def webhook_add(*, url: str, event_types: list[str] | None = None, secret: str = "") -> Webhook:
    """Subscribe `url` to the given event types (none means all)."""
    webhook = webhook_build(url=url, event_types=event_types, secret=secret)
    webhook.save()
    return webhook


def webhook_update(*, webhook_id: int, event_types: list[str], active: bool) -> Webhook:
    """Change what a subscription receives, or pause it; the URL and secret stay.

    A removed subscription is not found: removal is final, never undone by an edit.
    """
    chosen = _parse_event_types(event_types)
    if (
        not Webhook.objects.current()
        .filter(pk=webhook_id)
        .update(event_types=chosen, active=active)
    ):
        raise NotFound(f"No webhook with id {webhook_id}.")
    return Webhook.objects.get(pk=webhook_id)


def webhook_remove(*, webhook_id: int) -> Webhook:
    """Remove a subscription for good, keeping it and its deliveries for the history.

    It stops receiving at once: its pending deliveries fail with REMOVED_ERROR in the
    same transaction, and the outbox sweep cancels any that a concurrent change wrote.
    """
    now = timezone.now()
    with transaction.atomic():
        if not Webhook.objects.current().filter(pk=webhook_id).update(removed_at=now, active=False):
            raise NotFound(f"No webhook with id {webhook_id}.")
        _cancel_pending(WebhookDelivery.objects.filter(webhook_id=webhook_id))
    return Webhook.objects.get(pk=webhook_id)


def _current_webhook_ids() -> QuerySet[Webhook, Any]:
    """Ids of the subscriptions not removed, as a subquery.

    Not a join (`webhook__removed_at`): Django turns an UPDATE with a join into
    `WHERE id IN (SELECT ...)`, whose conditions PostgreSQL does not re-check on the row a
    concurrent claim just changed, and two workers could then claim one delivery.
    """
    return Webhook.objects.current().values("pk")


def _cancel_pending(deliveries: QuerySet[WebhookDelivery]) -> int:
    """Fail the pending ones among `deliveries` (their webhook was removed), attempts kept."""
    return deliveries.filter(status=DeliveryStatus.PENDING).update(
        status=DeliveryStatus.FAILED, locked_until=None, last_error=REMOVED_ERROR
    )


# --- address safety ---------------------------------------------------------------


def _literal_address(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def _resolve(host: str, port: int | None) -> list[IPAddress]:
    infos = socket.getaddrinfo(host, port or 443, proto=socket.IPPROTO_TCP)
    return [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]


def _host_allowed(host: str, addresses: list) -> bool:
    """Public addresses are allowed; private/loopback ones only via BPM_WEBHOOK_ALLOWED_HOSTS."""
    allowed_names, allowed_networks = set(), []
    for entry in settings.BPM_WEBHOOK_ALLOWED_HOSTS:
        try:
            allowed_networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            allowed_names.add(entry.lower())
    if host.lower() in allowed_names:
        return True
    return bool(addresses) and all(
        address.is_global or any(address in network for network in allowed_networks)
        for address in addresses
    )


class DeliveryRefused(Exception):
    """The target may not be reached (private address not allowed): no retry."""


def _vetted_addresses(url: str) -> list[IPAddress]:
    """Resolve the webhook's host once and vet every address it gives."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        addresses = _resolve(host, parts.port)
    except OSError as exc:
        raise httpx.ConnectError(f"cannot resolve {host}: {exc}") from exc
    if not _host_allowed(host, addresses):
        raise DeliveryRefused(f"{host} resolves to a private or loopback address")
    return addresses


def _post_pinned(
    client: httpx.Client, url: str, addresses: list[IPAddress], body: bytes, headers: dict
) -> httpx.Response:
    """POST to the vetted addresses themselves, not to a second DNS answer.

    The URL's host is replaced by the address (so a rebinding DNS cannot swap in a
    private one after the check); Host and TLS SNI/certificate checks keep the name.
    """
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    extensions = {}
    if parts.scheme == "https" and _literal_address(host) is None:
        extensions["sni_hostname"] = host
    auth = (
        httpx.BasicAuth(parts.username, parts.password or "")
        if parts.username
        else httpx.USE_CLIENT_DEFAULT
    )
    headers = {**headers, "host": parts.netloc.rpartition("@")[2]}  # without user:password
    error: httpx.ConnectError | None = None
    for address in addresses:
        literal = f"[{address}]" if address.version == 6 else str(address)
        pinned = urlunsplit(parts._replace(netloc=f"{literal}{port}"))
        try:
            return client.post(
                pinned, content=body, headers=headers, extensions=extensions, auth=auth
            )
        except httpx.ConnectError as exc:  # try the host's next address
            error = exc
    assert error is not None  # _vetted_addresses never returns an empty list
    raise error


# --- the outbox ------------------------------------------------------------------


def _representation(bp: Breakpoint) -> dict:
    from breakpoints.api.serializers import BreakpointSerializer

    return BreakpointSerializer(bp).data


def _subscribers(event_type: str) -> list[Webhook]:
    return [w for w in Webhook.objects.current().filter(active=True) if w.wants(event_type)]


def _body(event_type: str, now: datetime, data: dict) -> dict:
    """The JSON a delivery sends, as stored (JSON-safe)."""
    return json.loads(
        json.dumps(
            {"type": f"breakpoint.{event_type}", "timestamp": now.isoformat(), "data": data},
            default=str,
        )
    )


def deliveries_enqueue(*, breakpoint: Breakpoint, event_type: str) -> list[str]:
    """Write one pending delivery per interested subscriber, in the caller's transaction."""
    subscribers = _subscribers(event_type)
    if not subscribers:
        return []
    now = timezone.now()
    body = _body(event_type, now, _representation(breakpoint))
    return _deliveries_write([(breakpoint, body)], subscribers, event_type, now)


def deliveries_enqueue_bulk(*, breakpoint_ids: list[str], event_type: str) -> list[str]:
    """deliveries_enqueue for many breakpoints (the TTL sweep), in queries per batch, not per row.

    The rows are read back in the caller's transaction, so each body shows the breakpoint
    as the change left it, exactly as the single path does; nothing is read without a
    subscriber.
    """
    subscribers = _subscribers(event_type)
    if not subscribers or not breakpoint_ids:
        return []
    now = timezone.now()
    breakpoints = list(
        Breakpoint.objects.filter(pk__in=breakpoint_ids).order_by().prefetch_related("feedback")
    )
    bodies = [_body(event_type, now, data) for data in _representations(breakpoints)]
    pairs = list(zip(breakpoints, bodies, strict=True))
    return _deliveries_write(pairs, subscribers, event_type, now)


def _deliveries_write(
    pairs: list[tuple[Breakpoint, dict]],
    subscribers: list[Webhook],
    event_type: str,
    now: datetime,
) -> list[str]:
    """One pending delivery per (breakpoint, body) and subscriber; published after commit."""
    deliveries = WebhookDelivery.objects.bulk_create(
        [
            WebhookDelivery(
                webhook=webhook,
                breakpoint=breakpoint,
                event_type=event_type,
                body=body,
                next_attempt_at=now,
            )
            for breakpoint, body in pairs
            for webhook in subscribers
        ]
    )
    ids = [delivery.pk for delivery in deliveries]
    transaction.on_commit(lambda: publish_deliveries(ids))
    return ids


def _representations(breakpoints: list[Breakpoint]) -> list[dict]:
    """The API representation of each, with the experts of all resolved at once."""
    from breakpoints.api.serializers import BreakpointSerializer

    seats = routing.resolve({name for bp in breakpoints for name in bp.experts})
    return list(BreakpointSerializer(breakpoints, many=True, context={"seats": seats}).data)


def publish_deliveries(delivery_ids: list[str]) -> int:
    """Hand deliveries to the workers; never raises, never waits long on the broker.

    A publish that fails leaves the row pending, and the outbox sweep sends it later.
    """
    from breakpoints.tasks import deliver_webhook

    published = 0
    for delivery_id in delivery_ids:
        try:
            deliver_webhook.apply_async((delivery_id,), retry=False)
            published += 1
        except Exception:  # noqa: BLE001 - broker down: the outbox sweep covers it
            logger.warning(
                "Could not publish webhook delivery %s; the sweep will retry.",
                delivery_id,
                exc_info=True,
            )
            break
    return published


def deliveries_due(*, limit: int = DUE_BATCH_SIZE) -> list[str]:
    """Pending deliveries whose time has come and that no worker holds.

    Pending deliveries of a removed webhook (written by a change that raced the removal,
    or put back by an attempt that was under way) are cancelled here, never returned.
    """
    _cancel_pending(WebhookDelivery.objects.exclude(webhook_id__in=_current_webhook_ids()))
    now = timezone.now()
    return list(
        WebhookDelivery.objects.filter(status=DeliveryStatus.PENDING, next_attempt_at__lte=now)
        .filter(Q(locked_until__isnull=True) | Q(locked_until__lt=now))
        .order_by("next_attempt_at")
        .values_list("pk", flat=True)[:limit]
    )


def delivery_resend(*, delivery_id: str) -> WebhookDelivery:
    """An admin sends a delivery again (same webhook-id), whatever became of it,
    unless its webhook was removed."""
    with transaction.atomic():
        updated = WebhookDelivery.objects.filter(
            pk=delivery_id, webhook_id__in=_current_webhook_ids()
        ).update(status=DeliveryStatus.PENDING, next_attempt_at=timezone.now(), locked_until=None)
        if not updated:
            current = WebhookDelivery.objects.filter(pk=delivery_id).first()
            if current is not None:
                raise InvalidState(
                    f"The webhook of delivery {delivery_id} was removed; it cannot be re-sent.",
                    current_status=current.status,
                )
            raise NotFound(f"No delivery {delivery_id}.")
        transaction.on_commit(lambda: publish_deliveries([delivery_id]))
    return WebhookDelivery.objects.get(pk=delivery_id)


# --- one attempt -------------------------------------------------------------------


def backoff_seconds(attempts: int) -> float:
    """Exponential (x4) from BPM_WEBHOOK_RETRY_BASE_SECONDS, capped, with ±20% jitter.

    With the default 15 s base, 8 attempts span about a day.
    """
    delay = min(settings.BPM_WEBHOOK_RETRY_BASE_SECONDS * 4 ** (attempts - 1), MAX_BACKOFF_SECONDS)
    return delay * random.uniform(0.8, 1.2)  # noqa: S311 - jitter, not security


def _signer(secret: str) -> StandardWebhook:
    return StandardWebhook(secret if secret.startswith("whsec_") else secret.encode())


def signed_request(delivery: WebhookDelivery) -> tuple[bytes, dict[str, str]]:
    """The body bytes and Standard Webhooks headers for one delivery."""
    body = json.dumps(delivery.body, separators=(",", ":"), ensure_ascii=False)
    now = timezone.now()
    signature = _signer(delivery.webhook.secret).sign(delivery.pk, now, body)
    headers = {
        "content-type": "application/json",
        "user-agent": "BreakpointManager-Webhooks/1.0",
        "webhook-id": delivery.pk,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": signature,
    }
    return body.encode(), headers


def _claim(delivery_id: str) -> WebhookDelivery | None:
    """Lease a due delivery and count the attempt now, so one cut short by a killed
    worker still counts towards MAX_ATTEMPTS."""
    now = timezone.now()
    lease = now + timedelta(seconds=settings.BPM_WEBHOOK_LEASE_SECONDS)
    claimed = (
        WebhookDelivery.objects.filter(
            pk=delivery_id,
            status=DeliveryStatus.PENDING,
            next_attempt_at__lte=now,
            webhook_id__in=_current_webhook_ids(),
        )
        .filter(Q(locked_until__isnull=True) | Q(locked_until__lt=now))
        .update(locked_until=lease, attempts=F("attempts") + 1)
    )
    if not claimed:
        return None
    return WebhookDelivery.objects.select_related("webhook").get(pk=delivery_id)


@dataclass(frozen=True)
class AttemptOutcome:
    status: str  # "skipped", "delivered", "retry", "failed"
    status_code: int | None = None
    error: str = ""


def delivery_attempt(delivery_id: str) -> AttemptOutcome:
    """Send one delivery once, if it is pending, due and not held by another worker."""
    delivery = _claim(delivery_id)
    if delivery is None:
        return AttemptOutcome("skipped")
    started = time.monotonic()
    status_code, error, retryable = None, "", True
    try:
        addresses = _vetted_addresses(delivery.webhook.url)
        body, headers = signed_request(delivery)
        with httpx.Client(timeout=REQUEST_TIMEOUT_SECONDS, follow_redirects=False) as client:
            response = _post_pinned(client, delivery.webhook.url, addresses, body, headers)
        status_code = response.status_code
        retryable = status_code >= 500 or status_code == 429
        if not 200 <= status_code < 300:
            error = f"HTTP {status_code}"
    except DeliveryRefused as exc:
        error, retryable = f"refused: {exc}", False
    except httpx.HTTPError as exc:
        error = f"{type(exc).__name__}: {exc}"
    error = _scrubbed(error, delivery.webhook.url)
    duration_ms = int((time.monotonic() - started) * 1000)
    return _record_attempt(delivery, status_code, error, retryable, duration_ms)


def _scrubbed(text: str, url: str) -> str:
    """`text` without the URL's password or query string, wherever an error quoted them."""
    parts = urlsplit(url)
    text = text.replace(url, redacted_url(url))
    for secret in (parts.password, parts.query, parts.fragment):
        if secret:
            text = text.replace(secret, "[redacted]")
    return text


def _record_attempt(
    delivery: WebhookDelivery,
    status_code: int | None,
    error: str,
    retryable: bool,
    duration_ms: int,
) -> AttemptOutcome:
    attempts = delivery.attempts  # counted when the delivery was claimed
    now = timezone.now()
    if not error:
        outcome = AttemptOutcome("delivered", status_code)
        changes = {"status": DeliveryStatus.DELIVERED, "delivered_at": now}
    elif retryable and attempts < MAX_ATTEMPTS:
        outcome = AttemptOutcome("retry", status_code, error)
        changes = {"next_attempt_at": now + timedelta(seconds=backoff_seconds(attempts))}
    else:
        outcome = AttemptOutcome("failed", status_code, error)
        changes = {"status": DeliveryStatus.FAILED}
    with transaction.atomic():
        WebhookDelivery.objects.filter(pk=delivery.pk).update(
            attempts=attempts,
            locked_until=None,
            last_status_code=status_code,
            last_error=error[:2000],
            **changes,
        )
        event_record(
            breakpoint_id=delivery.breakpoint_id,
            type=EventType.NOTIFICATION,
            actor=WEBHOOK_ACTOR,
            metadata={
                "deliveryId": delivery.pk,
                "webhookId": delivery.webhook_id,
                "url": redacted_url(delivery.webhook.url),
                "eventType": delivery.event_type,
                "attempt": attempts,
                "statusCode": status_code,
                "durationMs": duration_ms,
                "error": error[:500],
                "outcome": outcome.status,
            },
        )
    return outcome
