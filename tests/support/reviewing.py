"""A reviewer who decides from a thread while an agent's call waits (the framework adapters'
live tests): find the breakpoint once it waits, then decide it through the API."""

import threading
import time
from collections.abc import Callable
from typing import Any

from bpm_client import Breakpoint, Client

SAFETY_SECONDS = 60  # only a bound for the loops, never an assertion


def waiting_breakpoints(client: Client, count: int = 1, **filters: Any) -> list[Breakpoint]:
    """The `count` waiting breakpoints matching `filters`, once that many exist."""
    deadline = time.monotonic() + SAFETY_SECONDS
    while time.monotonic() < deadline:
        found = list(client.list(status="waiting", **filters))
        if len(found) >= count:
            assert len(found) == count, [bp.breakpoint_id for bp in found]
            return found
        time.sleep(0.1)
    raise AssertionError(f"fewer than {count} waiting breakpoint(s) matching {filters}")


Decide = Callable[[Client, list[Breakpoint]], Any]


class Reviewer:
    """In a thread: wait until `count` breakpoints match `filters` (all waiting at once),
    then `decide(client, breakpoints)`. `join()` returns them as they were seen waiting
    (re-raising what failed there)."""

    def __init__(self, client: Client, decide: Decide, *, count: int = 1, **filters: Any):
        self.error: BaseException | None = None
        self.seen: list[Breakpoint] = []
        self._thread = threading.Thread(
            target=self._run, args=(client, decide, count, filters), daemon=True
        )
        self._thread.start()

    def _run(self, client: Client, decide: Decide, count: int, filters: dict[str, Any]) -> None:
        try:
            self.seen = waiting_breakpoints(client, count, **filters)
            decide(client, self.seen)
        except BaseException as error:  # noqa: BLE001 - handed to join()
            self.error = error

    def join(self) -> list[Breakpoint]:
        self._thread.join(SAFETY_SECONDS)
        assert not self._thread.is_alive(), "the reviewer did not finish"
        if self.error is not None:
            raise self.error
        return self.seen


def approve(comment: str = "go", values: dict[str, Any] | None = None) -> Decide:
    """Approve each (with `values`: edited)."""

    def decide(client: Client, breakpoints: list[Breakpoint]) -> None:
        for bp in breakpoints:
            client.release(bp.breakpoint_id, comment, values=values)

    return decide


def reject(comment: str) -> Decide:
    def decide(client: Client, breakpoints: list[Breakpoint]) -> None:
        for bp in breakpoints:
            client.release(bp.breakpoint_id, comment, approved=False)

    return decide
