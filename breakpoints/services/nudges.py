"""While a breakpoint waits: escalation to another expert, and reminders.

payload.escalateAfterSeconds + escalateTo route a breakpoint also to another expert once
that time has passed (onTimeout: escalate does the same at expiresAt, and gives it one
more TTL); payload.remindEverySeconds notifies its channels again while it waits. Both
run in beat's sweep, rows locked with SKIP LOCKED and changed with a conditional UPDATE,
so overlapping sweeps act once per breakpoint.
"""

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from audit.models import EventType
from breakpoints.models import Breakpoint
from breakpoints.services.transitions import record
from core.actors import Actor
from core.choices import OnTimeout, Status
from core.limits import MAX_REMINDERS
from core.timestamps import timestamp

ESCALATION_ACTOR = Actor.system("escalation")
REMINDER_ACTOR = Actor.system("reminders")
NUDGE_BATCH_SIZE = 200


def escalate_locked(bp: Breakpoint, *, extend_ttl: bool) -> bool:
    """Route a locked waiting breakpoint also to its escalateTo; False if done already.

    extend_ttl (onTimeout: escalate): it waits one more TTL from now for the new expert.
    """
    escalate_to = bp.escalate_to
    if not escalate_to:
        return False
    experts = bp.experts if escalate_to in bp.experts else [*bp.experts, escalate_to]
    now = timezone.now()
    changes = {"experts": experts, "escalated_at": now, "updated_at": now}
    if extend_ttl and bp.ttl_seconds:
        changes["expires_at"] = now + timedelta(seconds=bp.ttl_seconds)
    changed = Breakpoint.objects.filter(
        pk=bp.pk, status=Status.WAITING, escalated_at__isnull=True
    ).update(**changes)
    if not changed:
        return False
    for field, value in changes.items():
        setattr(bp, field, value)
    expires_at = timestamp(bp.expires_at)
    record(
        bp,
        type=EventType.ESCALATED,
        actor=ESCALATION_ACTOR,
        metadata={"escalateTo": escalate_to, "experts": experts, "expiresAt": expires_at},
    )
    return True


def breakpoints_escalate_due(*, now: datetime | None = None) -> int:
    """Escalate every waiting breakpoint whose escalateAfterSeconds has passed."""
    now = now or timezone.now()
    due = Breakpoint.objects.waiting(now).filter(escalated_at__isnull=True, escalate_at__lte=now)
    return _each_due(due.order_by("escalate_at"), lambda bp: escalate_locked(bp, extend_ttl=False))


def breakpoints_remind_due(*, now: datetime | None = None) -> int:
    """Send the reminders that are due (one per breakpoint and run, at most MAX_REMINDERS)."""
    now = now or timezone.now()
    due = Breakpoint.objects.waiting(now).filter(remind_at__lte=now)
    return _each_due(due.order_by("remind_at"), lambda bp: _remind_locked(bp, now))


def _each_due(due: QuerySet[Breakpoint], act: Callable[[Breakpoint], int]) -> int:
    """Act on every due row: a batch locked with SKIP LOCKED per transaction, until a batch
    comes back short or changes nothing (so rows that stay due cannot loop forever)."""
    total = 0
    while True:
        with transaction.atomic():
            batch = list(due.select_for_update(skip_locked=True)[:NUDGE_BATCH_SIZE])
            done = sum(int(act(bp)) for bp in batch)
        total += done
        if len(batch) < NUDGE_BATCH_SIZE or not done:
            return total


def _remind_locked(bp: Breakpoint, now: datetime) -> int:
    sent = bp.reminders_sent + 1
    every = bp.remind_every_seconds
    next_at = now + timedelta(seconds=every) if sent < MAX_REMINDERS and every else None
    changed = Breakpoint.objects.filter(
        pk=bp.pk, status=Status.WAITING, reminders_sent=bp.reminders_sent
    ).update(reminders_sent=sent, remind_at=next_at)
    if not changed:
        return 0
    bp.reminders_sent, bp.remind_at = sent, next_at
    record(
        bp,
        type=EventType.REMINDER,
        actor=REMINDER_ACTOR,
        metadata={"reminder": sent, "of": MAX_REMINDERS},
    )
    return 1


def timeout_columns(policy: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    """The columns a new breakpoint's timeout policy sets (`policy`: the payload's keys,
    the matching routes' defaults filling what it leaves out)."""
    escalate_after = policy.get("escalateAfterSeconds")
    remind_every = policy.get("remindEverySeconds")
    escalate_to = policy.get("escalateTo")
    return {
        "on_timeout": policy.get("onTimeout") or OnTimeout.EXPIRE,
        "escalate_to": escalate_to.strip() if isinstance(escalate_to, str) else "",
        "escalate_at": now + timedelta(seconds=escalate_after) if escalate_after else None,
        "remind_every_seconds": remind_every or None,
        "remind_at": now + timedelta(seconds=remind_every) if remind_every else None,
    }
