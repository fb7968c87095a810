"""Reads of breakpoints, scoped to what the caller may see.

Agents see only their own breakpoints (another agent's is "not found"); reviewers and
admins see all. Reads expire an overdue waiting breakpoint on the spot.
"""

from collections.abc import Iterable
from typing import Any

from django.db.models import Prefetch, QuerySet

from audit.models import Event, EventType
from breakpoints.actors import AgentPrincipal, is_reviewer
from breakpoints.models import Breakpoint
from breakpoints.services import breakpoint_expire_if_due, is_overdue
from config.exceptions import NotFound
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


def breakpoint_statuses(user: Any, breakpoint_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
    """The polling hot path: status rows of the visible ones among `breakpoint_ids`.

    One indexed primary-key query of five columns (ids the caller may not see are simply
    absent); an overdue waiting breakpoint is expired on the spot and read again.
    """
    ids = list(breakpoint_ids)
    # order_by(): rows by primary key need no ORDER BY (Meta.ordering would add one).
    found = visible_breakpoints(user).filter(pk__in=ids).order_by().values(*_STATUS_COLUMNS)
    rows = {row["pk"]: row for row in found}
    overdue = [pk for pk, row in rows.items() if is_overdue(row["status"], row["expires_at"])]
    for breakpoint_id in overdue:
        breakpoint_expire_if_due(breakpoint_id)
    if overdue:
        rows.update(status_rows_by_id(overdue))
    return rows


def status_rows_by_id(breakpoint_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Status rows by id, unscoped: for re-reading ids whose caller was already checked."""
    found = Breakpoint.objects.filter(pk__in=list(breakpoint_ids)).order_by()
    return {row["pk"]: row for row in found.values(*_STATUS_COLUMNS)}


def breakpoint_status(user: Any, breakpoint_id: str) -> dict[str, Any]:
    row = breakpoint_statuses(user, [breakpoint_id]).get(breakpoint_id)
    if row is None:
        raise NotFound("Breakpoint not found.")
    return row


def breakpoint_events(user: Any, breakpoint_id: str) -> QuerySet[Event]:
    """The audit trail of one visible breakpoint; an agent's has no webhook deliveries,
    which concern the operator's subscriptions, not the agent."""
    if not visible_breakpoints(user).filter(pk=breakpoint_id).exists():
        raise NotFound("Breakpoint not found.")
    events = Event.objects.filter(breakpoint_id=breakpoint_id)
    if isinstance(user, AgentPrincipal):
        events = events.exclude(type=EventType.NOTIFICATION)
    return events.order_by("timestamp", "id")
