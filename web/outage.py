"""Database outages: which errors mean "the database is not reachable", and failing fast.

A request that fails on one (refused or dropped connections, no connection from the pool
within DATABASE_POOL_TIMEOUT) is answered 503 `unavailable` with Retry-After on every
path (web.errors.handler500). Its transaction has rolled back: nothing is half
written, and a retry with the same Idempotency-Key creates exactly once.

Once the pool could not hand out a connection, this process fails fast for
BPM_DATABASE_FAIL_FAST_SECONDS: requests are answered 503 at once instead of each holding
one of the few web threads for the pool timeout (which would queue every other request
behind them). The next request after that tries the database again.
"""

import math
import sys
import time

import psycopg
from django.conf import settings
from django.db import InterfaceError, OperationalError
from psycopg_pool import PoolTimeout

DATABASE_DOWN = (
    OperationalError,
    InterfaceError,
    PoolTimeout,
    psycopg.OperationalError,
    psycopg.InterfaceError,
)
_fail_fast_until = 0.0  # time.monotonic() until which requests are refused unasked


def _causes(exc: BaseException) -> list[BaseException]:
    """The exception and what it was raised from (Django wraps the driver's errors)."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def is_database_down(exc: BaseException) -> bool:
    """The database could not serve the request (anything a retry later may cure)."""
    return isinstance(exc, DATABASE_DOWN)


def _pool_exhausted(exc: BaseException) -> bool:
    """No connection could be had at all (not one query that failed on its connection)."""
    return any(isinstance(cause, PoolTimeout) for cause in _causes(exc))


def retry_after_seconds() -> int:
    return max(1, math.ceil(settings.BPM_DATABASE_FAIL_FAST_SECONDS))


def failing_fast() -> bool:
    return time.monotonic() < _fail_fast_until


def record_failure(exc: BaseException) -> None:
    """After the pool could not give a connection, refuse at once for a moment."""
    global _fail_fast_until
    if _pool_exhausted(exc):
        _fail_fast_until = time.monotonic() + settings.BPM_DATABASE_FAIL_FAST_SECONDS


def reset() -> None:
    """Forget any failure (tests)."""
    global _fail_fast_until
    _fail_fast_until = 0.0


def current_database_failure() -> BaseException | None:
    """The exception being handled, when it is a database outage (for handler500)."""
    exc = sys.exc_info()[1]
    return exc if exc is not None and is_database_down(exc) else None
