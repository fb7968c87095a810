"""Reads of breakpoints, scoped to what the caller may see.

Agents see only their own breakpoints (another agent's is "not found"); reviewers and
admins see all. Selectors only read: views go through services/reads.py, which expires
an overdue waiting breakpoint before anyone sees it.
"""

from collections.abc import Iterable
from typing import Any

from django.db.models import Prefetch, QuerySet

from audit.models import Event, EventType
from breakpoints.models import Breakpoint, Feedback
from core.actors import AgentPrincipal
from core.exceptions import NotFound


def breakpoint_list(user: Any) -> QuerySet[Breakpoint]:
    """The list endpoint's base queryset; feedback comes in one extra query, never N+1."""
    return Breakpoint.objects.visible_to(user).prefetch_related(
        Prefetch("feedback", queryset=Feedback.objects.order_by("created_at", "id"))
    )


def breakpoint_get(user: Any, breakpoint_id: str) -> Breakpoint:
    bp = breakpoint_list(user).filter(pk=breakpoint_id).first()
    if bp is None:
        raise NotFound("Breakpoint not found.")
    return bp


_STATUS_COLUMNS = ("pk", "status", "updated_at", "result", "expires_at")


def breakpoint_statuses(user: Any, breakpoint_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
    """The polling hot path: status rows of the visible ones among `breakpoint_ids`.

    One indexed primary-key query of five columns (ids the caller may not see are simply
    absent).
    """
    ids = list(breakpoint_ids)
    # order_by(): rows by primary key need no ORDER BY (Meta.ordering would add one).
    found = (
        Breakpoint.objects.visible_to(user).filter(pk__in=ids).order_by().values(*_STATUS_COLUMNS)
    )
    return {row["pk"]: row for row in found}


def status_rows_by_id(breakpoint_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Status rows by id, unscoped: for re-reading ids whose caller was already checked."""
    found = Breakpoint.objects.filter(pk__in=list(breakpoint_ids)).order_by()
    return {row["pk"]: row for row in found.values(*_STATUS_COLUMNS)}


def breakpoint_events(user: Any, breakpoint_id: str) -> QuerySet[Event]:
    """The audit trail of one visible breakpoint; an agent's has no deliveries (they concern
    the operator's channels) and no refused channel decisions (they concern reviewers)."""
    if not Breakpoint.objects.visible_to(user).filter(pk=breakpoint_id).exists():
        raise NotFound("Breakpoint not found.")
    events = Event.objects.filter(breakpoint_id=breakpoint_id)
    if isinstance(user, AgentPrincipal):
        events = events.exclude(type__in=[EventType.NOTIFICATION, EventType.REFUSED])
    return events.order_by("timestamp", "id")
