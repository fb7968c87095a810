"""Reading and nudging the rows a breakpoint leaves: its events and its outbox deliveries."""

import json
from datetime import timedelta

from django.db import connection
from django.utils import timezone

from audit.models import Event
from breakpoints.models import Breakpoint
from core.digests import content_digest
from notifications.models import Delivery


def events_of(bp_id: str, type: str) -> list[Event]:
    return list(Event.objects.filter(breakpoint_id=bp_id, type=type))


def refusals(bp) -> list[Event]:
    """A breakpoint's `refused` events (decisions a channel refused), oldest first."""
    return list(Event.objects.filter(breakpoint_id=bp.pk, type="refused").order_by("id"))


def history(bp_id: str) -> list[str]:
    """The event types of a breakpoint after its creation, in order (notifications aside)."""
    types = Event.objects.filter(breakpoint_id=bp_id).values_list("type", flat=True)
    return [t for t in types if t not in ("created", "notification")]


def deliveries_of(bp_id: str, event_type: str) -> list[Delivery]:
    return list(Delivery.objects.filter(breakpoint_id=bp_id, event_type=event_type))


def backdate_expiry(*bp_ids: str, seconds: float = 1) -> None:
    """Move these breakpoints' expiry into the past."""
    Breakpoint.objects.filter(pk__in=bp_ids).update(
        expires_at=timezone.now() - timedelta(seconds=seconds)
    )


def make_due(delivery: Delivery) -> None:
    """Let the backoff pass: move the delivery's next attempt into the past."""
    Delivery.objects.filter(pk=delivery.pk).update(
        next_attempt_at=timezone.now() - timedelta(seconds=1)
    )


def store_legacy_proposal(bp_id: str) -> None:
    """Make this breakpoint the row 08031bb stored for `"proposal": {"x": 1e16}` (issue 47),
    written with SQL: the payload as jsonb gives it back (10000000000000000), its
    payloadDigest computed over the double the agent sent."""
    bp = Breakpoint.objects.get(pk=bp_id)
    payload = {**bp.payload, "proposal": {"x": 10**16}}
    digest = content_digest(
        question=bp.question, title=bp.title, payload={**payload, "proposal": {"x": 1e16}}
    )
    table = connection.ops.quote_name(Breakpoint._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET payload = %s, payload_digest = %s WHERE id = %s",  # noqa: S608
            [json.dumps(payload), digest, bp_id],
        )
