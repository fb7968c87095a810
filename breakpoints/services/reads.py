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
from breakpoints.representation.expected_decision import aggregate
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
    overdue = _expired_now(bp.pk for bp in page if bp.is_overdue())
    if not overdue:
        return page
    fresh = selectors.breakpoint_list(user).in_bulk(overdue)
    return [fresh.get(bp.pk, bp) for bp in page]


def breakpoint_rows_page_read(user: Any, page: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A page of the API's list (of selectors.breakpoint_page_list or breakpoint_page_keys)
    as read, with its overdue rows expired and read again: the rows of selectors.listed_rows."""
    rows = selectors.breakpoint_page_rows(user, page)
    overdue = _expired_now(
        row["id"] for row in rows if is_overdue(row["status"], row["expires_at"])
    )
    if not overdue:
        return rows
    reread = selectors.breakpoint_page_list(user).filter(pk__in=overdue).order_by()
    fresh = {row["id"]: row for row in selectors.listed_rows(reread)}
    return [fresh.get(row["id"], row) for row in rows]


def _expired_now(overdue: Iterable[str]) -> list[str]:
    """Expire each of these overdue breakpoints (if still due); their ids."""
    expired = list(overdue)
    for breakpoint_id in expired:
        breakpoint_expire_if_due(breakpoint_id)
    return expired


def breakpoint_statuses_read(user: Any, breakpoint_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
    """The polling hot path: status rows of the visible ones among `breakpoint_ids`.

    It also keeps this process's copy of the decision-time aggregate current (a query at
    most once per CACHE_SECONDS), for the answer's expectedDecision: that answer may be
    built where no query can run (breakpoints.waiting.bodies)."""
    aggregate.current()
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
