"""The contract's JSON for a breakpoint and its feedback, in plain Python (no DRF).

One source for every place a breakpoint leaves the server: the API
(breakpoints.api.serializers delegates its output here) and webhook bodies, so a
subscriber receives exactly what GET /api/breakpoints/{id} answers. Values are written
as the contract says: datetimes in ISO 8601 in UTC with `Z` (core.timestamps,
whatever TIME_ZONE says); ids and texts as strings; JSON columns as stored (the payload's
numbers as I-JSON doubles, core.ijson); null stays null.
"""

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from django.conf import settings

from accounts import experts as routing
from breakpoints.models import Breakpoint, Feedback
from breakpoints.representation.expected_decision import expected_decision
from core.ijson import as_doubles
from core.timestamps import timestamp


def console_url(breakpoint_id: str) -> str:
    """The breakpoint's review page in the console, absolute (BPM_PUBLIC_URL): the
    representation's `consoleUrl`, and the link every channel's message carries."""
    base = settings.BPM_PUBLIC_URL.rstrip("/")
    return f"{base}/admin/breakpoints/breakpoint/{breakpoint_id}/change/"


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
    return _feedback_json(feedback.__getattribute__)


def _feedback_json(get: Callable[[str], Any]) -> dict[str, Any]:
    return {
        "id": _text(get("id")),
        "author": _text(get("author")),
        "comment": _text(get("comment")),
        "createdAt": timestamp(get("created_at")),
    }


def breakpoint_json(
    bp: Breakpoint, seats: Mapping[str, routing.Seat] | None = None
) -> dict[str, Any]:
    """The breakpoint as the API shows it. Its feedback in the order loaded (the
    selectors prefetch it oldest first), else Feedback's default order (the same)."""
    feedback = [feedback_json(item) for item in bp.feedback.all()]
    return _breakpoint_json(bp.__getattribute__, feedback, seats)


def breakpoint_row_json(
    row: Mapping[str, Any], seats: Mapping[str, routing.Seat] | None = None
) -> dict[str, Any]:
    """breakpoint_json of a row keyed like the model's attributes, with its `feedback` as
    rows of Feedback's columns (breakpoints.selectors.listed_rows: a list page)."""
    feedback = [_feedback_json(item.__getitem__) for item in row["feedback"]]
    return _breakpoint_json(row.__getitem__, feedback, seats)


def _as_stored(value: Any) -> Any:
    return value


# The contract's fields of a breakpoint, in its order: each written from one attribute (the
# function beside it says how), or, None, from others (_derived_fields). The one list:
# _breakpoint_json writes these, the API serializer documents them (its Meta.fields), and a
# list page reads ATTRIBUTES, no more.
FIELDS: dict[str, tuple[str, Callable[[Any], Any]] | None] = {
    "breakpointId": ("id", _text),
    "status": ("status", _text),
    "agentId": ("agent_id", _text),
    "runId": ("run_id", _text),
    "title": ("title", _text),
    "key": ("key", _text),
    "question": ("question", _text),
    # As digested: PostgreSQL writes a double of 1e16 or more as a long integer.
    "payload": ("payload", as_doubles),
    "tags": ("tags", _as_stored),
    "ttlSeconds": ("ttl_seconds", _integer),
    "expiresAt": ("expires_at", timestamp),
    "createdAt": ("created_at", timestamp),
    "updatedAt": ("updated_at", timestamp),
    "releasedAt": ("released_at", timestamp),
    "expiredAt": ("expired_at", timestamp),
    "cancelledAt": ("cancelled_at", timestamp),
    "feedback": None,
    "result": ("result", _as_stored),
    "autoApproval": ("auto_approval", _as_stored),
    "strategy": ("strategy", _text),
    "experts": None,
    "votes": ("votes", _as_stored),
    "requestedBy": ("requested_by", _text),
    "payloadDigest": ("payload_digest", _text),
    "consoleUrl": None,
    "expectedDecision": None,
}
# Every attribute _breakpoint_json reads (besides `feedback`): those of FIELDS, and the
# `experts` the derived fields are written from.
ATTRIBUTES = (*(written[0] for written in FIELDS.values() if written is not None), "experts")


def _derived_fields(
    read: Mapping[str, Any],
    feedback: list[dict[str, Any]],
    seats: Mapping[str, routing.Seat] | None,
) -> dict[str, Any]:
    """The fields written from several attributes, or passed in."""
    status, key, experts = read["status"], read["key"], read["experts"]
    return {
        "feedback": feedback,
        "experts": experts_json(experts, seats),
        "consoleUrl": console_url(str(read["id"])),
        # From this process's copy of the aggregate: no query (breakpoints.representation.expected_decision).
        "expectedDecision": expected_decision(status=status, key=key, experts=experts),
    }


def _breakpoint_json(
    get: Callable[[str], Any],
    feedback: list[dict[str, Any]],
    seats: Mapping[str, routing.Seat] | None,
) -> dict[str, Any]:
    """The contract's fields (FIELDS, in order), each attribute read once with `get`."""
    read = {attribute: get(attribute) for attribute in ATTRIBUTES}
    derived = _derived_fields(read, feedback, seats)
    return {
        name: derived[name] if written is None else written[1](read[written[0]])
        for name, written in FIELDS.items()
    }


def breakpoints_json(breakpoints: Iterable[Breakpoint]) -> list[dict[str, Any]]:
    """breakpoint_json of each, with the experts of all resolved in one go."""
    chosen = list(breakpoints)
    seats = routing.resolve({name for bp in chosen for name in bp.experts})
    return [breakpoint_json(bp, seats) for bp in chosen]


def breakpoint_rows_json(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """breakpoint_row_json of each, with the experts of all resolved in one go."""
    chosen = list(rows)
    seats = routing.resolve({name for row in chosen for name in row["experts"]})
    return [breakpoint_row_json(row, seats) for row in chosen]


def represented(breakpoint_ids: list[str]) -> list[tuple[Breakpoint, dict[str, Any]]]:
    """The breakpoints `breakpoint_ids` read now, each with its representation (in
    queries per batch: the feedback prefetched)."""
    breakpoints = list(
        Breakpoint.objects.filter(pk__in=breakpoint_ids).order_by().prefetch_related("feedback")
    )
    return list(zip(breakpoints, breakpoints_json(breakpoints), strict=True))
