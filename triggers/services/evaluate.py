"""Evaluating an event against the trigger rules, once, in the worker.

The event row is locked (SKIP LOCKED) and, in the same transaction, every matching rule
acts and the results are written with status `processed`: a worker that dies midway
leaves it pending for the sweep, and two workers never evaluate one event. A rule whose
expression or template fails records the error and the others still run.
"""

from datetime import timedelta
from fnmatch import fnmatchcase
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from core.exceptions import DomainError
from policies.patterns import PatternError
from triggers import actions
from triggers.expressions import ExpressionError, holds
from triggers.models import EventStatus, ExternalEvent, TriggerRule

MAX_ATTEMPTS = 5
DUE_BATCH_SIZE = 500


def rules_for(event: ExternalEvent) -> list[TriggerRule]:
    """Enabled rules for the event's source (or any source) whose type glob matches."""
    rules = TriggerRule.objects.filter(enabled=True).filter(
        Q(source__isnull=True) | Q(source_id=event.source_id)
    )
    return [
        rule for rule in rules.select_related("owner") if fnmatchcase(event.type, rule.event_type)
    ]


def evaluate_rule(
    rule: TriggerRule, event: ExternalEvent, *, dry_run: bool = False
) -> dict[str, Any]:
    """One rule on one event: whether it matched, what it did (or would do), any error."""
    outcome: dict[str, Any] = {"rule": rule.name, "action": rule.action}
    try:
        failed = [expr for expr in rule.conditions if not holds(expr, event.payload)]
        outcome["matched"] = not failed
        if failed:
            outcome["unmet"] = failed
            return outcome
        outcome["actions"] = actions.run(rule, event, dry_run=dry_run)
    except (ExpressionError, PatternError, DomainError) as exc:
        outcome["error"] = getattr(exc, "message", None) or str(exc)
    return outcome


def event_evaluate(event_id: str) -> str:
    """Evaluate a pending event once; "processed", or "skipped" (done, or being done)."""
    try:
        with transaction.atomic():
            event = (
                ExternalEvent.objects.select_for_update(skip_locked=True)
                .select_related("source")
                .filter(pk=event_id, status=EventStatus.PENDING)
                .first()
            )
            if event is None:
                return "skipped"
            results = [evaluate_rule(rule, event) for rule in rules_for(event)]
            ExternalEvent.objects.filter(pk=event.pk).update(
                status=EventStatus.PROCESSED,
                results=results,
                processed_at=timezone.now(),
                attempts=event.attempts + 1,
                error="",
            )
    except Exception as exc:  # noqa: BLE001 - recorded, retried by the sweep, then failed
        _record_failure(event_id, exc)
        raise
    return "processed"


def _record_failure(event_id: str, exc: Exception) -> None:
    """Count a failed evaluation (rolled back whole): retry later, fail after MAX_ATTEMPTS."""
    event = ExternalEvent.objects.filter(pk=event_id, status=EventStatus.PENDING).first()
    if event is None:
        return
    attempts = event.attempts + 1
    changes: dict[str, Any] = {"attempts": attempts, "error": f"{type(exc).__name__}: {exc}"[:2000]}
    if attempts >= MAX_ATTEMPTS:
        changes["status"] = EventStatus.FAILED
    else:
        changes["next_attempt_at"] = timezone.now() + timedelta(seconds=30 * 4 ** (attempts - 1))
    ExternalEvent.objects.filter(pk=event_id, status=EventStatus.PENDING).update(**changes)


def events_due(*, limit: int = DUE_BATCH_SIZE) -> list[str]:
    """Pending events whose time has come (for the sweep to publish again)."""
    return list(
        ExternalEvent.objects.filter(
            status=EventStatus.PENDING, next_attempt_at__lte=timezone.now()
        )
        .order_by("next_attempt_at")
        .values_list("pk", flat=True)[:limit]
    )
