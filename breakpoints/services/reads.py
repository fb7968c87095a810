"""Reads that first settle what the clock decided, for views to call.

A waiting breakpoint past its expiresAt must never be shown as waiting, even before
beat's sweep reaches it. Selectors only read; these read through them and, when a row
they got is overdue (rare), expire it through the expiry service and read it again. The
common case stays one query.
"""

from collections.abc import Iterable
from typing import Any

from breakpoints import selectors
from breakpoints.models import Breakpoint
from breakpoints.models.breakpoint import is_overdue
from breakpoints.services.expiry import breakpoint_expire_if_due
from core.exceptions import NotFound


def breakpoint_read(user: Any, breakpoint_id: str) -> Breakpoint:
    """One visible breakpoint with its feedback; NotFound if the caller may not see it."""
    bp = selectors.breakpoint_get(user, breakpoint_id)
    if bp.is_overdue():
        breakpoint_expire_if_due(bp.pk)
        bp = selectors.breakpoint_get(user, breakpoint_id)
    return bp


def breakpoints_page_read(user: Any, page: list[Breakpoint]) -> list[Breakpoint]:
    """A page of a list as read, with its overdue rows expired and read again."""
    overdue = [bp.pk for bp in page if bp.is_overdue()]
    if not overdue:
        return page
    for breakpoint_id in overdue:
        breakpoint_expire_if_due(breakpoint_id)
    fresh = selectors.breakpoint_list(user).in_bulk(overdue)
    return [fresh.get(bp.pk, bp) for bp in page]


def breakpoint_statuses_read(user: Any, breakpoint_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
    """The polling hot path: status rows of the visible ones among `breakpoint_ids`."""
    rows = selectors.breakpoint_statuses(user, breakpoint_ids)
    overdue = [pk for pk, row in rows.items() if is_overdue(row["status"], row["expires_at"])]
    for breakpoint_id in overdue:
        breakpoint_expire_if_due(breakpoint_id)
    if overdue:
        rows.update(selectors.status_rows_by_id(overdue))
    return rows


def breakpoint_status_read(user: Any, breakpoint_id: str) -> dict[str, Any]:
    row = breakpoint_statuses_read(user, [breakpoint_id]).get(breakpoint_id)
    if row is None:
        raise NotFound("Breakpoint not found.")
    return row
