"""Creating breakpoints: validation, idempotent retries, and auto-approval at birth."""

import hashlib
import json
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts import experts as routing
from accounts.requesters import requester_bind
from audit.models import EventType
from breakpoints.answers.results import VIA_GRANT, VIA_RULE, result_auto_approved
from breakpoints.answers.voting import VOTING_STRATEGIES
from breakpoints.models import Breakpoint
from breakpoints.payload import form_schema
from breakpoints.payload.validation import resolve_fields
from breakpoints.services.nudges import timeout_columns
from breakpoints.services.transitions import feedback_cached, move, record
from core import limits
from core.actors import Actor
from core.choices import Status, Strategy
from core.digests import content_digest
from core.exceptions import Forbidden, IdempotencyConflict, InvalidInput
from grants import services as grants
from grants.models import Grant
from infra.db.prepared import insert
from infra.db.together import inserts_held
from policies import answers, autoapproval, configuration, foureyes, shadow
from policies.routes import TIMEOUT_KEYS, route_defaults, routes_matching


def _request_hash(body: dict[str, Any]) -> str:
    """The hash that tells a retry from another request (a null requestedBy is left out,
    so retries of a request made before requestedBy existed still match)."""
    if body.get("requestedBy") is None:
        body = {key: value for key, value in body.items() if key != "requestedBy"}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _idempotent_match(*, agent_id: str, key: str, request_hash: str | None) -> Breakpoint | None:
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
    requested_by: str | None = None,
) -> tuple[Breakpoint, bool]:
    """Create a waiting breakpoint; returns (breakpoint, created).

    The auto-approval rules are evaluated and the verdict stored; when they recommend
    approval the breakpoint is released at once (an `auto_approved` event, then the
    `released` transition); a shadow rule's would-be approval is an event (_shadow_record). With an Idempotency-Key, a retry with the same body returns
    the first breakpoint (created=False) and another body raises IdempotencyConflict.
    `requested_by` is bound to the token's owner or a known person (accounts.requesters);
    the payloadDigest is computed once, at the insert (core.digests).
    """
    agent_id = _creating_agent(actor, agent_id)
    _check_ttl(ttl_seconds)
    requester = requester_bind(owner=actor.owner, requested=requested_by)
    fields = resolve_fields(payload=payload, title=title, tags=tags)
    body = {"agentId": agent_id, "runId": run_id, "title": title, "payload": payload}
    body.update(tags=tags, ttlSeconds=ttl_seconds, requestedBy=requested_by)
    request_hash = _request_hash(body) if idempotency_key else None
    if idempotency_key:
        existing = _idempotent_match(
            agent_id=agent_id, key=idempotency_key, request_hash=request_hash
        )
        if existing is not None:
            return existing, False
    row = Breakpoint(
        agent_id=agent_id,
        run_id=run_id or _context_run_id(payload),
        title=fields.title,
        key=fields.key,
        question=fields.question,
        payload=payload,
        tags=fields.tags,
        ttl_seconds=ttl_seconds,
        idempotency_key=idempotency_key,
        request_hash=request_hash,
        experts=routing.expert_names(payload.get("expert")),
        strategy=payload.get("strategy") or Strategy.SINGLE,
        requested_by=requester,
    )
    try:
        return _insert(row, actor=actor), True
    except IntegrityError:
        # A concurrent retry with the same Idempotency-Key won the insert.
        if idempotency_key:
            existing = _idempotent_match(
                agent_id=agent_id, key=idempotency_key, request_hash=request_hash
            )
            if existing is not None:
                return existing, False
        raise


def _creating_agent(actor: Actor, agent_id: str | None) -> str:
    """The agentId the breakpoint is for: only an agent creates, and only for itself."""
    if actor.agent_id is None:  # not an agent
        raise Forbidden("Only agent tokens can create breakpoints.")
    if agent_id is not None and agent_id != actor.agent_id:
        raise Forbidden(
            "This token may only create breakpoints for its own agentId.",
            {"agentId": actor.agent_id},
        )
    return actor.agent_id


def _check_ttl(ttl_seconds: int | None) -> None:
    low, high = limits.MIN_TTL_SECONDS, limits.MAX_TTL_SECONDS
    if ttl_seconds is not None and not low <= ttl_seconds <= high:
        raise InvalidInput(
            f"ttlSeconds must be between {low} and {high}.",
            {"ttlSeconds": [f"Must be between {low} and {high}."]},
        )


def _insert(bp: Breakpoint, *, actor: Actor) -> Breakpoint:
    """Save a new breakpoint with the rules' verdict, record it, auto-release if they say so.

    The routes, rules, always-break-on tags and webhooks it reads are each process's copies,
    checked with one read of the configuration's generation (policies.configuration), in
    the same statement as its first read, the key's streak of approvals."""
    with transaction.atomic(), configuration.reading():
        now = timezone.now()
        auto_approve_after_n = bp.payload.get("autoApproveAfterN", limits.NO_AUTO_APPROVE_THRESHOLD)
        # The block's first read: the configuration comes in the same statement.
        streak = autoapproval.consecutive_approvals(
            bp.key,
            agent_id=bp.agent_id,
            auto_approve_after_n=auto_approve_after_n,
            explicit_key=bp.key_is_explicit,
        )
        routes = routes_matching(key=bp.key, tags=bp.tags, experts=bp.experts)
        defaults = route_defaults(routes)
        policy = {**defaults, **_timeout_keys(bp.payload)}
        # Either may ask for four eyes; neither can lift what the other (or the service) asks.
        bp.prevent_self_review = bool(
            defaults.get("preventSelfReview") or bp.payload.get("preventSelfReview")
        )
        _check_four_eyes_timeout(bp, policy, defaults)
        needs_answer = form_schema.needs_answer(bp.payload)
        _check_answer_timeout(bp, policy, needs_answer=needs_answer)
        _check_four_eyes_requester(bp)
        verdict = autoapproval.evaluate(
            key=bp.key,
            tags=bp.tags,
            experts=bp.experts,
            auto_approve_after_n=auto_approve_after_n,
            agent_id=bp.agent_id,
            explicit_key=bp.key_is_explicit,
            prevent_self_review=bp.prevent_self_review,
            needs_answer=needs_answer,
            streak=streak,
        )
        bp.payload_digest = content_digest(question=bp.question, title=bp.title, payload=bp.payload)
        bp.expires_at = now + timedelta(seconds=bp.ttl_seconds) if bp.ttl_seconds else None
        for field, value in timeout_columns(policy, now).items():
            setattr(bp, field, value)
        grant = _grant_used(bp, verdict)
        bp.auto_approval = verdict.as_dict() if grant is None else _granted(grant, verdict)
        feedback_cached(bp, [])  # a new one has none: no query for it
        # bp.save(force_insert=True), its event and its outbox rows: one statement, built
        # once (infra.db.prepared, infra.db.together)
        with inserts_held():
            insert([bp])
            record(
                bp,
                type=EventType.CREATED,
                actor=actor,
                metadata={"statusTo": Status.WAITING, "key": bp.key},
            )
        _at_birth(bp, verdict, grant)
        # Still none: the answer shows it as written (breakpoints.api.views.create).
    return bp


def _at_birth(bp: Breakpoint, verdict: autoapproval.Verdict, grant: Grant | None) -> None:
    """A rule (or the streak) that approves releases it; else a grant that covers it; else
    what shadow rules would have approved is recorded (it waits for a person)."""
    if verdict.recommended:
        _auto_release(bp, verdict)
    elif grant is not None:
        _grant_release(bp, grant)
    elif verdict.shadow_rules:
        _shadow_record(bp, verdict)


def _check_four_eyes_requester(bp: Breakpoint) -> None:
    """Refuse (400) a breakpoint under four eyes that names no requester: an ownerless
    token (or a trigger rule) that leaves requestedBy out would keep nobody from deciding."""
    four_eyes = foureyes.under_four_eyes(bp.prevent_self_review)
    if problem := foureyes.requester_problem(bp.requested_by, four_eyes=four_eyes):
        raise InvalidInput(f"requestedBy: {problem}", {"requestedBy": [problem]})


def _check_four_eyes_timeout(
    bp: Breakpoint, policy: dict[str, Any], defaults: dict[str, Any]
) -> None:
    """Refuse (400) an onTimeout of approve, the payload's or a route's, under four eyes."""
    problem = foureyes.timeout_approve_problem(policy, four_eyes=bp.prevent_self_review)
    if problem is None:
        return
    if _timeout_keys(bp.payload).get("onTimeout") is None:
        problem += " (onTimeout: approve is a default of a route it matches: send another.)"
    raise InvalidInput(f"payload.onTimeout: {problem}", {"payload.onTimeout": [problem]})


def _check_answer_timeout(bp: Breakpoint, policy: dict[str, Any], *, needs_answer: bool) -> None:
    """Refuse (400) an onTimeout of approve, the payload's or a route's, for a form only a
    person can answer (policies.answers)."""
    problem = answers.timeout_approve_problem(policy, needs_answer=needs_answer)
    if problem is None:
        return
    if _timeout_keys(bp.payload).get("onTimeout") is None:
        problem += " (onTimeout: approve is a default of a route it matches: send another.)"
    raise InvalidInput(f"payload.onTimeout: {problem}", {"payload.onTimeout": [problem]})


def _auto_release(bp: Breakpoint, verdict: autoapproval.Verdict) -> None:
    """Release a just-created breakpoint on a rule's say-so; the rule is the responder."""
    responder = verdict.responder or f"rule:{verdict.matched_rule}"
    rule_actor = Actor(name=responder)
    record(bp, type=EventType.AUTO_APPROVED, actor=rule_actor, metadata=verdict.as_dict())
    move(
        bp,
        to=Status.RELEASED,
        actor=rule_actor,
        result=result_auto_approved(
            responder=responder,
            reason=verdict.reason,
            at=timezone.now(),
            values=form_schema.as_proposed(bp.payload),
        ),
        event_type=EventType.RELEASED,
        metadata={"approved": True, "autoApproved": True, "matchedRule": verdict.matched_rule},
        via=VIA_RULE,
    )


def _grant_used(bp: Breakpoint, verdict: autoapproval.Verdict) -> Grant | None:
    """The grant that approves it, one of its uses spent, or None. Asked only when no rule
    approves and nothing forbids an automatic approval (the verdict's reason is then "No
    matching rule": not four eyes, a form needing an answer, a never-auto-approve rule or
    an always-break-on tag), and never for a voting breakpoint. No query unless a live
    grant exists for its agent and key (grants.selectors.live_pair)."""
    if verdict.recommended or verdict.reason != autoapproval.NO_MATCHING_RULE:
        return None
    if bp.strategy in VOTING_STRATEGIES:
        return None
    return grants.grant_use(
        grants.Later(
            breakpoint_id=bp.pk,
            agent_id=bp.agent_id,
            key=bp.key,
            run_id=bp.run_id,
            proposal=form_schema.as_proposed(bp.payload),
            experts=bp.experts,
        )
    )


def _granted(grant: Grant, verdict: autoapproval.Verdict) -> dict[str, Any]:
    """The autoApproval of a breakpoint a grant approved: the rules' verdict, recommended
    by the grant (no rule matched), naming the grant and its granter."""
    return {
        "recommended": True,
        "reason": f"Granted by {grant.granted_by} (grant {grant.pk})",
        "matchedRule": None,
        "consecutiveApprovals": verdict.consecutive_approvals,
        "grantId": grant.pk,
        "grantedBy": grant.granted_by,
    }


def _grant_release(bp: Breakpoint, grant: Grant) -> None:
    """Release a just-created breakpoint on a grant's say-so: `grant:<id>` responds, the
    receipt's via is `grant` and it names the grant and its granter."""
    responder = f"grant:{grant.pk}"
    grant_actor = Actor(name=responder)
    named = {"grantId": grant.pk, "grantedBy": grant.granted_by}
    verdict: dict[str, Any] = bp.auto_approval or {}  # _granted's, set before the insert
    record(bp, type=EventType.AUTO_APPROVED, actor=grant_actor, metadata=verdict)
    move(
        bp,
        to=Status.RELEASED,
        actor=grant_actor,
        result=result_auto_approved(
            responder=responder,
            reason=verdict["reason"],
            at=timezone.now(),
            values=form_schema.as_proposed(bp.payload),
        ),
        event_type=EventType.RELEASED,
        metadata={"approved": True, "autoApproved": True, "matchedRule": None, **named},
        via=VIA_GRANT,
        grant=named,
    )


def _shadow_record(bp: Breakpoint, verdict: autoapproval.Verdict) -> None:
    """Shadow rules would have approved the breakpoint, which waits for a person: one
    `auto_approval.shadow` event per rule (the rule as actor), and the fires the rule's
    counts read (policies.shadow)."""
    for rule_id in verdict.shadow_rules:
        record(
            bp,
            type=EventType.AUTO_APPROVAL_SHADOW,
            actor=Actor(name=f"rule:{rule_id}"),
            metadata={
                "matchedRule": rule_id,
                "reason": f"Shadow auto-approve rule {rule_id} would have approved it",
            },
        )
    shadow.shadow_fires_record(breakpoint_id=bp.pk, rule_ids=verdict.shadow_rules)


def _timeout_keys(payload: dict[str, Any]) -> dict[str, Any]:
    """The timeout keys the agent set (null counts as not set: a route's default applies)."""
    return {key: payload[key] for key in TIMEOUT_KEYS if payload.get(key) is not None}


def _context_run_id(payload: dict[str, Any]) -> str | None:
    context = payload.get("context")
    run_id = context.get("runId") if isinstance(context, dict) else None
    return run_id if isinstance(run_id, str) and run_id else None
