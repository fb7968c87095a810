"""The one FilterSet for breakpoints, shared by the API list and the selectors."""

import copy
from datetime import UTC
from typing import ClassVar

import django_filters
from django import forms
from django.db.models import QuerySet
from django_filters.fields import IsoDateTimeField
from drf_spectacular.utils import extend_schema_field

from accounts import experts as routing
from breakpoints.models import Breakpoint
from breakpoints.models.breakpoint import BreakpointQuerySet
from breakpoints.models.jsonlists import filter_has_all_tags, filter_json_list
from core.actors import is_reviewer
from core.choices import Status
from core.limits import (
    MAX_AGENT_ID_LENGTH,
    MAX_KEY_LENGTH,
    MAX_RUN_ID_LENGTH,
    MAX_SEARCH_LENGTH,
    MAX_TAG_LENGTH,
    MAX_UTC_OFFSET,
)
from core.storable import text_problem


class TagValuesField(forms.Field):
    """Every value of a repeated query parameter (?tag=a&tag=b)."""

    widget = forms.MultipleHiddenInput

    def clean(self, value):
        values = [v for v in (value or []) if v != ""]
        for tag in values:
            if len(tag) > MAX_TAG_LENGTH:
                raise forms.ValidationError(f"A tag has at most {MAX_TAG_LENGTH} characters.")
            if problem := text_problem(tag):
                raise forms.ValidationError(problem)
        return values


# PostgreSQL's timestamptz takes UTC offsets up to 15:59 either way (a DataError beyond).


class UtcIsoDateTimeField(IsoDateTimeField):
    """An ISO 8601 date-time, in UTC; an offset no database takes is refused, not a 500."""

    default_error_messages = {
        "offset": "The UTC offset must be between -15:59 and +15:59.",
        "range": "The date-time is out of range.",
    }

    def to_python(self, value):
        parsed = super().to_python(value)
        if parsed is None:
            return None
        offset = parsed.utcoffset()
        if offset is not None and abs(offset) > MAX_UTC_OFFSET:
            raise forms.ValidationError(self.error_messages["offset"], code="offset")
        try:
            return parsed.astimezone(UTC)
        except OverflowError:  # 0001-01-01T00:00+01:00 is in year 0 in UTC
            raise forms.ValidationError(self.error_messages["range"], code="range") from None


class UtcIsoDateTimeFilter(django_filters.IsoDateTimeFilter):
    field_class = UtcIsoDateTimeField


@extend_schema_field({"type": "array", "items": {"type": "string"}})
class AllTagsFilter(django_filters.Filter):
    field_class = TagValuesField

    def filter(self, qs: QuerySet, value: list[str]) -> QuerySet:
        return filter_has_all_tags(qs, value) if value else qs


def filter_routed_to(qs: QuerySet[Breakpoint], user) -> QuerySet[Breakpoint]:
    """Breakpoints routed to a seat `user` holds: a group of theirs, their username, owner."""
    if not is_reviewer(user):
        return qs.none()
    return filter_json_list(qs, "experts", routing.assigned_names(user), match="any")


class _SharedFields(dict):
    """A form class's base_fields, which each form shares instead of deep-copying them:
    Django copies them so that a form may change its own fields; the filters' form is
    only validated (Field.clean reads its field), never changed or rendered."""

    def __deepcopy__(self, memo: dict) -> dict:
        return dict(self)


class _FiltersCopiedOnce(dict):
    """A FilterSet's base_filters, copied one level deep for each filterset: every filter
    shallowly (the filterset sets its parent and model on its own copies), its method bound
    to the copy. A deep copy also copied every filter's field, widget and choices, the
    largest cost of filtering a list."""

    def __deepcopy__(self, memo: dict) -> dict:
        copies = {}
        for name, original in self.items():
            copied = copy.copy(original)
            copied.method = original.method  # binds a FilterMethod to the copy
            copies[name] = copied
        return copies


class BreakpointFilter(django_filters.FilterSet):
    status = django_filters.ChoiceFilter(choices=Status.choices, method="filter_status")
    tag = AllTagsFilter(label="Tag (repeatable: all must match)")
    agentId = django_filters.CharFilter(field_name="agent_id", max_length=MAX_AGENT_ID_LENGTH)
    runId = django_filters.CharFilter(field_name="run_id", max_length=MAX_RUN_ID_LENGTH)
    # One group of the queue's (GET /api/breakpoints/groups): its key, and its runId.
    key = django_filters.CharFilter(field_name="key", max_length=MAX_KEY_LENGTH)
    createdAfter = UtcIsoDateTimeFilter(field_name="created_at", lookup_expr="gte")
    createdBefore = UtcIsoDateTimeFilter(field_name="created_at", lookup_expr="lt")
    search = django_filters.CharFilter(
        method="filter_search",
        max_length=MAX_SEARCH_LENGTH,
        help_text="Title or question contains this text, in any case (% and _ are literal).",
    )
    assignedTo = django_filters.ChoiceFilter(
        choices=[("me", "me")],
        method="filter_assigned_to",
        label="me: breakpoints routed (payload.expert) to one of your groups, to you, or to "
        "owner when you are a project owner",
    )
    _form_class: ClassVar[type[forms.Form] | None] = None  # get_form_class's, once built

    class Meta:
        model = Breakpoint
        fields: list[str] = []

    def get_form_class(self):
        """The form of the declared filters, built once: django-filter builds a new form class
        (and every field) per request, a list's largest cost after its queries. The fields
        depend on nothing of the request."""
        cls = type(self)
        form_class = cls.__dict__.get("_form_class")
        if form_class is None:
            form_class = super().get_form_class()
            form_class.base_fields = _SharedFields(form_class.base_fields)
            cls._form_class = form_class
        return form_class

    def filter_status(self, qs: BreakpointQuerySet, name: str, value: str) -> QuerySet:
        """`waiting` leaves out breakpoints already past expiresAt (the sweep is due)."""
        if value == Status.WAITING:
            return qs.waiting()
        return qs.filter(status=value)

    def filter_search(self, qs: BreakpointQuerySet, name: str, value: str) -> QuerySet:
        value = value.strip()
        if not value:
            return qs
        return qs.search(value)

    def filter_assigned_to(self, qs: QuerySet, name: str, value: str) -> QuerySet:
        user = getattr(self.request, "user", None)
        return filter_routed_to(qs, user) if value == "me" else qs


BreakpointFilter.base_filters = _FiltersCopiedOnce(BreakpointFilter.base_filters)
