"""The contract's JSON for a breakpoint and its feedback, in plain Python (no DRF).

One source for every place a breakpoint leaves the server: the API
(breakpoints.api.serializers delegates its output here) and webhook bodies, so a
subscriber receives exactly what GET /api/breakpoints/{id} answers. Values are written
as the contract says: datetimes in ISO 8601 in UTC with `Z` (core.timestamps,
whatever TIME_ZONE says); ids and texts as strings; JSON columns as stored; null stays null.
"""

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from django.db import models

from accounts import experts as routing
from breakpoints.models import Breakpoint, Feedback
from core.timestamps import timestamp


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _integer(value: Any) -> int | None:
    return None if value is None else int(value)


def experts_json(
    experts: list[str], seats: Mapping[str, routing.Seat] | None = None
) -> list[dict[str, Any]]:
    """The seats of a routed breakpoint, resolved now; `seats` (routing.resolve of a page)
    saves the queries when it covers every name."""
    if not experts:
        return []
    if seats is not None and not all(name in seats for name in experts):
        seats = None
    return [
        {"name": seat.name, "resolved": seat.resolved, "kind": seat.kind}
        for seat in routing.seats_for(experts, seats)
    ]


def feedback_json(feedback: Feedback) -> dict[str, Any]:
    return {
        "id": _text(feedback.pk),
        "author": _text(feedback.author),
        "comment": _text(feedback.comment),
        "createdAt": timestamp(feedback.created_at),
    }


def _feedback_of(bp: Breakpoint) -> Iterable[Feedback]:
    """Its feedback, oldest first: the rows a list read with the page (selectors.
    ListedFeedback: JSON objects of every column), else bp.feedback (prefetched, or read)."""
    listed = getattr(bp, "listed_feedback", None)
    if listed is None:
        return bp.feedback.all()
    return [_feedback_from_json(row, bp._state.db) for row in listed]


def _feedback_from_json(row: Mapping[str, Any], db: str | None) -> Feedback:
    """A Feedback from the JSON object of its row (PostgreSQL writes times as ISO text),
    built as Django builds a row it read (from_db)."""
    values = []
    for field in _FEEDBACK_FIELDS:
        value = row.get(field.column or field.attname)
        if isinstance(field, models.DateTimeField) and isinstance(value, str):
            value = datetime.fromisoformat(value)
        values.append(value)
    return Feedback.from_db(db, _FEEDBACK_ATTNAMES, values)


_FEEDBACK_FIELDS = Feedback._meta.concrete_fields
_FEEDBACK_ATTNAMES = [field.attname for field in _FEEDBACK_FIELDS]


def breakpoint_json(
    bp: Breakpoint, seats: Mapping[str, routing.Seat] | None = None
) -> dict[str, Any]:
    """The breakpoint as the API shows it. Its feedback in the order loaded (the
    selectors prefetch it oldest first), else Feedback's default order (the same)."""
    return {
        "breakpointId": _text(bp.pk),
        "status": _text(bp.status),
        "agentId": _text(bp.agent_id),
        "runId": _text(bp.run_id),
        "title": _text(bp.title),
        "key": _text(bp.key),
        "question": _text(bp.question),
        "payload": bp.payload,
        "tags": bp.tags,
        "ttlSeconds": _integer(bp.ttl_seconds),
        "expiresAt": timestamp(bp.expires_at),
        "createdAt": timestamp(bp.created_at),
        "updatedAt": timestamp(bp.updated_at),
        "releasedAt": timestamp(bp.released_at),
        "expiredAt": timestamp(bp.expired_at),
        "cancelledAt": timestamp(bp.cancelled_at),
        "feedback": [feedback_json(feedback) for feedback in _feedback_of(bp)],
        "result": bp.result,
        "autoApproval": bp.auto_approval,
        "strategy": _text(bp.strategy),
        "experts": experts_json(bp.experts, seats),
        "votes": bp.votes,
        "requestedBy": _text(bp.requested_by),
        "payloadDigest": _text(bp.payload_digest),
    }


def breakpoints_json(breakpoints: Iterable[Breakpoint]) -> list[dict[str, Any]]:
    """breakpoint_json of each, with the experts of all resolved in one go."""
    chosen = list(breakpoints)
    seats = routing.resolve({name for bp in chosen for name in bp.experts})
    return [breakpoint_json(bp, seats) for bp in chosen]


def represented(breakpoint_ids: list[str]) -> list[tuple[Breakpoint, dict[str, Any]]]:
    """The breakpoints `breakpoint_ids` read now, each with its representation (in
    queries per batch: the feedback prefetched)."""
    breakpoints = list(
        Breakpoint.objects.filter(pk__in=breakpoint_ids).order_by().prefetch_related("feedback")
    )
    return list(zip(breakpoints, breakpoints_json(breakpoints), strict=True))
