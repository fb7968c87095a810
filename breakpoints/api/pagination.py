"""Cursor pagination: constant cost per page on a table of millions (no COUNT, no OFFSET)."""

from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import CursorPagination

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

    def get_schema_operation_parameters(self, view):
        parameters = super().get_schema_operation_parameters(view)
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
            return super().decode_cursor(request)
        except NotFound:
            raise ValidationError({"cursor": ["Invalid cursor."]}) from None
