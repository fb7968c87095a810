"""Evaluating an event against the trigger rules, once, in the worker.

In three steps, so that no lock is held while expressions run and ingest never waits:

1. claim: a short transaction locks the event row alone (SKIP LOCKED, never its source:
   an ingest's insert checks the source's row) and stamps a claim (`locked_until`, CLAIM
   ahead) with a conditional UPDATE, counting the attempt;
2. plan: outside any transaction, each rule's conditions and templates are evaluated on
   the event within its budget (expressions.Budget); an event larger than
   BPM_TRIGGER_MAX_EVENT_BYTES is not evaluated, each rule's outcome says why;
3. record: a short transaction locks the event row again, checks the claim is still
   this worker's, takes the matching rules' actions and writes the results with status
   `processed`, all or nothing.

So each event is evaluated and its actions taken once: two workers never hold one claim,
and a worker whose claim was taken over (it ran past CLAIM) records nothing. A worker
killed midway leaves the event pending and claimed; once the claim lapses the events
sweep publishes it again and that attempt is recorded as failed (retried after the
backoff of any failed attempt; after MAX_ATTEMPTS the event is failed). A
rule whose expression or template fails records the error and the others still run.
"""

from datetime import datetime, timedelta
from fnmatch import fnmatchcase
from typing import Any

from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from core.exceptions import DomainError
from policies.patterns import PatternError
from triggers import actions
from triggers.expressions import Budget, ExpressionError, holds, too_large
from triggers.models import EventStatus, ExternalEvent, TriggerRule

MAX_ATTEMPTS = 5
DUE_BATCH_SIZE = 500
# The evaluation task's hard time limit (triggers.tasks): a worker past it is killed.
TIME_LIMIT_SECONDS = 90
# How long a claim holds: past the task's hard limit, so a live worker never loses it.
CLAIM = timedelta(seconds=TIME_LIMIT_SECONDS + 30)
LOST = "The worker evaluating it stopped before it finished (killed, or past its time limit)."
# How long an event the sweep published waits before the sweep publishes it again (its
# message waits on the `triggers` queue meanwhile): behind a busy queue each waiting event
# gets one more message a minute, not one a sweep.
REPUBLISH_AFTER = timedelta(seconds=60)

Prepared = tuple[dict[str, Any], actions.Plan | None]


def rules_for(event: ExternalEvent) -> list[TriggerRule]:
    """Enabled rules for the event's source (or any source) whose type glob matches."""
    rules = TriggerRule.objects.filter(enabled=True).filter(
        Q(source__isnull=True) | Q(source_id=event.source_id)
    )
    return [
        rule for rule in rules.select_related("owner") if fnmatchcase(event.type, rule.event_type)
    ]


def rule_prepare(rule: TriggerRule, event: ExternalEvent, *, refused: str | None) -> Prepared:
    """One rule's outcome so far and, when it matched, its plan; no database. `refused`:
    why the event is not evaluated at all (too large)."""
    outcome: dict[str, Any] = {"rule": rule.name, "action": rule.action}
    if refused:
        return {**outcome, "error": refused}, None
    budget = Budget()
    try:
        failed = [expr for expr in rule.conditions if not holds(expr, event.payload, budget)]
        outcome["matched"] = not failed
        if failed:
            return {**outcome, "unmet": failed}, None
        return outcome, actions.plan(rule, event, budget)
    except (ExpressionError, PatternError, DomainError) as exc:
        return {**outcome, "error": _message(exc)}, None


def rule_act(
    prepared: Prepared, rule: TriggerRule, event: ExternalEvent, *, dry_run: bool = False
) -> dict[str, Any]:
    """The rule's outcome, its planned action taken (or, dry_run, described)."""
    outcome, plan = prepared
    if plan is None:
        return outcome
    try:
        return {**outcome, "actions": actions.run(rule, event, plan, dry_run=dry_run)}
    except (ExpressionError, PatternError, DomainError) as exc:
        return {**outcome, "error": _message(exc)}


def evaluate_rule(
    rule: TriggerRule, event: ExternalEvent, *, dry_run: bool = False
) -> dict[str, Any]:
    """One rule on one event, under the worker's budgets: whether it matched, what it
    did (or would do), any error."""
    prepared = rule_prepare(rule, event, refused=too_large(event.payload))
    return rule_act(prepared, rule, event, dry_run=dry_run)


def _message(exc: Exception) -> str:
    return getattr(exc, "message", None) or str(exc)


def event_evaluate(event_id: str) -> str:
    """Evaluate a pending event once; "processed", or "skipped" (done, or being done)."""
    claimed = _claim(event_id)
    if claimed is None:
        return "skipped"
    event, claim = claimed
    try:
        refused = too_large(event.payload)
        prepared = [(rule, rule_prepare(rule, event, refused=refused)) for rule in rules_for(event)]
        with transaction.atomic():
            if not _still_claimed(event_id, claim):
                return "skipped"  # taken over after our claim lapsed: theirs to record
            results = [rule_act(plan, rule, event) for rule, plan in prepared]
            ExternalEvent.objects.filter(pk=event_id).update(
                status=EventStatus.PROCESSED,
                results=results,
                processed_at=timezone.now(),
                locked_until=None,
                error="",
            )
    except Exception as exc:  # noqa: BLE001 - recorded, retried by the sweep, then failed
        _record_failure(event_id, claim, f"{type(exc).__name__}: {exc}")
        raise
    return "processed"


def _claim(event_id: str) -> tuple[ExternalEvent, datetime] | None:
    """Lock the pending event's row (its row only), claim it for CLAIM and count the
    attempt; None when it is done or being evaluated, or when its last claim lapsed (that
    attempt is then recorded as failed: retried after its backoff, or failed for good)."""
    now = timezone.now()
    with transaction.atomic():
        event = (
            ExternalEvent.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("source")
            .filter(pk=event_id, status=EventStatus.PENDING)
            .filter(Q(locked_until__isnull=True) | Q(locked_until__lt=now))
            .first()
        )
        if event is None:
            return None
        if event.locked_until is not None:  # a claim that lapsed: its worker was lost
            _record_failure(event_id, event.locked_until, LOST)  # retried after a backoff
            return None
        claim = now + CLAIM
        ExternalEvent.objects.filter(pk=event_id).update(
            locked_until=claim, attempts=F("attempts") + 1
        )
    event.locked_until = claim
    return event, claim


def _still_claimed(event_id: str, claim: datetime) -> bool:
    """Lock the event's row again (its row only) and check the claim is still this one."""
    return (
        ExternalEvent.objects.select_for_update(of=("self",))
        .filter(pk=event_id, status=EventStatus.PENDING, locked_until=claim)
        .exists()
    )


def _record_failure(event_id: str, claim: datetime, error: str) -> None:
    """A claimed evaluation that failed (rolled back whole): release the claim, retry
    later, fail after MAX_ATTEMPTS (the attempt was counted when claimed)."""
    event = ExternalEvent.objects.filter(
        pk=event_id, status=EventStatus.PENDING, locked_until=claim
    ).first()
    if event is None:
        return
    changes: dict[str, Any] = {"locked_until": None, "error": error[:2000]}
    if event.attempts >= MAX_ATTEMPTS:
        changes["status"] = EventStatus.FAILED
    else:
        delay = 30 * 4 ** (max(event.attempts, 1) - 1)
        changes["next_attempt_at"] = timezone.now() + timedelta(seconds=delay)
    ExternalEvent.objects.filter(
        pk=event_id, status=EventStatus.PENDING, locked_until=claim
    ).update(**changes)


def events_due(*, limit: int = DUE_BATCH_SIZE) -> list[str]:
    """Pending events whose time has come and that no live claim holds (for the sweep
    to publish again: lost publishes, retries, the events of a lost worker)."""
    now = timezone.now()
    return list(
        ExternalEvent.objects.filter(status=EventStatus.PENDING, next_attempt_at__lte=now)
        .filter(Q(locked_until__isnull=True) | Q(locked_until__lt=now))
        .order_by("next_attempt_at")
        .values_list("pk", flat=True)[:limit]
    )


def events_published(event_ids: list[str]) -> int:
    """The sweep published these: it looks at them again after REPUBLISH_AFTER, unless a
    worker records them first (processed, or a failed attempt's backoff)."""
    now = timezone.now()
    return (
        ExternalEvent.objects.filter(pk__in=event_ids, status=EventStatus.PENDING)
        .filter(Q(locked_until__isnull=True) | Q(locked_until__lt=now))
        .update(next_attempt_at=now + REPUBLISH_AFTER)
    )
