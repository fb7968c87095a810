"""Reads of breakpoints, scoped to what the caller may see.

Agents see only their own breakpoints (another agent's is "not found"); reviewers and
admins see all. Reads expire an overdue waiting breakpoint on the spot.
"""

import time
from typing import Any

from django.db.models import Prefetch, QuerySet

from audit.models import Event
from breakpoints.actors import AgentPrincipal, is_reviewer
from breakpoints.models import Breakpoint
from breakpoints.services import breakpoint_expire_if_due, is_overdue
from config.errors import NotFound
from reviews.models import Feedback


def visible_breakpoints(user: Any) -> QuerySet[Breakpoint]:
    if isinstance(user, AgentPrincipal):
        return Breakpoint.objects.filter(agent_id=user.agent_id)
    if is_reviewer(user):
        return Breakpoint.objects.all()
    return Breakpoint.objects.none()


def breakpoint_list(user: Any) -> QuerySet[Breakpoint]:
    """The list endpoint's base queryset; feedback comes in one extra query, never N+1."""
    return visible_breakpoints(user).prefetch_related(
        Prefetch("feedback", queryset=Feedback.objects.order_by("created_at", "id"))
    )


def breakpoint_get(user: Any, breakpoint_id: str) -> Breakpoint:
    bp = breakpoint_list(user).filter(pk=breakpoint_id).first()
    if bp is None:
        raise NotFound("Breakpoint not found.")
    if is_overdue(bp.status, bp.expires_at):
        breakpoint_expire_if_due(bp.pk)
        bp = breakpoint_list(user).get(pk=breakpoint_id)
    return bp


def expire_overdue(page: list[Breakpoint], user: Any) -> list[Breakpoint]:
    """A list page never shows a waiting breakpoint past its expiresAt: expire those now."""
    overdue = [bp.pk for bp in page if is_overdue(bp.status, bp.expires_at)]
    if not overdue:
        return page
    for breakpoint_id in overdue:
        breakpoint_expire_if_due(breakpoint_id)
    fresh = breakpoint_list(user).in_bulk(overdue)
    return [fresh.get(bp.pk, bp) for bp in page]


_STATUS_COLUMNS = ("pk", "status", "updated_at", "result", "expires_at")


def breakpoint_status(user: Any, breakpoint_id: str) -> dict[str, Any]:
    """The polling hot path: one indexed primary-key lookup of four columns."""
    # order_by(): one row by primary key needs no ORDER BY (Meta.ordering would add one).
    rows = visible_breakpoints(user).filter(pk=breakpoint_id).order_by().values(*_STATUS_COLUMNS)
    row = next(iter(rows[:1]), None)
    if row is None:
        raise NotFound("Breakpoint not found.")
    if is_overdue(row["status"], row["expires_at"]):
        breakpoint_expire_if_due(row["pk"])
        row = Breakpoint.objects.values(*_STATUS_COLUMNS).get(pk=row["pk"])
    return row


MAX_WAIT_SECONDS = 60
WAIT_POLL_INTERVAL_SECONDS = 0.5


def breakpoint_status_wait(user: Any, breakpoint_id: str, *, wait_seconds: float) -> dict[str, Any]:
    """Long-poll: hold the answer until the status changes or `wait_seconds` pass.

    Re-reads the same one-row indexed query every half second: cheap, and it needs no
    broker, so it behaves the same on the embedded defaults and in production.
    """
    row = breakpoint_status(user, breakpoint_id)
    deadline = time.monotonic() + min(wait_seconds, MAX_WAIT_SECONDS)
    initial = row["status"]
    while row["status"] == initial and (remaining := deadline - time.monotonic()) > 0:
        time.sleep(min(WAIT_POLL_INTERVAL_SECONDS, remaining))
        row = breakpoint_status(user, breakpoint_id)
    return row


def breakpoint_events(user: Any, breakpoint_id: str) -> QuerySet[Event]:
    if not visible_breakpoints(user).filter(pk=breakpoint_id).exists():
        raise NotFound("Breakpoint not found.")
    return Event.objects.filter(breakpoint_id=breakpoint_id).order_by("timestamp", "id")
