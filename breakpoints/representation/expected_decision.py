"""expectedDecision: how long a waiting breakpoint will probably wait for a person.

The figures come from the DecisionTimeStat aggregate (refreshed by beat from the last
WINDOW_DAYS of human decisions, services.decision_times_refresh). Each process holds the
whole aggregate in memory and reads it again at most every CACHE_SECONDS, so the status
poll, the representation and a list page add no query for it. A breakpoint gets the
figures of its own key when that key names it (not FALLBACK_KEY) and has MIN_SAMPLES
decisions, else of its expert seats (the same set of names), else of all decisions;
`basis` says which. None while fewer than MIN_SAMPLES decisions back every level, and
once the breakpoint is no longer waiting.

It also keeps the metrics of how the expectation held up: each human decision's time,
and that time against the p50 it was expected to take (ops.metrics serves them).
"""

import json
import logging
import threading
import time
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.db import DatabaseError, transaction
from prometheus_client import Counter, Histogram

from breakpoints.models import DecisionBasis, DecisionTimeStat
from core.choices import Status
from core.naming import FALLBACK_KEY
from infra.db.locking import locked

logger = logging.getLogger(__name__)

WINDOW_DAYS = 90
MIN_SAMPLES = 20
CACHE_SECONDS = 60.0

Seats = tuple[str, ...]
# (basis, key or seats or "") -> the expectedDecision JSON of that group.
Stats = dict[tuple[str, str | Seats], dict[str, Any]]


def seats_of(names: Iterable[str]) -> Seats:
    """A breakpoint's expert seats as one value: its names, each once, sorted."""
    return tuple(sorted(set(names)))


def percentile(ordered: list[float], fraction: float) -> float:
    """PostgreSQL's percentile_cont of sorted values: linear between the two nearest."""
    position = fraction * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def as_json(basis: str, p50: float, p90: float, samples: int) -> dict[str, Any]:
    """A group's expectedDecision: whole seconds, the number of decisions, the basis."""
    return {
        "p50Seconds": round(p50),
        "p90Seconds": round(p90),
        "samples": samples,
        "basis": basis,
    }


class _Aggregate:
    """This process's copy of DecisionTimeStat, read again once older than CACHE_SECONDS."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stats: Stats = {}
        self._read_at: float | None = None

    def current(self) -> Stats:
        read_at = self._read_at
        if read_at is not None and time.monotonic() - read_at < CACHE_SECONDS:
            return self._stats
        try:
            with locked(self._lock):  # one thread reads; the others wait for its answer
                if self._read_at is None or time.monotonic() - self._read_at >= CACHE_SECONDS:
                    self._set(_stats_read())
                return self._stats
        except DatabaseError:  # no connection to read with: the figures held, if any
            logger.warning("expectedDecision: no database connection to read the aggregate")
            return self._stats

    def held(self) -> Stats:
        """The figures held now, however old, without reading: for code that may not query
        (the ASGI handler's event loop), after current() was called where it could."""
        return self._stats

    def remember(self, stats: Stats) -> None:
        """The figures just computed here (the refresh): no need to read them back."""
        with self._lock:
            self._set(stats)

    def forget(self, *, empty: bool = False) -> None:
        """Read again at the next use; `empty`: hold no figures until CACHE_SECONDS pass."""
        with self._lock:
            self._stats, self._read_at = {}, (time.monotonic() if empty else None)

    def _set(self, stats: Stats) -> None:
        self._stats, self._read_at = stats, time.monotonic()


def _stats_read() -> Stats:
    """The whole aggregate, in one query (it holds only groups of MIN_SAMPLES or more).

    A failure (its table not migrated yet) means no figures, never a failed answer: the
    read has its own savepoint inside a caller's transaction, which it cannot abort."""
    try:
        with transaction.atomic():
            rows = list(
                DecisionTimeStat.objects.values_list(
                    "basis", "value", "p50_seconds", "p90_seconds", "samples"
                )
            )
    except DatabaseError:
        logger.warning("expectedDecision: the decision-time aggregate is unreadable", exc_info=True)
        return {}
    return stats_of(rows)


def stats_of(rows: Iterable[tuple[str, str | Seats, float, float, int]]) -> Stats:
    """Stats from (basis, value, p50, p90, samples): an `experts` value as stored (a JSON
    array of names) or already as Seats."""
    stats: Stats = {}
    for basis, value, p50, p90, samples in rows:
        lookup: str | Seats = value
        if basis == DecisionBasis.EXPERTS and isinstance(value, str):
            lookup = seats_of(json.loads(value))
        stats[(basis, lookup)] = as_json(basis, p50, p90, samples)
    return stats


aggregate = _Aggregate()


def expectation(key: str, experts: list[str], *, read: bool = True) -> dict[str, Any] | None:
    """The figures for a breakpoint of this key and these seats (see the module); `read`
    False: from the figures held, never a query."""
    stats = aggregate.current() if read else aggregate.held()
    if not stats:
        return None
    found = stats.get((DecisionBasis.KEY, key)) if key != FALLBACK_KEY else None
    if found is None and experts:
        found = stats.get((DecisionBasis.EXPERTS, seats_of(experts)))
    if found is None:
        found = stats.get((DecisionBasis.ALL, ""))
    return dict(found) if found is not None else None


def expected_decision(
    *, status: str, key: str, experts: list[str], read: bool = True
) -> dict[str, Any] | None:
    """expectedDecision as the API shows it: the expectation while waiting, else None."""
    if status != Status.WAITING:
        return None
    return expectation(key, experts, read=read)


# --- how the expectation held up (ops.metrics serves these) --------------------------

_SECONDS_BUCKETS = (30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400, 28800, 86400, 259200)
DECISION_SECONDS = Histogram(
    "bpm_decision_seconds",
    "How long each human decision took (decidedAt - createdAt), by the basis of the "
    "expectation its breakpoint had (key, experts, all; none without one).",
    ["basis"],
    buckets=_SECONDS_BUCKETS,
)
DECISION_VS_EXPECTED = Histogram(
    "bpm_decision_seconds_vs_expected_p50",
    "Each human decision's time divided by the p50 it was expected to take (1: as "
    "expected), by basis. Only decisions that had an expectation.",
    ["basis"],
    buckets=(0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 4.0, 8.0),
)
DECISION_PAST_P90 = Counter(
    "bpm_decisions_past_expected_p90",
    "Human decisions that took longer than their expected p90, by basis (about a tenth of "
    "bpm_decision_seconds_vs_expected_p50's count when the expectation holds).",
    ["basis"],
)


def decision_observe(
    *, key: str, experts: list[str], created_at: datetime, decided_at: datetime
) -> None:
    """Record one human decision against what was expected of it (the figures now)."""
    seconds = max(0.0, (decided_at - created_at).total_seconds())
    expected = expectation(key, experts)
    basis = expected["basis"] if expected else "none"
    DECISION_SECONDS.labels(basis).observe(seconds)
    if expected is None:
        return
    DECISION_VS_EXPECTED.labels(basis).observe(seconds / max(expected["p50Seconds"], 1))
    if seconds > expected["p90Seconds"]:
        DECISION_PAST_P90.labels(basis).inc()
