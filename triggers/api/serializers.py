"""What the triggers API answers: event sources, trigger rules, external events, dry runs."""

from typing import Any

from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.plumbing import ResolvedComponent
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from triggers.models import (
    EventSource,
    EventStatus,
    ExternalEvent,
    SourceKind,
    TriggerAction,
    TriggerRule,
)
from web.api.fields import UtcDateTimeField


class EnumField(serializers.CharField):
    """A choice, answered as text and documented as a named enum component of its own.

    spectacular's enum hook names enums by property: a second `status`, `kind` or
    `action` set would rename the breakpoints' StatusEnum (and others) to hashes.
    """

    component = ""
    values: list[str] = []


class EventStatusField(EnumField):
    component, values = "EventStatusEnum", list(EventStatus.values)


class SourceKindField(EnumField):
    component, values = "SourceKindEnum", list(SourceKind.values)


class TriggerActionField(EnumField):
    component, values = "TriggerActionEnum", list(TriggerAction.values)


class EnumFieldScheme(OpenApiSerializerFieldExtension):
    target_class = "triggers.api.serializers.EnumField"
    match_subclasses = True

    def map_serializer_field(self, auto_schema, direction):
        field = self.target
        component = ResolvedComponent(
            name=field.component,
            type=ResolvedComponent.SCHEMA,
            object=field.component,
            schema={"type": "string", "enum": field.values},
        )
        auto_schema.registry.register_on_missing(component)
        return component.ref


def source_url(name: str) -> str:
    return f"/api/events/{name}"


class EventSourceSerializer(serializers.ModelSerializer):
    kind = SourceKindField()
    createdBy = serializers.CharField(source="created_by")
    createdAt = UtcDateTimeField(source="created_at")
    url = serializers.SerializerMethodField(help_text="Where the sender posts its events.")

    class Meta:
        model = EventSource
        fields = ["name", "kind", "enabled", "createdBy", "createdAt", "url"]
        read_only_fields = fields

    def get_url(self, source: EventSource) -> str:
        return source_url(source.name)


class EventSourceCreatedSerializer(EventSourceSerializer):
    secret = serializers.CharField(
        help_text="In this answer only, never again: configure the sender with it now."
    )

    class Meta(EventSourceSerializer.Meta):
        fields = [*EventSourceSerializer.Meta.fields, "secret"]
        read_only_fields = fields


class EventSourceListSerializer(serializers.Serializer):
    results = EventSourceSerializer(many=True)


@extend_schema_field({"type": "array", "items": {"type": "string"}})
class ConditionsField(serializers.JSONField):
    pass


@extend_schema_field({"type": "object", "additionalProperties": True})
class ObjectField(serializers.JSONField):
    pass


class TriggerRuleSerializer(serializers.ModelSerializer):
    source = serializers.CharField(  # type: ignore[assignment]
        source="source.name", allow_null=True, help_text="null: events from any source."
    )
    eventType = serializers.CharField(source="event_type", help_text="A type or a glob.")
    conditions = ConditionsField(help_text="JMESPath expressions; every one must hold.")
    action = TriggerActionField()
    params = ObjectField(help_text="The action's parameters (text values are templates).")
    owner = serializers.CharField(
        source="owner.username", help_text="The admin whose permissions the rule acts with."
    )
    createdAt = UtcDateTimeField(source="created_at")

    class Meta:
        model = TriggerRule
        fields = ["id", "name", "source", "eventType", "conditions", "action", "params", "owner", "enabled", "createdAt"]  # fmt: skip
        read_only_fields = fields


class TriggerRuleListSerializer(serializers.Serializer):
    results = TriggerRuleSerializer(many=True)


ACTION_TAKEN = {
    "type": "object",
    "additionalProperties": True,
    "required": ["action", "outcome"],
    "description": "One thing done (or, in a dry run, that would be done): on a breakpoint "
    "(breakpointId), a creation (payload, tags, runId) or a forward.",
    "properties": {
        "action": {"type": "string"},
        "outcome": {
            "type": "string",
            "description": "released, cancelled, created, exists, refused, forwarded to N "
            "subscriber(s), no waiting breakpoint matched; would … in a dry run.",
        },
        "breakpointId": {"type": "string"},
        "error": {"type": "string"},
    },
}


@extend_schema_field({"type": "array", "items": ACTION_TAKEN})
class ActionsField(serializers.JSONField):
    pass


class OutcomeSerializer(serializers.Serializer):
    """One rule on one event (documentation of triggers.services.evaluate_rule's result)."""

    rule = serializers.CharField()
    action = serializers.CharField()
    matched = serializers.BooleanField(
        required=False, help_text="Every condition held (absent when one failed to evaluate)."
    )
    unmet = serializers.ListField(
        child=serializers.CharField(), required=False, help_text="The conditions that did not."
    )
    actions = ActionsField(required=False)
    error = serializers.CharField(required=False, help_text="Why the rule could not act.")


@extend_schema_field(OutcomeSerializer(many=True))
class OutcomesField(serializers.JSONField):
    pass


class ExternalEventSerializer(serializers.ModelSerializer):
    source = serializers.CharField(source="source.name")  # type: ignore[assignment]
    deliveryId = serializers.CharField(source="delivery_id")
    receivedAt = UtcDateTimeField(source="received_at")
    status = EventStatusField()
    processedAt = UtcDateTimeField(source="processed_at", allow_null=True)
    results = OutcomesField(help_text="Per matching rule (by source and type): the outcome.")
    error = serializers.CharField(help_text="Why evaluating failed (retried), else empty.")

    class Meta:
        model = ExternalEvent
        fields = ["id", "source", "type", "deliveryId", "receivedAt", "status", "processedAt", "results", "error"]  # fmt: skip
        read_only_fields = fields


class ExternalEventDetailSerializer(ExternalEventSerializer):
    payload = ObjectField(help_text="The event's JSON body, as received.")

    class Meta(ExternalEventSerializer.Meta):
        fields = [*ExternalEventSerializer.Meta.fields, "payload"]
        read_only_fields = fields


class DryRunResultSerializer(serializers.Serializer):
    rule = serializers.CharField()
    action = TriggerActionField()
    enabled = serializers.BooleanField(help_text="A disabled rule is never evaluated.")
    sourceMatches = serializers.BooleanField(
        help_text="The rule takes events from this source (or from any)."
    )
    typeMatches = serializers.BooleanField(help_text="The event type matches the rule's glob.")
    matched = serializers.BooleanField(help_text="Every condition held.")
    unmet = serializers.ListField(child=serializers.CharField())
    actions = ActionsField(help_text="What the rule would do; nothing was done.")
    error = serializers.CharField(allow_null=True)


def dry_run_body(rule: TriggerRule, outcome: dict[str, Any], **matches: bool) -> dict[str, Any]:
    """evaluate_rule's dry-run result, every key present."""
    return {
        "rule": rule.name,
        "action": rule.action,
        "enabled": rule.enabled,
        **matches,
        "matched": bool(outcome.get("matched")),
        "unmet": outcome.get("unmet", []),
        "actions": outcome.get("actions", []),
        "error": outcome.get("error"),
    }
