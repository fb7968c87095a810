"""Expiry: a waiting breakpoint ends when its time is up, whoever notices first.

An admin expires one by hand; a read or a decision that meets an overdue one expires it
on the spot (breakpoint_expire_if_due); beat's TTL sweep expires the rest in batches.
"""

from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Case, JSONField, Value, When
from django.utils import timezone

from audit.models import EventType
from audit.services import event_record_bulk
from breakpoints.actors import Actor, is_admin
from breakpoints.choices import Status
from breakpoints.models import Breakpoint
from breakpoints.results import result_expired, result_timed_out
from breakpoints.services.transitions import lock, move
from breakpoints.wakeups import announce
from breakpoints.webhooks import deliveries_enqueue_bulk
from config.exceptions import Forbidden

TTL_ACTOR = Actor.system("ttl")
EXPIRE_BATCH_SIZE = 1000


def breakpoint_expire(*, breakpoint_id: str, actor: Actor, reason: str = "") -> Breakpoint:
    """Expire a waiting breakpoint: admins by hand, the system when its TTL has passed."""
    is_system = actor.user is None and not actor.is_agent
    if not is_system and not (actor.user is not None and is_admin(actor.user)):
        raise Forbidden("Only admins can expire breakpoints.")
    with transaction.atomic():
        bp = lock(breakpoint_id)
        return _expire_locked(bp, actor=actor, reason=reason)


def _expiry_result(*, actor: Actor, ttl_seconds: int | None, reason: str = "") -> dict[str, Any]:
    if actor == TTL_ACTOR and not reason:
        return result_timed_out(responder=actor.name, ttl_seconds=ttl_seconds)
    return result_expired(responder=actor.name, reason=reason)


def _expire_locked(bp: Breakpoint, *, actor: Actor, reason: str = "") -> Breakpoint:
    result = _expiry_result(actor=actor, ttl_seconds=bp.ttl_seconds, reason=reason)
    return move(
        bp,
        to=Status.EXPIRED,
        actor=actor,
        result=result,
        event_type=EventType.EXPIRED,
        metadata={"reason": result["feedback"]},
    )


def breakpoint_expire_if_due(breakpoint_id: str) -> None:
    """Expire a waiting breakpoint past its expiresAt now, even with beat down.

    Settled reads (services/reads.py) call it so nobody sees such a breakpoint as
    waiting; decisions call it so nobody can release or cancel one after its time.
    """
    if not Breakpoint.objects.overdue().filter(pk=breakpoint_id).exists():
        return
    with transaction.atomic():
        locked = lock(breakpoint_id)
        if locked.is_overdue():
            _expire_locked(locked, actor=TTL_ACTOR)


def breakpoints_expire_due(
    *, now: datetime | None = None, batch_size: int = EXPIRE_BATCH_SIZE
) -> int:
    """The TTL sweep: expire every waiting breakpoint past expiresAt, in batches.

    Each batch is one transaction: lock the due rows (SKIP LOCKED, so overlapping sweeps
    never take the same row), move them with one conditional UPDATE, then write their
    events, outbox rows and wake-ups in bulk. Returns how many it expired.
    """
    now = now or timezone.now()
    expired = 0
    while True:
        with transaction.atomic():
            due = _lock_due(now=now, limit=batch_size)
            expired += len(_expire_batch(due))
        if len(due) < batch_size:
            return expired


def _lock_due(*, now: datetime, limit: int) -> dict[str, int | None]:
    """Up to `limit` due waiting breakpoints (id -> ttl_seconds), oldest due first, locked."""
    return dict(
        Breakpoint.objects.select_for_update(skip_locked=True)
        .overdue(now)
        .order_by("expires_at")
        .values_list("pk", "ttl_seconds")[:limit]
    )


def _expire_batch(due: dict[str, int | None]) -> list[str]:
    """Expire locked due rows and record it all, as `_expire_locked` does row by row."""
    if not due:
        return []
    results = {ttl: _expiry_result(actor=TTL_ACTOR, ttl_seconds=ttl) for ttl in set(due.values())}
    moved = _update_to_expired(due, results)
    announce(moved)
    event_record_bulk(
        type=EventType.EXPIRED,
        actor=TTL_ACTOR.name,
        metadata_by_breakpoint={
            bp_id: {
                "statusFrom": Status.WAITING,
                "statusTo": Status.EXPIRED,
                "reason": results[due[bp_id]]["feedback"],
            }
            for bp_id in moved
        },
    )
    deliveries_enqueue_bulk(breakpoint_ids=moved, event_type=EventType.EXPIRED)
    return moved


def _update_to_expired(
    due: dict[str, int | None], results: dict[int | None, dict[str, Any]]
) -> list[str]:
    """One UPDATE for the batch, only of rows still waiting; the ids it moved.

    The rows are locked on PostgreSQL, so all of them move; should one have changed since
    it was selected (no row locks, e.g. SQLite), the moved ids are read back.
    """
    now = timezone.now()
    ids = list(due)
    result_for_ttl = Case(
        *(
            When(ttl_seconds=ttl, then=Value(result, output_field=JSONField()))
            for ttl, result in results.items()
        ),
        output_field=JSONField(),
    )
    moved = Breakpoint.objects.filter(pk__in=ids, status=Status.WAITING).update(
        status=Status.EXPIRED, result=result_for_ttl, expired_at=now, updated_at=now
    )
    if moved == len(ids):
        return ids
    return list(
        Breakpoint.objects.filter(pk__in=ids, status=Status.EXPIRED, expired_at=now).values_list(
            "pk", flat=True
        )
    )
