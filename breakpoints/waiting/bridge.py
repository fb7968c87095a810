"""The one bridge from the async waiting path to the synchronous ORM.

A few dedicated threads run short reads (a token, a handful of status rows); a waiting
request holds none of them while it waits. Each call gives its database connection back
(to the pool on PostgreSQL) so no thread keeps one between calls.
"""

import asyncio
import contextvars
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import ParamSpec, TypeVar

from django.conf import settings
from django.db import connections

P = ParamSpec("P")
R = TypeVar("R")

_executor: ThreadPoolExecutor | None = None


def _pool() -> ThreadPoolExecutor:
    global _executor
    if _executor is None:
        _executor = ThreadPoolExecutor(
            max_workers=settings.BPM_WAIT_THREADS, thread_name_prefix="bpm-wait"
        )
    return _executor


def _call_and_release(function: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    try:
        return function(*args, **kwargs)
    finally:
        connections.close_all()


async def run_sync(function: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """Run a synchronous (ORM) function on the bridge threads and await its result."""
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()  # log lines in the thread keep the request id
    call = partial(_call_and_release, function, *args, **kwargs)
    return await loop.run_in_executor(_pool(), context.run, call)
