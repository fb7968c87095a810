"""Handing an outbox's rows to the workers, by task name (the Celery app of config.celery).

Two ways. `publish` sends at once and says how many it handed over: the sweeps use it, in
the workers. `publish_soon` is what a request's transaction calls when it commits: it
hands such a publish to this process's publisher thread and returns at once, so a request never
waits on the broker (with Redis down, a publish waits for the connect timeout: a create
would take seconds). Either way the rows are already committed and pending, so whatever
is not handed over (the broker down, the process gone) is published by its sweep.

Rows committed by several requests while the thread was busy can go in ONE message: a
`publish_soon(..., together=TASK)` names a task that takes `[[row id, log context], ...]`
(each row with the request id and fields of the request that wrote it, for the worker's
log lines). Under load the thread then sends one message for many requests instead of one
each (kombu builds and sends every message in Python, about a millisecond of CPU).
"""

import contextvars
import functools
import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from celery import current_app
from django.conf import settings

from infra.logging import current_context

logger = logging.getLogger(__name__)

# After a failed publish the publisher drops what it is given for this long (the sweeps
# publish those rows) instead of waiting on the broker once per batch.
BROKER_DOWN_SECONDS = 5.0
# At most this many batches wait for the publisher; past that they are left to the sweeps.
MAX_WAITING_BATCHES = 10_000
# Under load (the thread's last message went out less than this long ago), a batch of a
# `together` task waits this long for others to go in the same message: several requests'
# rows share one publish, and a webhook is sent up to this much later. Otherwise it goes at
# once, with whatever is already waiting.
TOGETHER_WAIT_SECONDS = 0.05
# At most this many waiting batches are taken together, and this many rows in one message.
MAX_BATCHES_TOGETHER = 100
MAX_ROWS_TOGETHER = 500


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


def publish_together(task_name: str, ids: list[Any]) -> int:
    """Hand rows of an outbox to the workers in ONE message, `task_name(ids)` (ids, or
    [id, log context] pairs): how many that handed over (all or none). As publish: never
    raises, never waits long."""
    try:
        current_app.send_task(task_name, args=(ids,), retry=False, ignore_result=True)
    except Exception:  # noqa: BLE001 - broker down: the sweep covers them
        logger.warning("Could not publish %s(%d rows); the sweep will retry.", task_name, len(ids))
        return 0
    return len(ids)


Publish = Callable[[list[str]], int]  # a publish of rows by id: how many it handed over


@dataclass(frozen=True)
class _Batch:
    context: contextvars.Context  # the committing request's (its id in the task headers)
    publisher: Publish
    ids: list[str]
    together: str | None  # a task taking rows of several requests, or None


class _Publisher:
    """This process's publisher thread and its queue of batches (started on first use, and
    again in a child process after a fork: threads do not survive one)."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.batches: queue.Queue[_Batch] = queue.Queue(MAX_WAITING_BATCHES)
        self.broker_down_until = 0.0
        self.last_sent = float("-inf")
        self.thread = threading.Thread(target=self._run, name="bpm-publisher", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            taken = [self.batches.get()]
            if taken[0].together is not None:  # others may follow to go with it
                now = time.monotonic()
                busy = now - self.last_sent < TOGETHER_WAIT_SECONDS
                until = now + (TOGETHER_WAIT_SECONDS if busy else 0.0)
                while len(taken) < MAX_BATCHES_TOGETHER:
                    try:
                        taken.append(self.batches.get(timeout=max(0.0, until - time.monotonic())))
                    except queue.Empty:
                        break
            try:
                for publish, rows in _publishes(taken):
                    if time.monotonic() < self.broker_down_until:
                        break  # pending rows: their sweep publishes them
                    try:
                        if publish() < rows:
                            self.broker_down_until = time.monotonic() + BROKER_DOWN_SECONDS
                    except Exception:  # a publisher that raised: its rows stay pending
                        logger.exception("A publish after commit failed; the sweep will retry.")
            finally:
                self.last_sent = time.monotonic()
                for _ in taken:
                    self.batches.task_done()


def _publishes(batches: list[_Batch]) -> list[tuple[Callable[[], int], int]]:
    """What to send for these batches, in order, each with its count of rows: a batch alone
    by its own publisher (in its request's context), the batches of one `together` task with
    more than one row between them in messages of that task, MAX_ROWS_TOGETHER rows each."""
    sends: list[tuple[Callable[[], int], int]] = []
    groups: dict[str | None, list[_Batch]] = {}
    for batch in batches:
        groups.setdefault(batch.together, []).append(batch)
    for together, group in groups.items():
        if together is None or sum(len(batch.ids) for batch in group) == 1:
            sends.extend(
                (functools.partial(b.context.run, b.publisher, b.ids), len(b.ids)) for b in group
            )
            continue
        rows = [
            [row_id, fields]
            for batch in group
            for fields in [batch.context.run(current_context)]
            for row_id in batch.ids
        ]
        for start in range(0, len(rows), MAX_ROWS_TOGETHER):
            chunk = rows[start : start + MAX_ROWS_TOGETHER]
            sends.append((functools.partial(publish_together, together, chunk), len(chunk)))
    return sends


_publisher: _Publisher | None = None
_publisher_lock = threading.Lock()


def _current_publisher() -> _Publisher:
    global _publisher
    with _publisher_lock:
        if _publisher is None or _publisher.pid != os.getpid():
            _publisher = _Publisher()
        return _publisher


def publish_soon(publisher: Publish, ids: list[str], *, together: str | None = None) -> None:
    """Have this process's publisher thread run `publisher(ids)` (a publish of rows just
    committed) and return at once; never raises. `together`: a task that takes the rows of
    several requests in one message (the module's docstring), used when the thread finds
    more than one row of it waiting. With BPM_PUBLISH_INLINE (the unit tests, which check
    what was handed over when their transaction commits) `publisher(ids)` runs here."""
    if settings.BPM_PUBLISH_INLINE:
        publisher(ids)
        return
    batch = _Batch(contextvars.copy_context(), publisher, ids, together)
    try:
        _current_publisher().batches.put_nowait(batch)
    except queue.Full:
        logger.warning("Publisher queue full: %d rows left to the sweep.", len(ids))
