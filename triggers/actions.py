"""What a matching rule does, through the same services as people do.

In two parts: `plan` renders the rule's templates over the event (the costly part, done
without the database and outside any transaction), `run` selects and acts with them.

The actor is `trigger:<rule name>` with the rule owner's permissions (a release needs a
reviewer who may release; a cancel an admin) and the event id in every audit event it
causes; the owner is the requester of each breakpoint a rule creates (under four eyes,
someone else decides it). Each action returns what it did per breakpoint; a service's refusal is that
breakpoint's outcome, is recorded by the service as a `refused` audit event on it (the
shape every channel gets), and never stops the others.
"""

from dataclasses import dataclass, field, replace
from typing import Any

from breakpoints import services
from core.actors import Actor
from core.choices import Via
from core.exceptions import DomainError, InvalidInput
from core.limits import MAX_AGENT_ID_LENGTH, MAX_COMMENT_LENGTH, MAX_REASON_LENGTH
from triggers.expressions import Budget, render
from triggers.forwarding import forward_enqueue
from triggers.models import ExternalEvent, TriggerAction, TriggerRule
from triggers.selection import Selector, render_selector, select_waiting

Taken = dict[str, Any]


def actor_for(rule: TriggerRule, event: ExternalEvent, agent_id: str | None = None) -> Actor:
    return Actor(
        name=f"trigger:{rule.name}",
        user=rule.owner,
        agent_id=agent_id,
        context={"eventId": event.pk, "triggerRule": rule.name},
        handle=rule.name,  # a refusal is recorded as trigger:<rule name>
    )


@dataclass(frozen=True)
class Plan:
    """A rule's action for one event with every template rendered: what `run` does with
    the database, made beforehand without it (and without any lock)."""

    selector: Selector | None = None  # release and cancel: which breakpoints
    taken: Taken = field(default_factory=dict)  # what each taken action reports, rendered
    agent_id: str = ""  # create: the agent the breakpoint is created for


def plan(rule: TriggerRule, event: ExternalEvent, budget: Budget) -> Plan:
    """Render the rule's templates over the event within `budget` (raises
    ExpressionError, PatternError or InvalidInput, the rule's error)."""
    if rule.action == TriggerAction.CREATE:
        return _create_plan(rule, event, budget)
    if rule.action == TriggerAction.FORWARD:
        return Plan()
    selector = render_selector(rule.params.get("selector") or {}, event.payload, budget)
    return Plan(selector=selector, taken=_rendered(rule, event, budget))


def run(
    rule: TriggerRule, event: ExternalEvent, plan: Plan, *, dry_run: bool = False
) -> list[Taken]:
    """Do the planned action for this event (or, dry_run, say what it would do)."""
    if rule.action == TriggerAction.CREATE:
        return [_create(rule, event, plan, dry_run)]
    if rule.action == TriggerAction.FORWARD:
        outcome = "would forward" if dry_run else _forward(rule, event)
        return [{"action": "forward", "outcome": outcome}]
    selected = select_waiting(plan.selector or Selector())
    if not selected:
        return [{"action": rule.action, "outcome": "no waiting breakpoint matched"}]
    return [_on_breakpoint(rule, event, bp.pk, plan.taken, dry_run) for bp in selected]


def _on_breakpoint(
    rule: TriggerRule, event: ExternalEvent, breakpoint_id: str, rendered: Taken, dry: bool
) -> Taken:
    taken: Taken = {"action": rule.action, "breakpointId": breakpoint_id, **rendered}
    if dry:
        return {**taken, "outcome": f"would {rule.action}"}
    actor = actor_for(rule, event)
    try:
        if rule.action == TriggerAction.RELEASE:
            services.feedback_add(
                breakpoint_id=breakpoint_id,
                actor=actor,
                comment=taken["feedback"],
                release=True,
                approved=taken["approved"],
                via=Via.TRIGGER,
            )
        else:
            services.breakpoint_cancel(
                breakpoint_id=breakpoint_id, actor=actor, reason=taken["reason"], via=Via.TRIGGER
            )
    except DomainError as exc:  # the service recorded a refusal it audits
        return {**taken, "outcome": "refused", "error": exc.message}
    return {**taken, "outcome": "released" if rule.action == TriggerAction.RELEASE else "cancelled"}


def _rendered(rule: TriggerRule, event: ExternalEvent, budget: Budget) -> Taken:
    """A release's verdict and feedback, or a cancel's reason, from the event."""
    params, payload = rule.params, event.payload
    if rule.action == TriggerAction.RELEASE:
        feedback = render(params.get("feedback") or "", payload, budget)[:MAX_COMMENT_LENGTH]
        return {
            "approved": params.get("approved", True) is not False,
            "feedback": feedback or f"Released by trigger {rule.name} on event {event.pk}.",
        }
    # Cut to the limits people have: an event's values may be as long as its body.
    return {"reason": render(params.get("reason") or "", payload, budget)[:MAX_REASON_LENGTH]}


def _create_plan(rule: TriggerRule, event: ExternalEvent, budget: Budget) -> Plan:
    """A breakpoint from the rule's templates: question, title, tags, expert, ttl, runId."""
    params, payload = rule.params, event.payload
    agent_id = render(params.get("agentId") or f"trigger-{rule.name}", payload, budget)
    if not agent_id or len(agent_id) > MAX_AGENT_ID_LENGTH:
        raise InvalidInput(
            f"agentId renders to {agent_id!r}: it must be 1 to {MAX_AGENT_ID_LENGTH} characters."
        )
    body = {"question": render(params.get("question") or "", payload, budget)}
    for key in ("title", "expert", "breakpointId"):
        if params.get(key):
            body[key] = render(params[key], payload, budget)
    tags = [render(tag, payload, budget) for tag in params.get("tags") or []]
    run_id = render(params["runId"], payload, budget) if params.get("runId") else None
    taken: Taken = {"action": "create", "payload": body, "tags": tags, "runId": run_id}
    return Plan(taken=taken, agent_id=agent_id)


def _create(rule: TriggerRule, event: ExternalEvent, plan: Plan, dry_run: bool) -> Taken:
    taken = dict(plan.taken)
    if dry_run:
        return {**taken, "outcome": "would create"}
    try:
        # The rule's owner asked for it: its requester (so four eyes has one to keep out).
        actor = replace(
            actor_for(rule, event, agent_id=plan.agent_id), owner=rule.owner.get_username()
        )
        bp, created = services.breakpoint_create(
            actor=actor,
            payload=dict(taken["payload"]),
            run_id=taken["runId"],
            tags=list(taken["tags"]) or None,
            ttl_seconds=rule.params.get("ttlSeconds"),
            idempotency_key=f"trigger:{rule.pk}:{event.pk}",  # once per event and rule
        )
    except DomainError as exc:
        return {**taken, "outcome": "refused", "error": exc.message}
    return {**taken, "breakpointId": bp.pk, "outcome": "created" if created else "exists"}


def _forward(rule: TriggerRule, event: ExternalEvent) -> str:
    count = forward_enqueue(event=event, rule_name=rule.name)
    return f"forwarded to {count} subscriber(s)"
