"""Celery tasks: each takes ids, and calls a service. All are safe to run twice."""

import logging

from celery import shared_task
from django.conf import settings

from breakpoints import services
from notifications import services as webhooks

logger = logging.getLogger(__name__)


# Named as the outbox publishes it (by name: the outbox does not import this module).
@shared_task(
    name=webhooks.DELIVER_TASK, acks_late=True, reject_on_worker_lost=True, ignore_result=True
)
def deliver_webhook(delivery_id: str) -> str:
    """One delivery attempt, and its target's next ones while it answers quickly (a turn);
    retries are scheduled in the outbox and sent by the sweep."""
    outcome = webhooks.delivery_turn(delivery_id)
    if outcome.status in ("retry", "failed"):
        logger.info("Webhook delivery %s: %s (%s)", delivery_id, outcome.status, outcome.error)
    return outcome.status


@shared_task(acks_late=True, ignore_result=True)
def dispatch_due_webhooks() -> int:
    """The outbox sweep: publish pending deliveries that are due (retries, lost publishes)."""
    return webhooks.publish_deliveries(webhooks.deliveries_due())


@shared_task(acks_late=True, ignore_result=True)
def expire_due_breakpoints() -> int:
    """The TTL sweep."""
    return services.breakpoints_expire_due()


@shared_task(acks_late=True, ignore_result=True)
def nudge_waiting_breakpoints() -> int:
    """Escalations and reminders that are due."""
    return services.breakpoints_escalate_due() + services.breakpoints_remind_due()


@shared_task(acks_late=True, ignore_result=True)
def purge_finished_breakpoints() -> int:
    """Retention: delete finished breakpoints older than BPM_RETENTION_DAYS."""
    return services.breakpoints_purge(older_than_days=settings.BPM_RETENTION_DAYS)
