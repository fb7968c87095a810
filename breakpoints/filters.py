"""The one FilterSet for breakpoints, shared by the API list and the selectors."""

import django_filters
from django import forms
from django.db import connection
from django.db.models import BooleanField, Q, QuerySet
from django.db.models.expressions import RawSQL
from drf_spectacular.utils import extend_schema_field

from breakpoints.choices import Status
from breakpoints.models import Breakpoint


class TagValuesField(forms.Field):
    """Every value of a repeated query parameter (?tag=a&tag=b)."""

    widget = forms.MultipleHiddenInput

    def clean(self, value):
        values = [v for v in (value or []) if v != ""]
        for tag in values:
            if len(tag) > 100:
                raise forms.ValidationError("A tag has at most 100 characters.")
        return values


@extend_schema_field({"type": "array", "items": {"type": "string"}})
class AllTagsFilter(django_filters.Filter):
    field_class = TagValuesField

    def filter(self, qs: QuerySet, value: list[str]) -> QuerySet:
        return filter_has_all_tags(qs, value) if value else qs


def filter_has_all_tags(qs: QuerySet[Breakpoint], tags: list[str]) -> QuerySet[Breakpoint]:
    """Breakpoints carrying every tag in `tags`."""
    if connection.vendor == "postgresql":
        return qs.filter(tags__contains=tags)  # jsonb @>, served by the GIN index
    table = Breakpoint._meta.db_table
    for tag in tags:
        qs = qs.filter(
            RawSQL(
                f'EXISTS (SELECT 1 FROM json_each("{table}"."tags") WHERE json_each.value = %s)',
                (tag,),
                output_field=BooleanField(),
            )
        )
    return qs


class BreakpointFilter(django_filters.FilterSet):
    status = django_filters.ChoiceFilter(choices=Status.choices)
    tag = AllTagsFilter(label="Tag (repeatable: all must match)")
    agentId = django_filters.CharFilter(field_name="agent_id", max_length=128)
    runId = django_filters.CharFilter(field_name="run_id", max_length=128)
    createdAfter = django_filters.IsoDateTimeFilter(field_name="created_at", lookup_expr="gte")
    createdBefore = django_filters.IsoDateTimeFilter(field_name="created_at", lookup_expr="lt")
    search = django_filters.CharFilter(method="filter_search", max_length=200)

    class Meta:
        model = Breakpoint
        fields: list[str] = []

    def filter_search(self, qs: QuerySet, name: str, value: str) -> QuerySet:
        value = value.strip()
        if not value:
            return qs
        return qs.filter(Q(title__icontains=value) | Q(question__icontains=value))
