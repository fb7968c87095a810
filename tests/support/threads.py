"""Running work in threads released at once (for races against real row locks)."""

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from functools import partial
from typing import Any

from django.db import connections


def run_together(works: dict[str, Callable[[], object]]) -> dict[str, object]:
    """Run each work in its own thread, released at once; each closes its DB connection.

    The results by name; fails the test if a thread hangs or a work raised.
    """
    barrier = threading.Barrier(len(works))
    results: dict[str, object] = {}

    def target(name: str, work: Callable[[], object]) -> None:
        try:
            barrier.wait(timeout=10)
            results[name] = work()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            results[name] = exc
        finally:
            connections.close_all()  # this thread's own connection

    threads = [threading.Thread(target=target, args=item, name=item[0]) for item in works.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
        assert not thread.is_alive(), f"{thread.name} hung"
    for name, value in results.items():
        assert not isinstance(value, BaseException), f"{name} raised {value!r}"
    return results


def repeat_in_parallel(
    count: int,
    tries_each: int,
    work: Callable[[Any], object],
    setup: Callable[[], AbstractContextManager[Any]] = nullcontext,
) -> list:
    """`count` threads, each entering `setup()` (its own client, say), then all released
    together to call `work(what setup gave)` `tries_each` times; every result, in one list."""
    barrier = threading.Barrier(count)
    results: list = []
    lock = threading.Lock()

    def client() -> None:
        with setup() as resource:
            barrier.wait()
            mine = [work(resource) for _ in range(tries_each)]
        with lock:
            results.extend(mine)

    threads = [threading.Thread(target=client) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def run_indexed(count: int, work: Callable[[int], object]) -> list[object]:
    """work(0) ... work(count - 1), each in its own thread, released at once (run_together);
    the results in that order."""
    results = run_together({str(i): partial(work, i) for i in range(count)})
    return [results[str(i)] for i in range(count)]


class ConnectionNotingLock:
    """A real lock that notes, each time a thread takes it, whether that thread already held
    its database connection to `using` (infra.db.locking: it must, beside a bounded pool)."""

    def __init__(self, using: str = "default"):
        self.using = using
        self.connected: list[bool] = []
        self._lock = threading.Lock()

    def __enter__(self) -> bool:
        self.connected.append(connections[self.using].connection is not None)
        return self._lock.__enter__()

    def __exit__(self, *exc_info: object) -> None:
        self._lock.__exit__(*exc_info)
