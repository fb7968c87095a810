"""infra.db.locking: a lock around database work cannot deadlock a bounded connection pool.

The pool here is a real psycopg_pool of one connection on the test database. One thread
holds that connection and then wants the lock; another wants the lock and a connection.
Taken in the wrong order (lock, then connection) the second thread sits on the lock while
it waits for the pool, and the first waits for the lock: neither moves until the pool's
timeout. `locked()` takes the connection first.
"""

import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

import pytest
from django.db import DatabaseError, connections

from infra.db.locking import locked
from tests.support.system import wait_until
from tests.support.threads import run_together

pytestmark = pytest.mark.postgres

ALIAS = "pool_of_one"
POOL_TIMEOUT_SECONDS = 3  # the deadlock's sign: a PoolTimeout after this long
SAFETY_SECONDS = 30  # only a bound for the wait below, never an assertion

Take = Callable[[threading.Lock, str], AbstractContextManager[None]]


@contextmanager
def lock_then_connect(lock: threading.Lock, using: str) -> Iterator[None]:
    """The wrong order, for contrast."""
    with lock:
        connections[using].ensure_connection()
        yield


@pytest.fixture
def pool_of_one(django_db_setup, django_db_blocker):
    """A pool of one connection to the test database, outside any test transaction."""
    default = connections["default"].settings_dict
    pool = {"min_size": 1, "max_size": 1, "timeout": POOL_TIMEOUT_SECONDS}
    connections.settings[ALIAS] = {**default, "OPTIONS": {**default["OPTIONS"], "pool": pool}}
    with django_db_blocker.unblock():
        try:
            yield connections[ALIAS].pool
        finally:
            connections[ALIAS].close()
            connections[ALIAS].close_pool()
            del connections.settings[ALIAS]


def select_one() -> int:
    with connections[ALIAS].cursor() as cursor:
        cursor.execute("SELECT 1")
        return cursor.fetchone()[0]


def holder_and_latecomer(pool, take: Take) -> dict[str, object]:
    """The holder takes the pool's connection, waits until the latecomer is waiting for the
    pool, then takes the lock; each reads once under the lock. What each got."""
    lock = threading.Lock()
    holding = threading.Event()

    def holder() -> object:
        connections[ALIAS].ensure_connection()
        holding.set()
        wait_until(
            lambda: pool.get_stats().get("requests_waiting", 0) > 0,
            what="the latecomer to ask the pool",
            timeout=SAFETY_SECONDS,
            interval=0.01,
        )
        with take(lock, ALIAS):
            value = select_one()
        connections[ALIAS].close()  # back to the pool
        return value

    def latecomer() -> object:
        assert holding.wait(SAFETY_SECONDS)
        try:
            with take(lock, ALIAS):
                return select_one()
        except DatabaseError as error:
            return f"{type(error).__name__}: {error}"

    return run_together({"holder": holder, "latecomer": latecomer})


def test_locked_takes_the_connection_first_so_both_threads_finish(pool_of_one):
    got = holder_and_latecomer(pool_of_one, locked)
    assert got == {"holder": 1, "latecomer": 1}


def test_the_lock_taken_first_deadlocks_until_the_pool_gives_up(pool_of_one):
    got = holder_and_latecomer(pool_of_one, lock_then_connect)
    assert got["holder"] == 1
    assert got["latecomer"] == (
        f"OperationalError: couldn't get a connection after {POOL_TIMEOUT_SECONDS:.2f} sec"
    )
