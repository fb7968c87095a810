"""Fairness between targets: one slow receiver must not hold up everyone else's deliveries.

A target is one webhook subscription, or one channel (all of its deliveries).
At most BPM_WEBHOOK_TARGET_CONCURRENCY attempts to one target are in flight at a time,
counted from the delivery leases themselves (pending rows whose `locked_until` lies ahead),
so a killed worker's slot frees itself when its lease runs out. A delivery that finds its
target full is not attempted: its task ends at once, the worker slot goes to the next
message (another target's), and the row stays pending and due.

When an attempt succeeds, the same task goes on with the target's next due delivery for
up to TURN_SECONDS (delivery.delivery_turn), then hands the next one to the workers: it
joins the back of the queue, behind the other targets' deliveries, so a fast target is
drained at once and a slow one takes turns with the others. After a failure nothing
follows: the target's deliveries wait for the outbox sweep, and then still go at most
the cap at a time (backoff per target: usually one attempt per sweep while it fails).
"""

from datetime import datetime

from django.conf import settings
from django.db import connection
from django.db.models import Q

from notifications.models import WEBHOOK, Delivery, DeliveryStatus
from notifications.outbox import sendable


def same_target(delivery: Delivery) -> Q:
    """Deliveries to the target of `delivery`: its subscription, or its channel."""
    if delivery.channel == WEBHOOK:
        return Q(webhook_id=delivery.webhook_id)
    return Q(webhook_id__isnull=True, channel=delivery.channel)


def lock_target(delivery: Delivery) -> None:
    """Serialize claims on one target until the transaction ends (PostgreSQL: an advisory
    lock; SQLite's IMMEDIATE transactions already serialize every write)."""
    if connection.vendor != "postgresql":
        return
    key = f"bpm-delivery-target:{delivery.channel}:{delivery.webhook_id or ''}"
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [key])


def target_full(delivery: Delivery, now: datetime) -> bool:
    """Whether the target already has as many attempts in flight as it may."""
    in_flight = Delivery.objects.filter(
        same_target(delivery), status=DeliveryStatus.PENDING, locked_until__gt=now
    ).exclude(pk=delivery.pk)
    return in_flight.count() >= settings.BPM_WEBHOOK_TARGET_CONCURRENCY


def next_due(delivery_id: str, now: datetime) -> str | None:
    """The oldest due delivery to the target of `delivery_id` that no worker holds."""
    delivery = Delivery.objects.only("channel", "webhook_id").get(pk=delivery_id)
    return (
        Delivery.objects.filter(same_target(delivery), sendable(), status=DeliveryStatus.PENDING)
        .filter(next_attempt_at__lte=now)
        .filter(Q(locked_until__isnull=True) | Q(locked_until__lt=now))
        .exclude(pk=delivery.pk)
        .order_by("next_attempt_at", "pk")
        .values_list("pk", flat=True)
        .first()
    )
