"""Celery tasks: each takes ids, and calls a service. All are safe to run twice. Their
names are core.tasknames'."""

from celery import shared_task
from django.conf import settings

from breakpoints import services
from core import tasknames


@shared_task(name=tasknames.EXPIRE_DUE, acks_late=True, ignore_result=True)
def expire_due_breakpoints() -> int:
    """The TTL sweep."""
    return services.breakpoints_expire_due()


@shared_task(name=tasknames.NUDGE_WAITING, acks_late=True, ignore_result=True)
def nudge_waiting_breakpoints() -> int:
    """Escalations and reminders that are due."""
    return services.breakpoints_escalate_due() + services.breakpoints_remind_due()


@shared_task(name=tasknames.PURGE_FINISHED, acks_late=True, ignore_result=True)
def purge_finished_breakpoints() -> int:
    """Retention: delete finished breakpoints older than BPM_RETENTION_DAYS."""
    return services.breakpoints_purge(older_than_days=settings.BPM_RETENTION_DAYS)


@shared_task(name=tasknames.REFRESH_DECISION_TIMES, acks_late=True, ignore_result=True)
def refresh_decision_times() -> int:
    """The aggregate behind expectedDecision, from the last 90 days of human decisions."""
    return services.decision_times_refresh()
