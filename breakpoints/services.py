"""Every write to a breakpoint: create (and auto-approval), feedback/votes/release, cancel, expire.

Each transition is one transaction that locks the row, checks ALLOWED_TRANSITIONS,
moves the status with a conditional UPDATE (so two concurrent releases cannot both
win, on any database) and records the audit event in the same transaction.
Views, admin, tasks and commands call these functions and hold no business rule.
"""

import hashlib
import json
from collections import Counter
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from audit.models import EventType
from audit.services import event_record
from breakpoints import autoapproval, routing
from breakpoints.actors import Actor, is_admin, is_reviewer
from breakpoints.choices import ALLOWED_TRANSITIONS, Status, Strategy
from breakpoints.models import AutoApprovalRule, Breakpoint, WebhookEventType
from breakpoints.payload import payload_options, resolve_fields
from breakpoints.webhooks import deliveries_enqueue
from config.errors import Forbidden, IdempotencyConflict, InvalidInput, InvalidState, NotFound
from reviews.models import Feedback

TTL_ACTOR = Actor.system("ttl")
MAX_TTL_SECONDS = 365 * 24 * 60 * 60
EXPIRE_BATCH_SIZE = 500

_TIMESTAMP_FIELD = {
    Status.RELEASED: "released_at",
    Status.EXPIRED: "expired_at",
    Status.CANCELLED: "cancelled_at",
}


# --- create ------------------------------------------------------------------


def _request_hash(body: dict[str, Any]) -> str:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _idempotent_match(*, agent_id: str, key: str, request_hash: str) -> Breakpoint | None:
    """The earlier breakpoint for this Idempotency-Key, if still within the window.

    A stale one gives its key up so the key can be used again.
    """
    existing = Breakpoint.objects.filter(agent_id=agent_id, idempotency_key=key).first()
    if existing is None:
        return None
    window = timedelta(seconds=settings.BPM_IDEMPOTENCY_WINDOW_SECONDS)
    if existing.created_at < timezone.now() - window:
        Breakpoint.objects.filter(pk=existing.pk).update(idempotency_key=None)
        return None
    if existing.request_hash != request_hash:
        raise IdempotencyConflict(
            "This Idempotency-Key was already used with a different request body.",
            {"breakpointId": existing.pk},
        )
    return existing


def breakpoint_create(
    *,
    actor: Actor,
    payload: Any,
    agent_id: str | None = None,
    run_id: str | None = None,
    title: str | None = None,
    tags: list[str] | None = None,
    ttl_seconds: int | None = None,
    idempotency_key: str | None = None,
) -> tuple[Breakpoint, bool]:
    """Create a waiting breakpoint; returns (breakpoint, created).

    The auto-approval rules are evaluated and the verdict stored; when they recommend
    approval the breakpoint is released at once (an `auto_approved` event, then the
    `released` transition). With an Idempotency-Key, a retry with the same body returns
    the first breakpoint (created=False) and another body raises IdempotencyConflict.
    """
    if not actor.is_agent:
        raise Forbidden("Only agent tokens can create breakpoints.")
    agent_id = agent_id if agent_id is not None else actor.agent_id
    if agent_id != actor.agent_id:
        raise Forbidden(
            "This token may only create breakpoints for its own agentId.",
            {"agentId": actor.agent_id},
        )
    if ttl_seconds is not None and not 1 <= ttl_seconds <= MAX_TTL_SECONDS:
        raise InvalidInput(
            f"ttlSeconds must be between 1 and {MAX_TTL_SECONDS}.",
            {"ttlSeconds": [f"Must be between 1 and {MAX_TTL_SECONDS}."]},
        )
    fields = resolve_fields(payload=payload, title=title, tags=tags)
    body = {
        "agentId": agent_id,
        "runId": run_id,
        "title": title,
        "payload": payload,
        "tags": tags,
        "ttlSeconds": ttl_seconds,
    }
    request_hash = _request_hash(body) if idempotency_key else None

    if idempotency_key:
        existing = _idempotent_match(
            agent_id=agent_id, key=idempotency_key, request_hash=request_hash
        )
        if existing is not None:
            return existing, False
    experts = routing.expert_names(payload.get("expert"))
    now = timezone.now()
    try:
        with transaction.atomic():
            verdict = autoapproval.evaluate(
                key=fields.key,
                tags=fields.tags,
                experts=experts,
                auto_approve_after_n=payload.get("autoApproveAfterN", autoapproval.NO_THRESHOLD),
            )
            bp = Breakpoint.objects.create(
                agent_id=agent_id,
                run_id=run_id or _context_run_id(payload),
                title=fields.title,
                key=fields.key,
                question=fields.question,
                payload=payload,
                tags=fields.tags,
                ttl_seconds=ttl_seconds,
                expires_at=now + timedelta(seconds=ttl_seconds) if ttl_seconds else None,
                idempotency_key=idempotency_key,
                request_hash=request_hash,
                experts=experts,
                strategy=payload.get("strategy") or Strategy.SINGLE,
                auto_approval=verdict.as_dict(),
            )
            _record(
                bp,
                type=EventType.CREATED,
                actor=actor,
                metadata={"statusTo": Status.WAITING, "key": bp.key},
            )
            if verdict.recommended:
                _auto_release(bp, verdict)
    except IntegrityError:
        # A concurrent retry with the same Idempotency-Key won the insert.
        if idempotency_key:
            existing = _idempotent_match(
                agent_id=agent_id, key=idempotency_key, request_hash=request_hash
            )
            if existing is not None:
                return existing, False
        raise
    return bp, True


def _auto_release(bp: Breakpoint, verdict: autoapproval.Verdict) -> None:
    """Release a just-created breakpoint on a rule's say-so; the rule is the responder."""
    responder = verdict.responder or f"rule:{verdict.matched_rule}"
    rule_actor = Actor(name=responder)
    _record(bp, type=EventType.AUTO_APPROVED, actor=rule_actor, metadata=verdict.as_dict())
    _move(
        bp,
        to=Status.RELEASED,
        actor=rule_actor,
        result={
            "approved": True,
            "feedback": f"Auto-approved: {verdict.reason}",
            "respondedBy": responder,
        },
        event_type=EventType.RELEASED,
        metadata={"approved": True, "autoApproved": True, "matchedRule": verdict.matched_rule},
    )


def _context_run_id(payload: dict[str, Any]) -> str | None:
    context = payload.get("context")
    run_id = context.get("runId") if isinstance(context, dict) else None
    return run_id if isinstance(run_id, str) and run_id else None


# --- audit and notification ----------------------------------------------------


def _record(bp: Breakpoint, *, type: str, actor: Actor, metadata: dict[str, Any]) -> None:
    """The audit event, and the webhook outbox rows for it, in the caller's transaction."""
    event_record(breakpoint_id=bp.pk, type=type, actor=actor.name, metadata=metadata)
    if type in WebhookEventType.values:
        deliveries_enqueue(breakpoint=bp, event_type=type)


# --- transitions -------------------------------------------------------------


def _lock(breakpoint_id: str, *, actor: Actor | None = None) -> Breakpoint:
    """Lock the row for this transaction; another agent's breakpoint is not found."""
    queryset = Breakpoint.objects.select_for_update()
    if actor is not None and actor.is_agent:
        queryset = queryset.filter(agent_id=actor.agent_id)
    try:
        return queryset.get(pk=breakpoint_id)
    except Breakpoint.DoesNotExist:
        raise NotFound("Breakpoint not found.") from None


def _move(
    bp: Breakpoint,
    *,
    to: Status,
    actor: Actor,
    result: dict[str, Any],
    event_type: str,
    metadata: dict[str, Any] | None = None,
    also: dict[str, Any] | None = None,
) -> Breakpoint:
    """Apply one allowed transition to a locked row and record it (`also`: more columns)."""
    if to not in ALLOWED_TRANSITIONS[bp.status]:
        raise InvalidState(
            f"Breakpoint is already {bp.status}; it cannot become {to}.",
            current_status=bp.status,
        )
    now = timezone.now()
    changes = {"status": to, "result": result, "updated_at": now, _TIMESTAMP_FIELD[to]: now}
    changes.update(also or {})
    # Conditional UPDATE: correct even where SELECT ... FOR UPDATE is a no-op (SQLite).
    moved = Breakpoint.objects.filter(pk=bp.pk, status=bp.status).update(**changes)
    if not moved:
        current = Breakpoint.objects.values_list("status", flat=True).get(pk=bp.pk)
        raise InvalidState(f"Breakpoint is already {current}.", current_status=current)
    previous = bp.status
    for field, value in changes.items():
        setattr(bp, field, value)
    _record(
        bp,
        type=event_type,
        actor=actor,
        metadata={"statusFrom": previous, "statusTo": to, **(metadata or {})},
    )
    return bp


def _vote(
    *,
    approved: bool,
    comment: str,
    option: str | None,
    responder: str,
    at: datetime,
    seat: str | None = None,
) -> dict[str, Any]:
    """One response, as listed in result.allResponses (and Breakpoint.votes)."""
    vote: dict[str, Any] = {
        "respondedBy": responder,
        "approved": approved,
        "feedback": comment,
        "respondedAt": at.isoformat(),
    }
    if option is not None:
        vote["option"] = option
    if seat is not None:
        vote["seat"] = seat
    return vote


def _release_result(
    *,
    approved: bool,
    comment: str,
    option: str | None,
    responder: str,
    at: datetime,
    seat: str | None = None,
) -> dict[str, Any]:
    """A babysitter BreakpointResult for a reviewer's release."""
    result: dict[str, Any] = {
        "approved": approved,
        "response": comment,
        "feedback": comment,
        "respondedBy": responder,
    }
    if option is not None:
        result["option"] = option
    result["allResponses"] = [
        _vote(
            approved=approved, comment=comment, option=option, responder=responder, at=at, seat=seat
        )
    ]
    return result


VOTING_STRATEGIES = frozenset({Strategy.COLLECT_ALL, Strategy.QUORUM})


def votes_outcome(strategy: str, seat_count: int, approvals: list[bool]) -> bool | None:
    """The decision the votes so far make (True/False), or None while it is still open.

    collect-all: every seat votes; approved only if all approved. quorum: approved once
    more than half the seats approved, rejected once such a majority is out of reach.
    """
    approved = sum(1 for vote in approvals if vote)
    if strategy == Strategy.COLLECT_ALL:
        return approved == seat_count if len(approvals) >= seat_count else None
    if strategy == Strategy.QUORUM:
        majority = seat_count // 2 + 1
        if approved >= majority:
            return True
        if approved + (seat_count - len(approvals)) < majority:
            return False
        return None
    return approvals[-1] if approvals else None


def _votes_result(approved: bool, votes: list[dict[str, Any]]) -> dict[str, Any]:
    """The BreakpointResult of a collect-all or quorum decision.

    feedback/response join the comments of the side that won (so a rejected agent reads
    why); option is the one most chosen on that side; respondedBy lists every voter.
    """
    winning = [vote for vote in votes if vote["approved"] is approved]
    comments = [vote for vote in winning if vote["feedback"].strip()]
    if len(comments) == 1:
        text = comments[0]["feedback"]
    else:
        text = "\n".join(
            f"{vote['respondedBy']} ({vote['seat']}): {vote['feedback']}" for vote in comments
        )
    result: dict[str, Any] = {"approved": approved, "response": text, "feedback": text}
    options = [vote["option"] for vote in winning if vote.get("option")]
    if options:
        result["option"] = Counter(options).most_common(1)[0][0]
    result["respondedBy"] = list(dict.fromkeys(vote["respondedBy"] for vote in votes))
    result["allResponses"] = votes
    return result


def feedback_add(
    *,
    breakpoint_id: str,
    actor: Actor,
    comment: str,
    release: bool = False,
    approved: bool = True,
    option: str | None = None,
) -> tuple[Feedback, Breakpoint]:
    """Add a reviewer's comment; with release=True it also decides the breakpoint.

    On a routed breakpoint (payload.expert) only members of its seats, or admins, may
    release; any reviewer may comment. With collect-all or quorum a release is one seat's
    vote, and the breakpoint is released once the votes decide it. A seat votes once.
    """
    if actor.user is None or not is_reviewer(actor.user):
        raise Forbidden("Only reviewers and admins can give feedback.")
    comment = comment or ""
    if not release and not comment.strip():
        raise InvalidInput(
            "comment may be empty only when release is true.",
            {"comment": ["This field may not be blank unless release is true."]},
        )
    with transaction.atomic():
        bp = _lock(breakpoint_id)
        if not bp.is_waiting:
            raise InvalidState(
                f"Breakpoint is {bp.status}; it no longer takes feedback.",
                current_status=bp.status,
            )
        options = payload_options(bp.payload)
        if option is not None and options and option not in options:
            raise InvalidInput(
                "option must be one of the breakpoint's options.",
                {"option": [f"Must be one of: {', '.join(options)}."]},
            )
        seat: routing.Seat | None = None
        seat_count = 0
        if release and bp.experts:
            seats = routing.seats_for(bp.experts)
            seat_count = len(seats)
            voted = [vote.get("seat") for vote in bp.votes]
            seat = routing.seat_for_response(actor.user, seats, voted)
        voting = seat is not None and bp.strategy in VOTING_STRATEGIES
        if voting:
            decision = votes_outcome(
                bp.strategy, seat_count, [vote["approved"] for vote in bp.votes] + [approved]
            )
        else:
            decision = approved if release else None
        feedback = Feedback.objects.create(
            breakpoint=bp,
            author=actor.name,
            author_user=actor.user,
            comment=comment,
            releases=decision is not None,
            approved=approved if release else None,
            option=option if release else None,
        )
        metadata: dict[str, Any] = {"feedbackId": str(feedback.pk), "release": release}
        if seat is not None:
            metadata["vote"] = {"seat": seat.name, "approved": approved}
        _record(bp, type=EventType.FEEDBACK, actor=actor, metadata=metadata)
        if not release:
            return feedback, bp
        vote = _vote(
            approved=approved,
            comment=comment,
            option=option,
            responder=actor.name,
            at=feedback.created_at,
            seat=seat.name if seat else None,
        )
        votes = [*bp.votes, vote]
        if decision is None:
            _votes_save(bp, votes)
            return feedback, bp
        if voting:
            result = _votes_result(decision, votes)
        else:
            result = _release_result(
                approved=approved,
                comment=comment,
                option=option,
                responder=actor.name,
                at=feedback.created_at,
                seat=seat.name if seat else None,
            )
        _move(
            bp,
            to=Status.RELEASED,
            actor=actor,
            result=result,
            event_type=EventType.RELEASED,
            metadata={"approved": decision, "option": result.get("option", option)},
            also={"votes": votes},
        )
    return feedback, bp


def _votes_save(bp: Breakpoint, votes: list[dict[str, Any]]) -> None:
    """Record a vote that did not decide yet, only while the breakpoint is still waiting."""
    now = timezone.now()
    saved = Breakpoint.objects.filter(pk=bp.pk, status=Status.WAITING).update(
        votes=votes, updated_at=now
    )
    if not saved:
        current = Breakpoint.objects.values_list("status", flat=True).get(pk=bp.pk)
        raise InvalidState(f"Breakpoint is already {current}.", current_status=current)
    bp.votes, bp.updated_at = votes, now


def breakpoint_always_approve(
    *, breakpoint_id: str, actor: Actor, comment: str = ""
) -> tuple[Feedback, Breakpoint, AutoApprovalRule]:
    """A reviewer's "Always approve": approve (or vote approve) and add an auto-approve rule.

    The rule matches exactly this breakpoint's key and records the reviewer as its
    author; an identical existing rule is reused. Refused when the agent sent
    presentAlwaysApprove: false.
    """
    with transaction.atomic():
        bp = _lock(breakpoint_id)
        if not autoapproval.offers_always_approve(bp.payload):
            raise InvalidInput(
                "This breakpoint does not offer Always approve (presentAlwaysApprove is false).",
                {"presentAlwaysApprove": ["The agent set this to false."]},
            )
        feedback, bp = feedback_add(
            breakpoint_id=breakpoint_id,
            actor=actor,
            comment=comment,
            release=True,
            approved=True,
        )
        rule = autoapproval.rule_always_approve_key(
            actor=actor, key=bp.key, note=f"Always approve, from breakpoint {bp.pk}"
        )
    return feedback, bp, rule


def breakpoint_cancel(*, breakpoint_id: str, actor: Actor, reason: str = "") -> Breakpoint:
    """Cancel a waiting breakpoint (its agent, or an admin). Cancelling twice is a no-op."""
    if not actor.is_agent and not (actor.user is not None and is_admin(actor.user)):
        raise Forbidden("Only the breakpoint's agent or an admin can cancel it.")
    with transaction.atomic():
        bp = _lock(breakpoint_id, actor=actor)
        if bp.status == Status.CANCELLED:
            return bp
        feedback = reason.strip() or f"Cancelled by {actor.name}."
        return _move(
            bp,
            to=Status.CANCELLED,
            actor=actor,
            result={"approved": False, "feedback": feedback, "respondedBy": actor.name},
            event_type=EventType.CANCELLED,
            metadata={"reason": reason},
        )


def breakpoint_expire(*, breakpoint_id: str, actor: Actor, reason: str = "") -> Breakpoint:
    """Expire a waiting breakpoint: admins by hand, the system when its TTL has passed."""
    is_system = actor.user is None and not actor.is_agent
    if not is_system and not (actor.user is not None and is_admin(actor.user)):
        raise Forbidden("Only admins can expire breakpoints.")
    with transaction.atomic():
        bp = _lock(breakpoint_id)
        return _expire_locked(bp, actor=actor, reason=reason)


def _expire_locked(bp: Breakpoint, *, actor: Actor, reason: str = "") -> Breakpoint:
    if actor == TTL_ACTOR:
        feedback = reason or f"Expired: no decision within {bp.ttl_seconds} seconds."
    else:
        feedback = reason or f"Expired by {actor.name}."
    return _move(
        bp,
        to=Status.EXPIRED,
        actor=actor,
        result={"approved": False, "feedback": feedback, "respondedBy": actor.name},
        event_type=EventType.EXPIRED,
        metadata={"reason": feedback},
    )


def is_overdue(status: str, expires_at: datetime | None) -> bool:
    return status == Status.WAITING and expires_at is not None and expires_at <= timezone.now()


def breakpoint_expire_if_due(breakpoint_id: str) -> None:
    """Expire on read: nobody sees a waiting breakpoint past its expiresAt, even with beat down."""
    with transaction.atomic():
        locked = _lock(breakpoint_id)
        if is_overdue(locked.status, locked.expires_at):
            _expire_locked(locked, actor=TTL_ACTOR)


def breakpoints_expire_due(
    *, now: datetime | None = None, batch_size: int = EXPIRE_BATCH_SIZE
) -> int:
    """The TTL sweep: expire every waiting breakpoint past expiresAt, in batches.

    Rows are taken with SKIP LOCKED, so overlapping sweeps never expire one twice.
    """
    now = now or timezone.now()
    expired = 0
    while True:
        with transaction.atomic():
            due = list(
                Breakpoint.objects.select_for_update(skip_locked=True)
                .filter(status=Status.WAITING, expires_at__lte=now)
                .order_by("expires_at")[:batch_size]
            )
            for bp in due:
                try:
                    _expire_locked(bp, actor=TTL_ACTOR)
                except InvalidState:
                    continue  # moved by someone else meanwhile (SQLite has no row locks)
                expired += 1
        if len(due) < batch_size:
            return expired


# --- retention -----------------------------------------------------------------

PURGE_BATCH_SIZE = 1000


def breakpoints_purge(*, older_than_days: int) -> int:
    """Delete finished breakpoints (with feedback, events, deliveries) older than the cutoff.

    Waiting breakpoints are never purged. Deletes in batches to keep transactions short.
    """
    if older_than_days < 0:
        raise InvalidInput("older_than_days must be 0 or more.")
    cutoff = timezone.now() - timedelta(days=older_than_days)
    finished = Breakpoint.objects.exclude(status=Status.WAITING).filter(updated_at__lt=cutoff)
    purged = 0
    while True:
        ids = list(finished.values_list("pk", flat=True)[:PURGE_BATCH_SIZE])
        if not ids:
            return purged
        with transaction.atomic():
            Breakpoint.objects.filter(pk__in=ids).delete()
        purged += len(ids)
