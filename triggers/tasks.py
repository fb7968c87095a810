"""Celery tasks of the triggers app: each takes ids and calls a service; safe to run twice.
Their names are core.tasknames'."""

from celery import shared_task

from core import tasknames
from triggers import services
from triggers.services.evaluate import TIME_LIMIT_SECONDS
from triggers.services.ingest import publish_evaluation


@shared_task(
    name=tasknames.EVALUATE_EVENT,
    acks_late=True,
    reject_on_worker_lost=True,
    ignore_result=True,
    soft_time_limit=60,  # each rule has its own budget: this is for many rules
    time_limit=TIME_LIMIT_SECONDS,  # shorter than an event's claim
)
def evaluate_event(event_id: str) -> str:
    """Evaluate one event against the trigger rules (once, whoever runs it)."""
    return services.event_evaluate(event_id)


@shared_task(name=tasknames.DISPATCH_DUE_EVENTS, acks_late=True, ignore_result=True)
def dispatch_due_events() -> int:
    """The events sweep: publish pending events again (lost publishes, retries), each
    once until REPUBLISH_AFTER has passed (triggers.services.evaluate)."""
    due = services.events_due()
    published = publish_evaluation(due)  # the first `published` of them
    services.events_published(due[:published])
    return published
