"""The transactional outbox: the intent to notify, written with the change it reports.

A change writes one pending Delivery per interested subscriber, and one per
channel target (notifications.fanout), in its own transaction; after commit the ids are handed to the workers, which may fail harmlessly:
the sweep (deliveries_due, run by beat) re-publishes every pending row that is due.
"""

import json
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import orjson
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from core import tasknames
from core.exceptions import InvalidState, NotFound
from core.timestamps import timestamp
from infra.db.prepared import Prepared, insert
from infra.logging import adopted_context
from infra.publishing import publish, publish_soon, publish_together
from notifications.fanout import Routed, Target, channel_targets, shown_targets
from notifications.models import Delivery, DeliveryStatus, Webhook, WebhookEventType
from policies.configuration import Copied

DUE_BATCH_SIZE = 500
REMOVED_ERROR = "cancelled: the webhook was removed"


def sendable() -> Q:
    """Deliveries that may still be sent: any channel's, or a current webhook's.

    Not a join (`webhook__removed_at`): Django turns an UPDATE with a join into
    `WHERE id IN (SELECT ...)`, whose conditions PostgreSQL does not re-check on the row a
    concurrent claim just changed, and two workers could then claim one delivery.
    """
    return Q(webhook_id__isnull=True) | Q(webhook_id__in=current_webhook_ids())


def current_webhook_ids() -> QuerySet[Webhook, Any]:
    """Ids of the subscriptions not removed, as a subquery (see sendable)."""
    return Webhook.objects.current().values("pk")


def cancel_pending(deliveries: QuerySet[Delivery]) -> int:
    """Fail the pending ones among `deliveries` (their webhook was removed), attempts kept."""
    return deliveries.filter(status=DeliveryStatus.PENDING).update(
        status=DeliveryStatus.FAILED, locked_until=None, last_error=REMOVED_ERROR
    )


# The subscriptions every change reads: compiled once (infra.db.prepared), read again only after
# the configuration changed (policies.configuration).
_ACTIVE_WEBHOOKS: Copied[list[Webhook]] = Copied(
    Prepared(lambda: Webhook.objects.current().filter(active=True))
)


def _subscribers(event_type: str) -> list[Webhook]:
    return [w for w in _ACTIVE_WEBHOOKS.get() if w.wants(event_type)]


def _body(event_type: str, now: datetime, data: dict) -> dict:
    """The JSON a delivery sends, as stored (JSON-safe): breakpoint.<event> about a
    breakpoint, trigger.fired as it is."""
    kind = (
        event_type if event_type == WebhookEventType.TRIGGER_FIRED else f"breakpoint.{event_type}"
    )
    body = {"type": kind, "timestamp": timestamp(now), "data": data}
    try:  # orjson, a tenth of the standard library's time, writing what it would
        return orjson.loads(orjson.dumps(body, default=str, option=_AS_STANDARD_LIBRARY))
    except TypeError:  # orjson.JSONEncodeError: an integer past 64 bits, a key not a string
        return json.loads(json.dumps(body, default=str))


# Datetimes and dataclasses through default=str, as the standard library writes them.
_AS_STANDARD_LIBRARY = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS


def deliveries_enqueue(*, breakpoint: Routed, data: dict, event_type: str) -> list[str]:
    """Write one pending delivery per interested subscriber and channel target, in the
    caller's transaction; `data` is the breakpoint's representation, the body's data."""
    subscribers = _subscribers(event_type)
    targets = channel_targets(breakpoint, event_type)
    if not subscribers and not targets:
        return []
    now = timezone.now()
    body = _body(event_type, now, data)
    return _deliveries_write([(breakpoint, body, targets)], subscribers, event_type, now)


def deliveries_enqueue_many(events: Sequence[tuple[Routed, dict, str]]) -> list[str]:
    """deliveries_enqueue of several events, each (breakpoint, data, event_type), in order:
    one read of the subscribers and one INSERT for them all (a decision's feedback and
    release), in the caller's transaction."""
    if not events:
        return []
    current = _ACTIVE_WEBHOOKS.get()
    now = timezone.now()
    deliveries = []
    for breakpoint, data, event_type in events:
        subscribers = [webhook for webhook in current if webhook.wants(event_type)]
        targets = channel_targets(breakpoint, event_type)
        if subscribers or targets:
            rows = [(breakpoint, _body(event_type, now, data), targets)]
            deliveries += _deliveries_rows(rows, subscribers, event_type, now)
    return _deliveries_insert(deliveries)


def deliveries_enqueue_bulk(
    *,
    breakpoint_ids: list[str],
    event_type: str,
    represented: Callable[[list[str]], Sequence[tuple[Routed, dict]]],
) -> list[str]:
    """deliveries_enqueue for many breakpoints (the TTL sweep), in queries per batch, not per row.

    `represented` reads the rows back with their representations, in the caller's
    transaction, so each body shows the breakpoint as the change left it, exactly as the
    single path does; nothing is read without a subscriber.
    """
    subscribers = _subscribers(event_type)
    shown = shown_targets(breakpoint_ids) if breakpoint_ids else {}
    if not breakpoint_ids or (not subscribers and not shown):
        return []
    now = timezone.now()
    rows = [
        (bp, _body(event_type, now, data), shown.get(bp.pk, []))
        for bp, data in represented(breakpoint_ids)
        if subscribers or bp.pk in shown
    ]
    return _deliveries_write(rows, subscribers, event_type, now)


def deliveries_enqueue_unattached(*, event_type: str, data: dict) -> list[str]:
    """Deliveries about no breakpoint (a forwarded external event), to its subscribers."""
    subscribers = _subscribers(event_type)
    if not subscribers:
        return []
    now = timezone.now()
    return _deliveries_write(
        [(None, _body(event_type, now, data), [])], subscribers, event_type, now
    )


def delivery_enqueue_to(
    *, breakpoint_id: str, target: Target, event_type: str, data: dict
) -> list[str]:
    """One pending delivery to one channel target about a breakpoint (a decision a channel
    refused, undone where it was made), in the caller's transaction; published after
    commit."""
    now = timezone.now()
    channel, where = target
    delivery = Delivery(
        channel=channel,
        target=where,
        breakpoint_id=breakpoint_id,
        body=_body(event_type, now, data),
        event_type=event_type,
        next_attempt_at=now,
    )
    return _deliveries_insert([delivery])


def _id(bp: Routed | None) -> str | None:
    return None if bp is None else bp.pk


def _deliveries_write(
    rows: Sequence[tuple[Routed | None, dict, list[Target]]],
    subscribers: list[Webhook],
    event_type: str,
    now: datetime,
) -> list[str]:
    """One pending delivery per (breakpoint, body) and subscriber or channel target;
    published after commit."""
    return _deliveries_insert(_deliveries_rows(rows, subscribers, event_type, now))


def _deliveries_rows(
    rows: Sequence[tuple[Routed | None, dict, list[Target]]],
    subscribers: list[Webhook],
    event_type: str,
    now: datetime,
) -> list[Delivery]:
    common = {"event_type": event_type, "next_attempt_at": now}
    return [
        *(
            Delivery(webhook=webhook, breakpoint_id=_id(bp), body=body, **common)
            for bp, body, _ in rows
            for webhook in subscribers
        ),
        *(
            Delivery(channel=channel, target=target, breakpoint_id=_id(bp), body=body, **common)
            for bp, body, targets in rows
            for channel, target in targets
        ),
    ]


def _deliveries_insert(deliveries: list[Delivery]) -> list[str]:
    """Write the deliveries (one INSERT) and publish them after commit."""
    if not deliveries:
        return []
    ids = [delivery.pk for delivery in insert(deliveries)]  # bulk_create's, built once
    transaction.on_commit(lambda: publish_soon_deliveries(ids))
    return ids


def publish_soon_deliveries(delivery_ids: list[str]) -> None:
    """After commit: the publisher thread publishes them (publish_deliveries), or, with
    other requests' deliveries waiting, all of them as one deliver_many message."""
    publish_soon(publish_deliveries, delivery_ids, together=tasknames.DELIVER_MANY)


def publish_deliveries(delivery_ids: list[str]) -> int:
    """Hand deliveries to the workers (infra.publishing: never raises; the outbox sweep
    publishes what a failed publish left pending): one alone as its deliver task, several
    (a release's feedback and released events, the sweep's batch) as one message the worker
    hands on one by one (publish_deliveries_handed_on), so the web process publishes once."""
    if len(delivery_ids) > 1:
        return publish_together(tasknames.DELIVER_MANY, delivery_ids)
    return publish_deliveries_each(delivery_ids)


def publish_deliveries_each(delivery_ids: list[str]) -> int:
    """One deliver task per delivery: a slow target holds up none of the others."""
    return publish(tasknames.DELIVER, delivery_ids)  # by name: notifications.tasks runs it


def publish_deliveries_handed_on(rows: list[Any]) -> int:
    """A deliver_many message's rows, each handed on as its own deliver task: a delivery id
    (published by the sweep: the message's own context), or [id, log context] (rows of
    several requests: each task carries the context of the request that wrote its row).
    How many were handed over; after a failed publish the rest are left to the sweep."""
    handed = 0
    for row in rows:
        if isinstance(row, str):
            published = publish_deliveries_each([row])
        else:
            delivery_id, fields = row
            with adopted_context(fields):
                published = publish_deliveries_each([str(delivery_id)])
        if not published:
            break
        handed += published
    return handed


def deliveries_due(*, limit: int = DUE_BATCH_SIZE) -> list[str]:
    """Pending deliveries whose time has come and that no worker holds.

    Pending deliveries of a removed webhook (written by a change that raced the removal,
    or put back by an attempt that was under way) are cancelled here, never returned.
    """
    cancel_pending(Delivery.objects.exclude(sendable()))
    now = timezone.now()
    return list(
        Delivery.objects.filter(status=DeliveryStatus.PENDING, next_attempt_at__lte=now)
        .filter(Q(locked_until__isnull=True) | Q(locked_until__lt=now))
        .order_by("next_attempt_at")
        .values_list("pk", flat=True)[:limit]
    )


def delivery_resend(*, delivery_id: str) -> Delivery:
    """An admin sends a delivery again (same webhook-id), whatever became of it,
    unless its webhook was removed."""
    with transaction.atomic():
        updated = Delivery.objects.filter(sendable(), pk=delivery_id).update(
            status=DeliveryStatus.PENDING, next_attempt_at=timezone.now(), locked_until=None
        )
        if not updated:
            current = Delivery.objects.filter(pk=delivery_id).first()
            if current is not None:
                raise InvalidState(
                    f"The webhook of delivery {delivery_id} was removed; it cannot be re-sent.",
                    current_status=current.status,
                )
            raise NotFound(f"No delivery {delivery_id}.")
        transaction.on_commit(lambda: publish_soon_deliveries([delivery_id]))
    return Delivery.objects.get(pk=delivery_id)
