"""What the reviewer console's per-breakpoint pages show, computed from a breakpoint, its
events and a release preview: no request handling, no URLs (console.views adds those).
"""

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.utils.safestring import SafeString

from accounts import experts as routing
from audit.models import Event, EventType
from breakpoints.answers.answer_form import AnswerForm, form_fields, label_of
from breakpoints.answers.outcome import outcome_of
from breakpoints.answers.voting import VOTING_STRATEGIES
from breakpoints.models import Breakpoint, Feedback
from breakpoints.payload.form_schema import FORM_KEY, PROPOSAL_KEY, edited
from breakpoints.payload.validation import options_of
from breakpoints.selectors import decided_via_text
from console.seats import seats_panel
from core.choices import Status, via_label
from grants import services as grants
from grants.models import GrantScope
from web.rendering import html as rendering
from web.rendering import values as shown

if TYPE_CHECKING:
    from breakpoints.services.decisions import Release

# How a finished breakpoint's header says it ended, and which timestamp says when.
FINISH = {
    Status.RELEASED: ("decided", "released_at"),
    Status.EXPIRED: ("expired", "expired_at"),
    Status.CANCELLED: ("cancelled", "cancelled_at"),
}
DELIVERY_OUTCOMES = {"delivered": "delivered", "retry": "retrying", "failed": "failed"}
DELIVERY_BADGE = {"delivered": "released", "retry": "waiting", "failed": "expired"}


def as_list(value: Any) -> list[str]:
    """A payload field that may be one string or a list of them, as a list of strings."""
    if isinstance(value, str):
        return [value]
    return [str(item) for item in value] if isinstance(value, list) else []


def payload_of(bp: Breakpoint) -> dict[str, Any]:
    return bp.payload if isinstance(bp.payload, dict) else {}


def result_of(bp: Breakpoint) -> dict[str, Any]:
    return bp.result if isinstance(bp.result, dict) else {}


@dataclass(frozen=True)
class Finish:
    """How a released, expired or cancelled breakpoint ended ("decided 3m ago by rita via
    Slack"); `via` is where its deciding feedback came from, "" when unknown."""

    verb: str
    at: datetime
    ago: str
    by: str
    via: str = ""


@dataclass(frozen=True)
class FeedbackEntry:
    """One feedback entry of the thread, and where it was given ("" for old rows)."""

    feedback: Feedback
    via: str


def finish_of(bp: Breakpoint, now: datetime, feedback: Iterable[Feedback] = ()) -> Finish | None:
    """The header's ending; `feedback` (already loaded) says where a release came from."""
    if bp.status not in FINISH:
        return None
    verb, field = FINISH[Status(bp.status)]
    at = getattr(bp, field) or bp.updated_at
    outcome = outcome_of(bp.status, bp.result)
    via = decided_via_text(feedback) if outcome.released else ""
    return Finish(verb=verb, at=at, ago=rendering.age(at, now), by=outcome.by, via=via)


@dataclass(frozen=True)
class Delivery:
    """One webhook delivery of this breakpoint, as its latest attempt left it."""

    event_type: str
    webhook_id: Any
    outcome: str  # delivered / retrying / failed
    badge: str
    attempts: int
    status_code: Any
    error: str
    at: datetime


def _metadata(event: Event) -> dict[str, Any]:
    return event.metadata if isinstance(event.metadata, dict) else {}


def _delivery(event: Event, seen: int) -> Delivery:
    """A delivery from its last attempt; `seen` counts the attempts in the trail."""
    meta = _metadata(event)
    raw = str(meta.get("outcome") or "")
    attempt = meta.get("attempt")
    error = str(meta.get("error") or "")
    if error == f"HTTP {meta.get('statusCode')}":
        error = ""  # the status code already says it
    return Delivery(
        event_type=str(meta.get("eventType") or "?"),
        webhook_id=meta.get("webhookId"),
        outcome=DELIVERY_OUTCOMES.get(raw, raw or "unknown"),
        badge=DELIVERY_BADGE.get(raw, "expired"),
        attempts=attempt if isinstance(attempt, int) and attempt > seen else seen,
        status_code=meta.get("statusCode"),
        error=error,
        at=event.timestamp,
    )


def split_notifications(events: Iterable[Event]) -> tuple[list[Event], list[Delivery]]:
    """The timeline without webhook attempts, and those attempts folded per delivery."""
    timeline: list[Event] = []
    latest: dict[str, tuple[Event, int]] = {}  # deliveryId -> (last attempt, attempts seen)
    for event in events:
        if event.type != EventType.NOTIFICATION:
            timeline.append(event)
            continue
        key = str(_metadata(event).get("deliveryId") or f"event-{event.pk}")
        seen = latest.get(key, (event, 0))[1]
        latest[key] = (event, seen + 1)
    # In order of each delivery's first attempt.
    return timeline, [_delivery(event, seen) for event, seen in latest.values()]


def delivery_summary(deliveries: list[Delivery]) -> str:
    """One count per outcome, e.g. "2 delivered, 1 failed"."""
    counts = Counter(delivery.outcome for delivery in deliveries)
    return ", ".join(f"{count} {outcome}" for outcome, count in counts.items())


def review_page(
    bp: Breakpoint,
    events: Iterable[Event],
    resolved: Mapping[str, routing.Seat],
    now: datetime,
) -> dict[str, Any]:
    """The review page's view of the breakpoint, the same for every reviewer: question,
    context files, result, feedback, timeline, webhook deliveries and seats."""
    payload = payload_of(bp)
    result = result_of(bp)
    timeline, deliveries = split_notifications(events)
    feedback = list(bp.feedback.all())
    # The proposed values first, then the files: the raw payload is the last resort.
    budget = rendering.RenderBudget()
    proposal = proposal_rows(payload, budget)
    files = rendering.context_files(payload, budget)
    return {
        "title": bp.display_name,
        "subtitle": None,
        "bp": bp,
        "original": bp,
        "question": bp.question,
        **headline(bp),
        "proposal_rows": proposal,
        "payload": payload,
        "attempt": payload.get("attempt"),
        "previous_feedback": payload.get("previousFeedback"),
        "experts": as_list(payload.get("expert")),
        "strategy": payload.get("strategy"),
        "options": options_of(payload),
        "files": files,
        "payload_html": rendering.render_json(payload, budget),
        "result_html": rendering.render_json(bp.result, budget) if bp.result is not None else None,
        "feedback": [FeedbackEntry(item, via_label(item.via)) for item in feedback],
        "events": timeline,
        "deliveries": deliveries,
        "delivery_summary": delivery_summary(deliveries),
        "status_badge": rendering.status_badge(
            bp.status, result.get("approved"), result.get("option"), large=True
        ),
        "finish": finish_of(bp, now, feedback),
        "decision": (
            rendering.decision(result.get("approved")) if bp.status == Status.RELEASED else ""
        ),
        "seats": seats_panel(bp, resolved),
        "age": rendering.age(bp.created_at, now),
        "digest_short": short_digest(bp.payload_digest),
    }


def headline(bp: Breakpoint) -> dict[str, Any]:
    """A page's headline. A breakpoint that proposes values (a gated tool call, an agent's
    form) is headed by its title, which names the action, and what it asks is secondary
    text under it (`lede`: its `code` spans as code, sanitized); any other by its question
    (else its name)."""
    if payload_of(bp).get(PROPOSAL_KEY) is not None and bp.title and bp.question:
        return {"headline": bp.title, "lede": rendering.render_lede(bp.question)}
    return {"headline": bp.question or bp.display_name, "lede": None}


@dataclass(frozen=True)
class ValueRow:
    """One proposed value in the review page's table: its property's name and label."""

    name: str
    label: str
    html: SafeString


def proposal_rows(payload: Mapping[str, Any], budget: rendering.RenderBudget) -> list[ValueRow]:
    """The proposal's values in the form's order (its required properties first, then the
    others by name), then those the form does not name, by name. A file name among them
    tells the language of their long texts (a tool's `path` beside its `content`)."""
    proposal = payload.get(PROPOSAL_KEY)
    if not isinstance(proposal, Mapping):
        return []
    order = _in_form_order(payload, proposal)
    lexer = shown.text_lexer(proposal[name] for name in order)
    form = payload.get(FORM_KEY)
    labels = {name: label_of(name, schema) for name, schema, _ in form_fields(form)}
    return [
        ValueRow(name, labels.get(name, name), shown.render_value(proposal[name], lexer, budget))
        for name in order
    ]


def _in_form_order(payload: Mapping[str, Any], values: Mapping[str, Any]) -> list[str]:
    """The names of `values` in the order the form lists them (answers.form_fields): a
    jsonb object's keys come back in an order of PostgreSQL's own."""
    listed = [name for name, _, _ in form_fields(payload.get(FORM_KEY)) if name in values]
    return [*listed, *sorted(set(values) - set(listed))]


@dataclass(frozen=True)
class ChangeRow:
    """One value the reviewer changed: the field's label, and how the edit reads (both
    sides, or a line diff)."""

    label: str
    change: shown.Change


def change_rows(bp: Breakpoint, answer: AnswerForm, values: Any) -> list[ChangeRow]:
    """What the reviewer's answer changed against the proposal, field by field, in the
    form's order; a value absent on one side is not the same as null."""
    payload = payload_of(bp)
    proposal = answer.proposal if isinstance(answer.proposal, Mapping) else {}
    values = values if isinstance(values, Mapping) else {}
    labels = answer.labels
    budget = rendering.RenderBudget()
    rows = []
    for name in _in_form_order(payload, {**proposal, **values}):
        before, after = proposal.get(name, shown.ABSENT), values.get(name, shown.ABSENT)
        if shown.same(before, after):
            continue
        rows.append(ChangeRow(labels.get(name, name), shown.render_change(before, after, budget)))
    return rows


def short_digest(digest: str | None) -> str:
    """A payloadDigest as people compare it by eye: "sha256:" and its first 12 hex digits."""
    if not digest:
        return ""
    algorithm, _, hexdigits = digest.partition(":")
    return f"{algorithm}:{hexdigits[:12]}…"


def preview_of(outcome: "Release", proposal: Any = None) -> dict[str, Any]:
    """What a confirmation page shows as sent: the result (with `edited` when it answers a
    form, as the sealed result will say), or, for a vote that does not decide yet (nothing
    is sent), the vote being recorded."""
    if outcome.result is None:
        return outcome.votes[-1]
    if outcome.result.get("values") is None:
        return outcome.result
    return {**outcome.result, "edited": edited(outcome.result["values"], proposal)}


def preview_page(bp: Breakpoint, outcome: "Release") -> dict[str, Any]:
    """What both release confirmation pages (release, always approve) show of the
    pending release."""
    return {
        "is_vote": bool(bp.experts) and bp.strategy in VOTING_STRATEGIES,
        "result_html": rendering.render_json(preview_of(outcome, payload_of(bp).get("proposal"))),
    }


# --- grants: "Approve, and allow this" -------------------------------------------


def grant_offer(bp: Breakpoint) -> dict[str, Any]:
    """Whether the review page offers "Approve, and allow this", and "for the rest of this
    run" among its choices; why not is the grants service's answer
    (grants.services.grant_offer_refusal), never the page's own rule."""
    voting = bp.strategy in VOTING_STRATEGIES
    refusal = grants.grant_offer_refusal(bp, voting=voting)
    run_refusal = (
        grants.grant_offer_refusal(bp, voting=voting, scope=GrantScope.RUN)
        if refusal is None
        else refusal
    )
    return {
        "grant_refusal": refusal,
        "grant_run": run_refusal is None,
        "grant_run_refusal": run_refusal if refusal is None else None,
    }


def grant_terms(
    *,
    agent_id: str,
    key: str,
    run_id: str | None,
    uses: int | None,
    until: datetime | None,
    values: Mapping[str, Any] | None = None,
    seconds: int | None = None,
) -> dict[str, Any]:
    """What a grant covers, as the confirmation and the revocation say it
    (admin/grants/grant/terms.html): `run_id` None is any run; `seconds`, when known, how
    long from now."""
    return {
        "agent": agent_id,
        "key": key,
        "run": run_id,
        "uses": uses,
        "until": until,
        "duration": duration_text(seconds) if seconds else None,
        "values": [
            (name, kind, json.dumps(expected, ensure_ascii=False))
            for name, rule in (values or {}).items()
            for kind, expected in rule.items()
        ],
    }


def duration_text(seconds: int) -> str:
    """3600 -> "1 hour", 28800 -> "8 hours", 5400 -> "90 minutes", 59 -> "59 seconds"."""
    for unit, size in (("hour", 3600), ("minute", 60)):
        if seconds % size == 0:
            count = seconds // size
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{seconds} seconds"
