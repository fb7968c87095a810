"""Strict serializer fields: agents' JSON is untrusted, so no silent type coercion."""

from collections.abc import Mapping
from typing import Any

from drf_spectacular.extensions import OpenApiSerializerExtension
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.fields import empty

from core.spelling import close_match
from core.timestamps import timestamp


class StrictCharField(serializers.CharField):
    """A CharField that refuses numbers, booleans and objects instead of stringifying them,
    and text longer than max_length before trimming it."""

    default_error_messages = {"not_a_string": "Must be a string."}

    def run_validation(self, data=empty):
        # The length as sent, as the schema's maxLength says: DRF checks it after trimming,
        # and text that trims to nothing never reaches a check at all.
        if isinstance(data, str) and self.max_length is not None and len(data) > self.max_length:
            self.fail("max_length", max_length=self.max_length)
        return super().run_validation(data)

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("not_a_string")
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    default_error_messages = {"invalid": "Must be true or false."}

    def to_internal_value(self, data):
        if not isinstance(data, bool):
            self.fail("invalid")
        return data


class StrictIntegerField(serializers.IntegerField):
    default_error_messages = {"invalid": "Must be a whole number."}

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class UtcDateTimeField(serializers.DateTimeField):
    """A time as the contract writes it (core.timestamps): UTC with `Z`, whatever
    TIME_ZONE says; read like any DateTimeField."""

    def to_representation(self, value):
        return timestamp(value)


@extend_schema_field({"type": "array", "items": {"type": "string"}})
class TagListField(serializers.JSONField):
    """Tags as received; the service validates them (list of non-empty strings)."""


@extend_schema_field(
    {
        "oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
        "description": "Who decided: a username, `rule:<rule-id>` or `auto:after-<N>` for "
        "an auto-approval, or the list of voters for collect-all and quorum.",
    }
)
class RespondedByField(serializers.JSONField):
    """A result's respondedBy (breakpoints' results, a rule's replay)."""


@extend_schema_field(OpenApiTypes.OBJECT)
class JSONObjectField(serializers.JSONField):
    """Any JSON object; the service validates the babysitter keys it understands."""


def unknown_keys(data: Any, known: set[str], prefix: str = "") -> dict[str, list[str]]:
    """The error for keys of `data` outside `known`, naming each (and what it may have meant)."""
    if not isinstance(data, Mapping):
        return {}
    unknown = sorted(str(key)[:40] for key in set(data) - known)
    if not unknown:
        return {}
    named = []
    for key in unknown[:5]:
        meant = close_match(key, known)
        named.append(f"{key} (did you mean {meant}?)" if meant else key)
    listed = ", ".join(named) + (", …" if len(unknown) > 5 else "")
    allowed = ", ".join(sorted(known)) or "none"
    field = prefix or "non_field_errors"
    return {field: [f"Unknown field(s): {listed}. Allowed: {allowed}."]}


class StrictBody(serializers.Serializer):
    """The fields' own checks, unknown keys and `extra_problems`, reported together."""

    def extra_problems(self, data: Mapping, errors: Mapping) -> dict[str, list[str]]:
        """Whole-body checks; `errors` are the fields' own (skip a field already refused)."""
        return {}

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        errors: dict[str, Any] = {}
        values: dict[str, Any] = {}
        try:
            values = super().to_internal_value(data)
        except serializers.ValidationError as exc:
            errors.update(exc.detail if isinstance(exc.detail, dict) else {})
            if not isinstance(data, Mapping):
                raise
        errors.update(unknown_keys(data, set(self.fields)))
        for key, messages in self.extra_problems(data, errors).items():
            errors.setdefault(key, messages)
        if errors:
            raise serializers.ValidationError(errors)
        return values


class NoBody(StrictBody):
    """The body of an operation that takes none (expire, a DELETE): nothing, or `{}`. A key
    is refused as in every strict body: what a caller meant by it would be dropped unsaid."""


class StrictBodyScheme(OpenApiSerializerExtension):
    """A StrictBody takes no key but its fields: `additionalProperties: false` says so, so
    that clients and fuzzers know an unknown key is refused (400), not ignored."""

    target_class = StrictBody
    match_subclasses = True

    def map_serializer(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        schema = auto_schema._map_basic_serializer(self.target, direction)
        return {**schema, "additionalProperties": False}
