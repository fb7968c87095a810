"""Requests that a Ctrl-C can interrupt without breaking httpx.

Python raises KeyboardInterrupt in the main thread at whatever line that thread is running.
Inside httpx's connection pool that can fall between taking the pool's lock and entering
the `with` block that gives it back: the request's own clean-up then waits for that lock
for ever, and the agent hangs where it should stop. (httpcore's lock is not reentrant;
upstream, encode/httpcore#990. Seen here in tests/live/clients/test_sdk.py's Ctrl-C test,
whose stack showed the wait.)

So in the main thread each request runs on a thread of its own that never takes SIGINT,
and the main thread waits for its answer where an interrupt is harmless. An interrupted
request finishes on its thread, or ends with the process (the thread is a daemon).
Elsewhere the request runs in place: Python interrupts no other thread.
"""

from __future__ import annotations

import queue
import signal
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

# How often the main thread looks up from its wait. Where a lock's wait is interruptible
# (POSIX) a Ctrl-C ends it at once; elsewhere (Windows) it lands within this.
WAKE_SECONDS = 0.5


def interruptible(call: Callable[[], T]) -> T:
    """`call()`'s result (or its exception); a Ctrl-C raises KeyboardInterrupt here, never
    inside `call`."""
    if threading.current_thread() is not threading.main_thread():
        return call()
    answers: queue.SimpleQueue[tuple[bool, Any]] = queue.SimpleQueue()  # put and get are C

    def run() -> None:
        if hasattr(signal, "pthread_sigmask"):
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})  # for the main thread
        try:
            answers.put((True, call()))
        except BaseException as error:  # noqa: BLE001 - handed to the caller, raised there
            answers.put((False, error))

    threading.Thread(target=run, name="bpm-request", daemon=True).start()
    while True:
        try:
            ok, answer = answers.get(timeout=WAKE_SECONDS)
        except queue.Empty:
            continue
        if ok:
            return answer
        raise answer
