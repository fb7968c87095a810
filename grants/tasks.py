"""Celery tasks of grants; their names are core.tasknames'."""

from celery import shared_task

from core import tasknames
from grants import services


@shared_task(name=tasknames.EXPIRE_GRANTS, acks_late=True, ignore_result=True)
def expire_due_grants() -> int:
    """The grants whose expiry passed: ended, each with its `expired` event, once."""
    return services.grants_expire_due()
