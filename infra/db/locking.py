"""Process-wide locks around database work, safe beside a bounded connection pool.

A thread that takes a lock and only then waits for a pooled connection can deadlock the
pool: the threads waiting for that lock may each hold one of its connections, and none is
given back until the lock is. (On PostgreSQL every thread's connection comes from the
process's pool, DATABASE_POOL_MAX of them; a burst found this, stuck for the pool's timeout.)
`locked()` has the thread take its connection first, so whoever holds the lock already has
all it needs and the others wait only for its query.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from threading import Lock

from django.db import DEFAULT_DB_ALIAS, connections


@contextmanager
def locked(lock: Lock, using: str = DEFAULT_DB_ALIAS) -> Iterator[None]:
    """`with lock:`, once this thread holds its connection to `using` (raises as
    ensure_connection() does when it cannot have one)."""
    connections[using].ensure_connection()
    with lock:
        yield
