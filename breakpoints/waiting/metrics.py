"""The waiting handler's own metrics: status requests served, and this process's long-polls.

ops.metrics exposes them with the rest at /metrics. Under PROMETHEUS_MULTIPROC_DIR each
process writes its long-poll gauges every few seconds (a scrape is answered by one
process and cannot ask the others).
"""

import logging
import os
import threading
import time

from prometheus_client import Counter, Gauge

from breakpoints.waiting.hub import hub_state

logger = logging.getLogger(__name__)

# How often a process under PROMETHEUS_MULTIPROC_DIR writes its long-poll gauges.
PROCESS_GAUGE_REFRESH_SECONDS = 5.0


def multiprocess_enabled() -> bool:
    return bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))


STATUS_REQUESTS = Counter(
    "bpm_status_requests",
    "Status requests answered by the waiting handler (GET .../status with a Bearer token), "
    "by kind: one breakpoint or many.",
    ["kind"],
)
LONGPOLLS_OPEN = Gauge(
    "bpm_longpolls_open",
    "Long-polls (status requests waiting for a decision) held by the web processes.",
    multiprocess_mode="livesum",
)
LISTENER_UP = Gauge(
    "bpm_waiting_listener_up",
    "1 when every web process's wake-up listener (PostgreSQL LISTEN) is up; 0 when one is "
    "down (reconnecting) or there is none (SQLite, or no ASGI lifespan).",
    multiprocess_mode="livemin",
)


def refresh_process_gauges() -> None:
    state = hub_state()
    LONGPOLLS_OPEN.set(state["waiters"])
    LISTENER_UP.set(1 if state["listener"] == "up" else 0)


_refresher_pid: int | None = None
_refresher_lock = threading.Lock()


def ensure_process_gauges_refresher() -> None:
    """Under PROMETHEUS_MULTIPROC_DIR, write this process's long-poll gauges every few
    seconds: a scrape is answered by one process and cannot ask the others."""
    global _refresher_pid
    pid = os.getpid()
    if _refresher_pid == pid or not multiprocess_enabled():
        return
    with _refresher_lock:
        if _refresher_pid == pid:
            return
        _refresher_pid = pid
        threading.Thread(target=_refresh_forever, name="metrics-refresh", daemon=True).start()


def _refresh_forever() -> None:
    while True:
        try:
            refresh_process_gauges()
        except Exception:  # noqa: BLE001 - a metrics thread must never die of a bad read
            logger.debug("Could not refresh the long-poll gauges", exc_info=True)
        time.sleep(PROCESS_GAUGE_REFRESH_SECONDS)


def count_status_request(*, many: bool) -> None:
    """Called by the waiting handler for each status request it serves."""
    STATUS_REQUESTS.labels(kind="many" if many else "one").inc()
    ensure_process_gauges_refresher()
