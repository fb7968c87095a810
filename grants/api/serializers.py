"""The grant's JSON: the API's representation, and the body a feedback's `grant` takes."""

from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from grants.models import Grant, GrantScope, GrantStatus
from grants.services import MAX_TEXT, MAX_USES, MAX_VALUE_FIELDS
from web.api.fields import JSONObjectField, UtcDateTimeField

CONSTRAINT_SCHEMA: dict[str, Any] = {
    "oneOf": [
        {
            "type": "object",
            "properties": {"prefix": {"type": "string", "minLength": 1, "maxLength": MAX_TEXT}},
            "required": ["prefix"],
            "additionalProperties": False,
        },
        {
            "type": "object",
            "properties": {
                "equals": {
                    "oneOf": [
                        {"type": "string", "maxLength": MAX_TEXT},
                        {"type": "number"},
                        {"type": "boolean"},
                    ],
                    "nullable": True,
                }
            },
            "required": ["equals"],
            "additionalProperties": False,
        },
    ]
}
VALUES_SCHEMA: dict[str, Any] = {
    "type": "object",
    "maxProperties": MAX_VALUE_FIELDS,
    "additionalProperties": CONSTRAINT_SCHEMA,
    "description": "Constraints on the later breakpoints' proposal values (payload.proposal, "
    "e.g. an MCP tool call's arguments), one per field: {prefix: text} (a string starting "
    "with it, never one with a `..` segment) or {equals: a JSON scalar}. A field missing "
    "from a later proposal is outside; {} for none.",
}


@extend_schema_field(
    {
        "type": "object",
        "properties": {
            "scope": {"type": "string", "enum": list(GrantScope.values)},
            "uses": {"type": "integer", "minimum": 1, "maximum": MAX_USES},
            "expiresInSeconds": {
                "type": "integer",
                "minimum": 1,
                "maximum": settings.BPM_GRANT_MAX_SECONDS,
            },
            "values": VALUES_SCHEMA,
        },
        "required": ["scope"],
        "additionalProperties": False,
        "nullable": True,
        "description": "With an approving release: also approve the same agent's next "
        "breakpoints of this key (scope key), or of this key and runId (scope run), for "
        "`uses` of them or `expiresInSeconds` (at least one of the two; at most "
        "BPM_GRANT_MAX_SECONDS), within `values`. Refused (400; 403 under four eyes), the "
        "decision with it, when the release does not approve, the breakpoint is a voting "
        "one, under four eyes, has no key of its own or presentAlwaysApprove false, or "
        "(scope run) no runId.",
    }
)
class GrantInputField(JSONObjectField):
    """A feedback's `grant` (checked by grants.services.grant_spec)."""


@extend_schema_field(VALUES_SCHEMA)
class ValuesField(JSONObjectField):
    pass


class GrantSerializer(serializers.ModelSerializer):
    agentId = serializers.CharField(source="agent_id")
    runId = serializers.CharField(source="run_id", allow_null=True)
    values = ValuesField()
    uses = serializers.IntegerField(
        source="uses_granted", allow_null=True, help_text="null: unlimited until expiresAt."
    )
    usesLeft = serializers.IntegerField(source="uses_left", allow_null=True)
    expiresAt = UtcDateTimeField(
        source="expires_at", allow_null=True, help_text="null: until its uses run out."
    )
    createdAt = UtcDateTimeField(source="created_at")
    grantedBy = serializers.CharField(source="granted_by")
    breakpointId = serializers.CharField(
        source="breakpoint_id", help_text="The breakpoint whose approval gave it."
    )
    status = serializers.ChoiceField(
        choices=GrantStatus.choices,
        help_text="live: it applies; revoked; used: no use left; expired: past expiresAt.",
    )
    revokedAt = UtcDateTimeField(source="revoked_at", allow_null=True)
    revokedBy = serializers.CharField(source="revoked_by", allow_null=True)

    class Meta:
        model = Grant
        fields = [
            "id",
            "scope",
            "agentId",
            "runId",
            "key",
            "values",
            "uses",
            "usesLeft",
            "expiresAt",
            "createdAt",
            "grantedBy",
            "breakpointId",
            "status",
            "revokedAt",
            "revokedBy",
        ]
        read_only_fields = fields

    def to_representation(self, instance: Grant) -> dict[str, Any]:
        data = super().to_representation(instance)
        data["revokedBy"] = instance.revoked_by or None
        return data
