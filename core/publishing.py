"""Handing an outbox's rows to the workers, by task name (the Celery app of config.celery)."""

import logging

from celery import current_app

logger = logging.getLogger(__name__)


def publish(task_name: str, ids: list[str]) -> int:
    """Hand rows of an outbox (deliveries, events) to the workers, by task name.

    Never raises and never waits long on the broker: a publish that fails leaves the row
    pending, and its sweep publishes it later. By name, so the writer need not import the
    tasks module (which imports it back); task_always_eager does not apply to it.
    """
    published = 0
    for row_id in ids:
        try:
            current_app.send_task(task_name, args=(row_id,), retry=False, ignore_result=True)
            published += 1
        except Exception:  # noqa: BLE001 - broker down: the sweep covers it
            logger.warning("Could not publish %s(%s); the sweep will retry.", task_name, row_id)
            break
    return published
