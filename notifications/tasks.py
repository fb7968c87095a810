"""The outbox's Celery tasks. Their names are the ones they were first published under
(in-flight messages and django-celery-beat's schedule carry them): never rename them."""

import logging

from celery import shared_task

from notifications import services as outbox

logger = logging.getLogger(__name__)

DISPATCH_DUE_TASK = "breakpoints.tasks.dispatch_due_webhooks"


# Named as the outbox publishes it (by name: the outbox does not import this module).
@shared_task(
    name=outbox.DELIVER_TASK, acks_late=True, reject_on_worker_lost=True, ignore_result=True
)
def deliver(delivery_id: str) -> str:
    """One delivery attempt, and its target's next ones while it answers quickly (a turn);
    retries are scheduled in the outbox and sent by the sweep."""
    outcome = outbox.delivery_turn(delivery_id)
    if outcome.status in ("retry", "failed"):
        logger.info("Delivery %s: %s (%s)", delivery_id, outcome.status, outcome.error)
    return outcome.status


@shared_task(name=DISPATCH_DUE_TASK, acks_late=True, ignore_result=True)
def dispatch_due() -> int:
    """The outbox sweep: publish pending deliveries that are due (retries, lost publishes)."""
    return outbox.publish_deliveries(outbox.deliveries_due())
