"""The outbox's Celery tasks, under the names they were first published under
(core.tasknames)."""

import logging

from celery import shared_task

from core import tasknames
from notifications import services as outbox

logger = logging.getLogger(__name__)


@shared_task(name=tasknames.DELIVER, acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def deliver(delivery_id: str) -> str:
    """One delivery attempt, and its target's next ones while it answers quickly (a turn);
    retries are scheduled in the outbox and sent by the sweep."""
    outcome = outbox.delivery_turn(delivery_id)
    if outcome.status in ("retry", "failed"):
        logger.info("Delivery %s: %s (%s)", delivery_id, outcome.status, outcome.error)
    return outcome.status


@shared_task(name=tasknames.DELIVER_MANY, acks_late=True, ignore_result=True)
def deliver_many(rows: list) -> int:
    """Deliveries published together (outbox.publish_deliveries: ids; the web process's
    publisher: [id, log context] of several requests), each handed on as its own deliver
    task. Run again (a worker lost), it hands them on again: a delivery is claimed before
    it is sent, so none is sent twice."""
    return outbox.publish_deliveries_handed_on(list(rows))


@shared_task(name=tasknames.DISPATCH_DUE_DELIVERIES, acks_late=True, ignore_result=True)
def dispatch_due() -> int:
    """The outbox sweep: publish pending deliveries that are due (retries, lost publishes)."""
    return outbox.publish_deliveries(outbox.deliveries_due())
