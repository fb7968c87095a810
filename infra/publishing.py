"""Handing an outbox's rows to the workers, by task name (the Celery app of config.celery).

Two ways. `publish` sends at once and says how many it handed over: the sweeps use it, in
the workers. `publish_soon` is what a request's transaction calls when it commits: it
hands such a publish to this process's publisher thread and returns at once, so a request never
waits on the broker (with Redis down, a publish waits for the connect timeout: a create
would take seconds). Either way the rows are already committed and pending, so whatever
is not handed over (the broker down, the process gone) is published by its sweep.
"""

import contextvars
import logging
import os
import queue
import threading
import time
from collections.abc import Callable

from celery import current_app
from django.conf import settings

logger = logging.getLogger(__name__)

# After a failed publish the publisher drops what it is given for this long (the sweeps
# publish those rows) instead of waiting on the broker once per batch.
BROKER_DOWN_SECONDS = 5.0
# At most this many batches wait for the publisher; past that they are left to the sweeps.
MAX_WAITING_BATCHES = 10_000


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


def publish_together(task_name: str, ids: list[str]) -> int:
    """Hand rows of an outbox to the workers in ONE message, `task_name(ids)`: how many
    that handed over (all or none). As publish: never raises, never waits long."""
    try:
        current_app.send_task(task_name, args=(ids,), retry=False, ignore_result=True)
    except Exception:  # noqa: BLE001 - broker down: the sweep covers them
        logger.warning("Could not publish %s(%d rows); the sweep will retry.", task_name, len(ids))
        return 0
    return len(ids)


Publish = Callable[[list[str]], int]  # a publish of rows by id: how many it handed over


class _Publisher:
    """This process's publisher thread and its queue of batches (started on first use, and
    again in a child process after a fork: threads do not survive one)."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.batches: queue.Queue[tuple[contextvars.Context, Publish, list[str]]] = queue.Queue(
            MAX_WAITING_BATCHES
        )
        self.broker_down_until = 0.0
        self.thread = threading.Thread(target=self._run, name="bpm-publisher", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            context, publisher, ids = self.batches.get()
            try:
                if time.monotonic() < self.broker_down_until:
                    continue  # pending rows: their sweep publishes them
                # The request's context (its id in the task's headers, config.celery).
                if context.run(publisher, ids) < len(ids):
                    self.broker_down_until = time.monotonic() + BROKER_DOWN_SECONDS
            except Exception:  # a publisher that raised: its rows stay pending
                logger.exception("A publish after commit failed; the sweep will retry.")
            finally:
                self.batches.task_done()


_publisher: _Publisher | None = None
_publisher_lock = threading.Lock()


def _current_publisher() -> _Publisher:
    global _publisher
    with _publisher_lock:
        if _publisher is None or _publisher.pid != os.getpid():
            _publisher = _Publisher()
        return _publisher


def publish_soon(publisher: Publish, ids: list[str]) -> None:
    """Have this process's publisher thread run `publisher(ids)` (a publish of rows just
    committed) and return at once; never raises. With BPM_PUBLISH_INLINE (the unit
    tests, which check what was handed over when their transaction commits) it runs here."""
    if settings.BPM_PUBLISH_INLINE:
        publisher(ids)
        return
    try:
        _current_publisher().batches.put_nowait((contextvars.copy_context(), publisher, ids))
    except queue.Full:
        logger.warning("Publisher queue full: %d rows left to the sweep.", len(ids))
