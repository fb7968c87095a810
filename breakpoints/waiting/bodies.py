"""The status answers (one breakpoint, or many), and the `pollAfterMs` hint in them.

Built as plain dicts, identical on the DRF and the ASGI path: the status poll is the
hot path, and a serializer per request would cost more than the query.
"""

import threading
import time
from typing import Any

from breakpoints.representation.expected_decision import expected_decision
from core.choices import Status
from core.timestamps import timestamp

# pollAfterMs: how long a client that does not long-poll should wait before asking again.
BASE_POLL_AFTER_MS = 1_000
MAX_POLL_AFTER_MS = 30_000
# Short polls per second one web process answers comfortably; beyond, the hint grows.
COMFORTABLE_POLLS_PER_SECOND = 500

NOT_FOUND = {"code": "not_found", "message": "Breakpoint not found."}


class PollRate:
    """Polls per second in this process, over the last whole second (cheap, thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._second = 0
        self._count = 0
        self._previous = 0

    def hit(self) -> None:
        now = int(time.monotonic())
        with self._lock:
            if now != self._second:
                self._previous = self._count if now == self._second + 1 else 0
                self._second, self._count = now, 0
            self._count += 1

    def per_second(self) -> int:
        now = int(time.monotonic())
        with self._lock:
            if now == self._second:
                return max(self._previous, self._count)
            return self._count if now == self._second + 1 else 0


poll_rate = PollRate()


def poll_after_ms(status: str) -> int | None:
    """None once the status is final (nothing left to wait for); else grows with load."""
    if status != Status.WAITING:
        return None
    load = poll_rate.per_second() / COMFORTABLE_POLLS_PER_SECOND
    return int(min(MAX_POLL_AFTER_MS, BASE_POLL_AFTER_MS * max(1.0, load)))


def status_body(row: dict[str, Any]) -> dict[str, Any]:
    """`{status, updatedAt, result, pollAfterMs, expectedDecision}` from a status row
    (selectors). expectedDecision comes from this process's copy of the aggregate as held:
    the ASGI handler builds this on its event loop, where no query may run (the status
    read, services.breakpoint_statuses_read, keeps the copy current)."""
    status = row["status"]
    return {
        "status": status,
        "updatedAt": timestamp(row["updated_at"]),
        "result": row["result"],
        "pollAfterMs": poll_after_ms(status),
        "expectedDecision": expected_decision(
            status=status, key=row["key"], experts=row["experts"], read=False
        ),
    }


def many_body(ids: tuple[str, ...], rows: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One entry per requested id, in the order asked; an id not visible is not found."""
    results = []
    for breakpoint_id in ids:
        row = rows.get(breakpoint_id)
        if row is None:
            results.append({"breakpointId": breakpoint_id, "error": NOT_FOUND})
        else:
            results.append({"breakpointId": breakpoint_id, **status_body(row)})
    return {"results": results}
