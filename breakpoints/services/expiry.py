"""Expiry: a waiting breakpoint ends when its time is up, whoever notices first.

An admin expires one by hand; a read or a decision that meets an overdue one expires it
on the spot (breakpoint_expire_if_due); beat's TTL sweep expires the rest in batches.
"""

import json
import logging
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.db.models import JSONField
from django.db.models.expressions import RawSQL
from django.utils import timezone
from prometheus_client import Counter

from audit.models import EventType
from audit.services import event_record_bulk
from breakpoints.answers.results import (
    TIMEOUT_POLICY_RESPONDER,
    VIA_SYSTEM,
    result_expired,
    result_sealed,
    result_timed_out,
    result_timeout_policy,
    result_timeout_refused,
)
from breakpoints.models import Breakpoint
from breakpoints.payload import form_schema
from breakpoints.representation.contract import represented
from breakpoints.services.nudges import escalate_locked
from breakpoints.services.refusals import refusals_recorded
from breakpoints.services.transitions import lock, move
from breakpoints.wakeups import announce
from core.actors import Actor, require_admin
from core.choices import OnTimeout, Status
from core.digests import NotDigestible
from notifications.services import deliveries_enqueue_bulk
from policies import autoapproval

TTL_ACTOR = Actor.system("ttl")
TIMEOUT_POLICY_ACTOR = Actor(name=TIMEOUT_POLICY_RESPONDER)
EXPIRE_BATCH_SIZE = 1000

logger = logging.getLogger(__name__)

# A row stored before the doors refused numbers no digest covers (core.digests) cannot be
# approved by its timeout policy: skipped, logged and counted, never a stopped sweep.
NOT_DIGESTIBLE_SKIPPED = Counter(
    "bpm_breakpoints_not_digestible_skipped",
    "Overdue breakpoints left waiting because their proposal holds a number no digest "
    "covers (stored before it was refused): by where they were met (sweep, read).",
    ["where"],
)


def breakpoint_expire(
    *, breakpoint_id: str, actor: Actor, reason: str = "", via: str | None = None
) -> Breakpoint:
    """Expire a waiting breakpoint: admins by hand, the system when its TTL has passed.
    `via`: where it was asked (its receipt names it; unset: the API, or system). A refusal
    (not an admin, no longer waiting) is recorded (services.refusals)."""
    with refusals_recorded(breakpoint_id=breakpoint_id, actor=actor, via=via):
        require_admin(actor, "Only admins can expire breakpoints.", or_system=True)
        with transaction.atomic():
            bp = lock(breakpoint_id)
            return _expire_locked(bp, actor=actor, reason=reason, via=via)


def _expiry_result(*, actor: Actor, ttl_seconds: int | None, reason: str = "") -> dict[str, Any]:
    if actor == TTL_ACTOR and not reason:
        return result_timed_out(responder=actor.name, ttl_seconds=ttl_seconds)
    return result_expired(responder=actor.name, reason=reason)


def _expire_locked(
    bp: Breakpoint, *, actor: Actor, reason: str = "", via: str | None = None
) -> Breakpoint:
    result = _expiry_result(actor=actor, ttl_seconds=bp.ttl_seconds, reason=reason)
    return move(
        bp,
        to=Status.EXPIRED,
        actor=actor,
        result=result,
        event_type=EventType.EXPIRED,
        metadata={"reason": result["feedback"]},
        via=via,
    )


def breakpoint_expire_if_due(breakpoint_id: str) -> None:
    """Expire a waiting breakpoint past its expiresAt now, even with beat down.

    Settled reads (services/reads.py) call it so nobody sees such a breakpoint as
    waiting; decisions call it so nobody can release or cancel one after its time.
    """
    if not Breakpoint.objects.overdue().filter(pk=breakpoint_id).exists():
        return
    try:
        with transaction.atomic():
            locked = lock(breakpoint_id)
            if locked.is_overdue():
                _time_out_locked(locked)
    except NotDigestible as exc:
        _skipped(breakpoint_id, exc, where="read")


def _time_out_locked(bp: Breakpoint) -> Breakpoint:
    """A locked breakpoint past expiresAt: what its onTimeout policy says, else expire.

    approve/reject release it with the policy as responder (approve obeys the rules that
    forbid automatic approval: then it expires, saying why); escalate routes it also to
    escalateTo and waits one more TTL, once; expire (the default) expires it.
    """
    policy = bp.on_timeout
    if policy == OnTimeout.ESCALATE and escalate_locked(bp, extend_ttl=True):
        return bp
    if policy not in (OnTimeout.APPROVE, OnTimeout.REJECT):
        return _expire_locked(bp, actor=TTL_ACTOR)
    approved = policy == OnTimeout.APPROVE
    forbidden = (
        autoapproval.forbidding_reason(
            key=bp.key,
            tags=bp.tags,
            experts=bp.experts,
            prevent_self_review=bp.prevent_self_review,
            needs_answer=form_schema.needs_answer(bp.payload),
        )
        if approved
        else None
    )
    if forbidden is not None:
        result = result_timeout_refused(
            responder=TTL_ACTOR.name,
            ttl_seconds=bp.ttl_seconds,
            requested=policy,
            reason=forbidden,
        )
        return move(
            bp,
            to=Status.EXPIRED,
            actor=TTL_ACTOR,
            result=result,
            event_type=EventType.EXPIRED,
            metadata={"reason": result["feedback"], "timeoutPolicy": result["timeoutPolicy"]},
        )
    return move(
        bp,
        to=Status.RELEASED,
        actor=TIMEOUT_POLICY_ACTOR,
        result=result_timeout_policy(
            approved=approved,
            ttl_seconds=bp.ttl_seconds,
            at=timezone.now(),
            votes=bp.votes,
            values=form_schema.as_proposed(bp.payload),
        ),
        event_type=EventType.RELEASED,
        metadata={"approved": approved, "timeoutPolicy": policy},
    )


def breakpoints_expire_due(
    *, now: datetime | None = None, batch_size: int = EXPIRE_BATCH_SIZE
) -> int:
    """The TTL sweep: expire every waiting breakpoint past expiresAt, in batches.

    Each batch is one transaction: lock the due rows (SKIP LOCKED, so overlapping sweeps
    never take the same row), move them with one conditional UPDATE, then write their
    events, outbox rows and wake-ups in bulk. The few with another onTimeout policy are
    timed out one by one. Returns how many it expired or released.
    """
    now = now or timezone.now()
    ended = 0
    skipped: set[str] = set()
    while True:
        with transaction.atomic():
            with_policy = _lock_due_with_policy(now=now, limit=batch_size, skipped=skipped)
            for bp in with_policy:
                ended += _timed_out_or_skipped(bp, skipped)
            due = _lock_due(now=now, limit=batch_size)
            ended += len(_expire_batch(due))
        if len(due) < batch_size and len(with_policy) < batch_size:
            return ended


def _timed_out_or_skipped(bp: Breakpoint, skipped: set[str]) -> bool:
    """Time out one locked row (in a savepoint); a row its policy cannot end (NotDigestible)
    is rolled back to waiting, logged, counted and added to `skipped`. Whether it ended."""
    try:
        with transaction.atomic():
            return _time_out_locked(bp).status != Status.WAITING
    except NotDigestible as exc:
        skipped.add(bp.pk)
        _skipped(bp.pk, exc, where="sweep")
        return False


def _skipped(breakpoint_id: str, exc: NotDigestible, *, where: str) -> None:
    NOT_DIGESTIBLE_SKIPPED.labels(where=where).inc()
    logger.warning(
        "Breakpoint %s is overdue but its timeout policy cannot end it: %s (stored before "
        "such numbers were refused; an admin may expire it, its agent cancel it)",
        breakpoint_id,
        exc.message,
        extra={"breakpoint_id": breakpoint_id, "where": where},
    )


def _lock_due_with_policy(*, now: datetime, limit: int, skipped: set[str]) -> list[Breakpoint]:
    """Due waiting breakpoints whose onTimeout is not expire (rare), but those `skipped`
    by this sweep, locked."""
    return list(
        Breakpoint.objects.select_for_update(skip_locked=True)
        .overdue(now)
        .exclude(on_timeout=OnTimeout.EXPIRE)
        .exclude(pk__in=skipped)
        .order_by("expires_at")[:limit]
    )


def _lock_due(*, now: datetime, limit: int) -> dict[str, Breakpoint]:
    """Up to `limit` due waiting breakpoints (by id; with what a receipt names), oldest due
    first, locked."""
    due = (
        Breakpoint.objects.select_for_update(skip_locked=True)
        .overdue(now)
        .filter(on_timeout=OnTimeout.EXPIRE)
        .order_by("expires_at")
        .only("pk", "ttl_seconds", "agent_id", "run_id", "payload_digest")[:limit]
    )
    return {bp.pk: bp for bp in due}


def _expire_batch(due: dict[str, Breakpoint]) -> list[str]:
    """Expire locked due rows and record it all, as `_expire_locked` does row by row."""
    if not due:
        return []
    now = timezone.now()
    results = {bp_id: _sealed_expiry(bp, now) for bp_id, bp in due.items()}
    moved = _update_to_expired(results, now)
    announce(moved)
    event_record_bulk(
        type=EventType.EXPIRED,
        actor=TTL_ACTOR.name,
        metadata_by_breakpoint={
            bp_id: {
                "statusFrom": Status.WAITING,
                "statusTo": Status.EXPIRED,
                "reason": results[bp_id]["feedback"],
            }
            for bp_id in moved
        },
    )
    deliveries_enqueue_bulk(
        breakpoint_ids=moved, event_type=EventType.EXPIRED, represented=represented
    )
    return moved


def _sealed_expiry(bp: Breakpoint, now: datetime) -> dict[str, Any]:
    """The TTL's result for one row, with its payloadDigest and receipt (as `move` seals)."""
    return result_sealed(
        _expiry_result(actor=TTL_ACTOR, ttl_seconds=bp.ttl_seconds),
        breakpoint_id=bp.pk,
        agent_id=bp.agent_id,
        run_id=bp.run_id,
        status=Status.EXPIRED,
        via=VIA_SYSTEM,
        at=now,
        payload_digest=bp.payload_digest,
    )


def _update_to_expired(results: dict[str, dict[str, Any]], now: datetime) -> list[str]:
    """One UPDATE for the batch (each row its own sealed result), only of rows still
    waiting; the ids it moved.

    The rows are locked on PostgreSQL, so all of them move; should one have changed since
    it was selected (no row locks, e.g. SQLite), the moved ids are read back.
    """
    ids = list(results)
    moved = Breakpoint.objects.filter(pk__in=ids, status=Status.WAITING).update(
        status=Status.EXPIRED, result=_result_of_row(results), expired_at=now, updated_at=now
    )
    if moved == len(ids):
        return ids
    return list(
        Breakpoint.objects.filter(pk__in=ids, status=Status.EXPIRED, expired_at=now).values_list(
            "pk", flat=True
        )
    )


def _result_of_row(results: dict[str, dict[str, Any]]) -> RawSQL:
    """Each row's result, looked up by its id in one JSON object of the batch's results.

    (A CASE with a branch per row is compared branch by branch on every row: with 1,000
    rows a batch, that was most of the sweep's time.)
    """
    id_column = (
        f"{connection.ops.quote_name(Breakpoint._meta.db_table)}.{connection.ops.quote_name('id')}"
    )
    if connection.vendor == "postgresql":
        sql = f"(%s::jsonb -> {id_column})"
    else:  # SQLite's JSON functions take a path; an id is "bp-" and hex digits
        sql = f"""json_extract(%s, '$."' || {id_column} || '"')"""
    return RawSQL(sql, [json.dumps(results)], output_field=JSONField())
