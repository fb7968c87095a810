"""Waiting in a thread, for requests that reach Django instead of the ASGI handler.

Only WSGI deployments, the test client and console-session callers get here (agents with
a Bearer token are served by breakpoints/waiting/asgi.py under ASGI). It re-reads the
rows every BPM_WAIT_FALLBACK_RECHECK_SECONDS and answers the same way.
"""

import time
from typing import Any

from django.conf import settings

from breakpoints.waiting.query import StatusQuery
from breakpoints.waiting.reads import Rows, statuses
from core.choices import Status


def statuses_after_wait(principal: Any, query: StatusQuery) -> Rows:
    rows = statuses(principal, query.ids)
    deadline = time.monotonic() + query.wait
    while (
        rows
        and all(row["status"] == Status.WAITING for row in rows.values())
        and (remaining := deadline - time.monotonic()) > 0
    ):
        time.sleep(min(settings.BPM_WAIT_FALLBACK_RECHECK_SECONDS, remaining))
        rows = statuses(principal, query.ids)
    return rows
