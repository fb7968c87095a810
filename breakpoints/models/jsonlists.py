"""Filtering on a breakpoint's JSON list columns (tags, experts), on every database.

Used by the API's filters, the console's and the trigger rules' selectors alike.
"""

from django.db import connection
from django.db.models import BooleanField, Q, QuerySet
from django.db.models.expressions import RawSQL

from breakpoints.models import Breakpoint


def _sqlite_list_has(field: str, values: list[str]) -> RawSQL:
    """SQLite: the JSON list column `field` holds one of `values` (json_each)."""
    table = Breakpoint._meta.db_table
    placeholders = ", ".join(["%s"] * len(values))
    return RawSQL(
        f'EXISTS (SELECT 1 FROM json_each("{table}"."{field}") '
        f"WHERE json_each.value IN ({placeholders}))",
        tuple(values),
        output_field=BooleanField(),
    )


def filter_json_list(
    qs: QuerySet[Breakpoint], field: str, values: list[str], *, match: str = "all"
) -> QuerySet[Breakpoint]:
    """Rows whose JSON list column `field` holds every (match="all") or any ("any") value.

    On PostgreSQL each value is a jsonb @> test, served by the column's GIN index
    (jsonb_path_ops, which answers @> only); "any" ORs them.
    """
    if not values:
        return qs if match == "all" else qs.none()
    if connection.vendor == "postgresql":
        if match == "all":
            return qs.filter(**{f"{field}__contains": values})
        condition = Q()
        for value in values:
            condition |= Q(**{f"{field}__contains": [value]})
        return qs.filter(condition)
    if match == "all":
        for value in values:
            qs = qs.filter(_sqlite_list_has(field, [value]))
        return qs
    return qs.filter(_sqlite_list_has(field, values))


def filter_has_all_tags(qs: QuerySet[Breakpoint], tags: list[str]) -> QuerySet[Breakpoint]:
    """Breakpoints carrying every tag in `tags`."""
    return filter_json_list(qs, "tags", tags, match="all")
