"""Cursor pagination: constant cost per page on a table of millions (no COUNT, no OFFSET)."""

from datetime import UTC

from django.utils.dateparse import parse_datetime
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import CursorPagination

from core.limits import MAX_UTC_OFFSET

ORDERINGS = {
    "-createdAt": ("-created_at", "-id"),
    "createdAt": ("created_at", "id"),
}


class BreakpointCursorPagination(CursorPagination):
    page_size = 50
    page_size_query_param = "pageSize"
    max_page_size = 200
    ordering = ORDERINGS["-createdAt"]

    def get_ordering(self, request, queryset, view):
        requested = request.query_params.get("ordering", "-createdAt")
        if requested not in ORDERINGS:
            raise ValidationError(
                {"ordering": [f"Must be one of: {', '.join(sorted(ORDERINGS))}."]}
            )
        return ORDERINGS[requested]

    def get_page_size(self, request):
        """`pageSize`: a whole number >= 1 (above max_page_size it is capped); else 400."""
        values = request.query_params.getlist(self.page_size_query_param)
        if not values:
            return self.page_size
        raw = values[-1].strip()
        if len(values) > 1 or not raw.isascii() or not raw.isdigit() or int(raw) < 1:
            raise ValidationError({"pageSize": ["Must be one whole number >= 1."]})
        return min(int(raw), self.max_page_size)

    def get_schema_operation_parameters(self, view):
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.cursor_query_param:
                parameter["description"] = (
                    "Opaque: the value from a page's `next` or `previous` link (any other is 400)."
                )
            if parameter["name"] == self.page_size_query_param:
                parameter["description"] = (
                    f"Results per page (default {self.page_size}; more than "
                    f"{self.max_page_size} gives {self.max_page_size})."
                )
                parameter["schema"] = {"type": "integer", "minimum": 1}
        parameters.append(
            {
                "name": "ordering",
                "required": False,
                "in": "query",
                "description": "createdAt or -createdAt (default: newest first).",
                "schema": {"type": "string", "enum": list(ORDERINGS)},
            }
        )
        return parameters

    def decode_cursor(self, request):
        try:
            cursor = super().decode_cursor(request)
        except NotFound:
            raise ValidationError({"cursor": ["Invalid cursor."]}) from None
        if cursor is None or cursor.position is None:
            return cursor
        # DRF puts the position into the query as it comes: it must be a created_at.
        position = _utc_position(str(cursor.position))
        if position is None:
            raise ValidationError({"cursor": ["Invalid cursor."]})
        # The stubs type Cursor.position as int; DRF keeps the query's string (str() of a row's).
        return cursor._replace(position=position)  # type: ignore[arg-type]


def _utc_position(value: str) -> str | None:
    """A cursor's position (str() of an aware datetime) as str() of that instant in UTC.

    That is the form DRF writes from the rows (stored in UTC), so a genuine cursor comes
    back unchanged; anything else (NUL, not a date-time, no zone or one beyond what
    PostgreSQL takes) is None.
    """
    try:
        parsed = parse_datetime(value)
        offset = parsed.utcoffset() if parsed is not None else None
        if parsed is None or offset is None or abs(offset) > MAX_UTC_OFFSET:
            return None
        return str(parsed.astimezone(UTC))
    except (ValueError, OverflowError):
        return None
