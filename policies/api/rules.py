"""The auto-approval rules API (admins): list, add, remove, promote a shadow rule, and
evaluate a key."""

from typing import Any

from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
)
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from core import limits
from core.actors import actor_for_request_user
from core.limits import MAX_PATTERN_LENGTH
from policies import autoapproval, shadow
from policies.api.schema import AUTO_APPROVE_AFTER_N_SCHEMA
from policies.api.serializers import AutoApprovalSerializer
from policies.models import AutoApprovalRule, RuleAction, RuleMode
from policies.validators import auto_approve_after_n_problem
from web.api.fields import (
    NoBody,
    StrictBody,
    StrictCharField,
    StrictIntegerField,
    UtcDateTimeField,
)
from web.api.permissions import AdminViewSet
from web.api.schema import NOT_BLANK
from web.api.views import error_responses, validated

# --- shapes ------------------------------------------------------------------------


class RuleSerializer(serializers.ModelSerializer):
    createdBy = serializers.CharField(source="created_by")
    createdAt = UtcDateTimeField(source="created_at")

    class Meta:
        model = AutoApprovalRule
        fields = ["id", "pattern", "action", "mode", "note", "createdBy", "createdAt"]
        read_only_fields = fields


class RuleListSerializer(serializers.Serializer):
    results = RuleSerializer(many=True)


_CONTAINS = "[Cc][Oo][Nn][Tt][Aa][Ii][Nn][Ss]"
_STRING = r"""('([^'\\]|\\['"\\])*'|"([^"\\]|\\['"\\])*")"""
_PREDICATE = (
    rf"([Tt][Aa][Gg][Ss]\s+{_CONTAINS}|[Ee][Xx][Pp][Ee][Rr][Tt](\s*=|\s+{_CONTAINS}))\s*{_STRING}"
)
# policies.patterns' grammar, for the schema (the parser is the judge).
RULE_PATTERN_REGEX = (
    rf"^\s*[A-Za-z0-9._*-]+(\(\s*{_PREDICATE}(\s*[Aa][Nn][Dd]\s+{_PREDICATE})*\s*\))?\s*$"
)


@extend_schema_field(
    {
        "type": "string",
        "minLength": 1,
        "maxLength": MAX_PATTERN_LENGTH,
        "pattern": RULE_PATTERN_REGEX,
    }
)
class RulePatternField(StrictCharField):
    pass


class RuleCreateSerializer(StrictBody):
    """Unknown keys are refused: a misspelt `action` must not mean auto-approve."""

    pattern = RulePatternField(
        # Untrimmed, so an error position counts from the first character sent.
        trim_whitespace=False,
        allow_blank=True,  # the parser reports "pattern is empty at position 0"
        max_length=MAX_PATTERN_LENGTH,  # as sent: surrounding spaces count too
        help_text="A key glob with `*`, optionally followed by predicates: "
        "`gate.*(tags contains 'prerequisites' AND expert = 'owner')`.",
    )
    action = serializers.ChoiceField(
        choices=RuleAction.choices, required=False, default=RuleAction.AUTO_APPROVE
    )
    mode = serializers.ChoiceField(
        choices=RuleMode.choices,
        required=False,
        default=RuleMode.LIVE,
        help_text="`live` (default) decides; `shadow` decides nothing and records the "
        "breakpoints it would have approved (auto-approve rules only) until promoted.",
    )
    note = StrictCharField(
        required=False, allow_blank=True, default="", max_length=limits.MAX_RULE_NOTE_LENGTH
    )


class EvaluateQuerySerializer(serializers.Serializer):
    key = StrictCharField(max_length=limits.MAX_KEY_LENGTH)
    tag = serializers.ListField(
        child=StrictCharField(max_length=limits.MAX_TAG_LENGTH), required=False
    )
    expert = serializers.ListField(
        child=StrictCharField(max_length=limits.MAX_EXPERT_NAME_LENGTH), required=False
    )
    autoApproveAfterN = StrictIntegerField(required=False)
    agentId = StrictCharField(required=False, max_length=limits.MAX_AGENT_ID_LENGTH)

    def validate_autoApproveAfterN(self, value: int) -> int:
        problem = auto_approve_after_n_problem(value)
        if problem:
            raise serializers.ValidationError(problem)
        return value


def _text(max_length: int) -> dict[str, Any]:
    """A string that is not blank once trimmed (as StrictCharField takes it)."""
    return {"type": "string", "minLength": 1, "maxLength": max_length, "pattern": NOT_BLANK}


EVALUATE_PARAMETERS = [
    OpenApiParameter(
        "key",
        _text(limits.MAX_KEY_LENGTH),
        required=True,
        description="The breakpoint key to evaluate.",
    ),
    OpenApiParameter(
        "tag",
        {"type": "array", "items": _text(limits.MAX_TAG_LENGTH)},
        explode=True,
        description="Repeatable.",
    ),
    OpenApiParameter(
        "expert",
        {"type": "array", "items": _text(limits.MAX_EXPERT_NAME_LENGTH)},
        explode=True,
        description="Repeatable; e.g. owner.",
    ),
    OpenApiParameter(
        "autoApproveAfterN",
        AUTO_APPROVE_AFTER_N_SCHEMA,
        description="The breakpoint's threshold of consecutive manual approvals (-1: none; "
        "0 is refused).",
    ),
    OpenApiParameter(
        "agentId",
        _text(limits.MAX_AGENT_ID_LENGTH),
        description="Count the consecutive approvals of this agent's breakpoints only, as its "
        "next breakpoint would; without it they are counted across all agents.",
    ),
]


# --- views -------------------------------------------------------------------------


class RuleViewSet(AdminViewSet):
    """Rules decide, at creation, whether a breakpoint is released without a human."""

    serializer_class = RuleSerializer
    lookup_value_regex = r"[^/\x00]+"  # NUL cannot reach a PostgreSQL text column

    def get_queryset(self):
        return autoapproval.rule_list_all()

    @extend_schema(
        summary="List auto-approval rules (admins)",
        description="Live and shadow rules, oldest first.",
        operation_id="rules_list",
        responses={200: RuleListSerializer, **error_responses(401, 403)},
    )
    def list(self, request: Request) -> Response:
        return Response(RuleListSerializer({"results": autoapproval.rule_list_all()}).data)

    @extend_schema(
        summary="Add an auto-approval rule (admins)",
        description="A malformed pattern is 400 with `details.position`, the 0-based "
        "index of the problem.",
        request=RuleCreateSerializer,
        responses={201: RuleSerializer, **error_responses(400, 401, 403)},
    )
    def create(self, request: Request) -> Response:
        data = validated(RuleCreateSerializer, request)
        rule = autoapproval.rule_create(
            actor=actor_for_request_user(request.user),
            pattern=data["pattern"],
            action=data["action"],
            note=data["note"],
            mode=data["mode"],
        )
        return Response(RuleSerializer(rule).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Get an auto-approval rule (admins)",
        responses={200: RuleSerializer, **error_responses(401, 403, 404)},
    )
    def retrieve(self, request: Request, pk: str) -> Response:
        return Response(RuleSerializer(autoapproval.rule_get(pk)).data)

    @extend_schema(
        summary="Remove an auto-approval rule (admins)",
        responses={
            204: OpenApiResponse(description="Removed."),
            **error_responses(400, 401, 403, 404),
        },
    )
    def destroy(self, request: Request, pk: str) -> Response:
        validated(NoBody, request)
        autoapproval.rule_remove(actor=actor_for_request_user(request.user), rule_id=pk)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        summary="Promote a shadow rule to live (admins)",
        description="From the next breakpoint on, the rule decides. Recorded as a "
        "`promoted` rule event (the console's Rule events). A rule that is already live is "
        "409 `conflict`: promotion happens, and is recorded, once.",
        request=NoBody,
        responses={200: RuleSerializer, **error_responses(400, 401, 403, 404, 409)},
    )
    @action(detail=True, methods=["post"])
    def promote(self, request: Request, pk: str) -> Response:
        validated(NoBody, request)
        rule = shadow.rule_promote(actor=actor_for_request_user(request.user), rule_id=pk)
        return Response(RuleSerializer(rule).data)

    @extend_schema(
        summary="Evaluate the rules for a key (admins)",
        description="What a breakpoint with this key, tags and experts would get as "
        "`autoApproval` if it were created now.",
        parameters=EVALUATE_PARAMETERS,
        responses={200: AutoApprovalSerializer, **error_responses(400, 401, 403)},
    )
    @action(detail=False, methods=["get"])
    def evaluate(self, request: Request) -> Response:
        params = request.query_params
        query: dict[str, Any] = {
            "key": params.get("key"),
            "tag": params.getlist("tag"),
            "expert": params.getlist("expert"),
        }
        if "autoApproveAfterN" in params:
            query["autoApproveAfterN"] = _int_or_raw(params["autoApproveAfterN"])
        if "agentId" in params:
            query["agentId"] = params["agentId"]
        serializer = EvaluateQuerySerializer(data=query)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        verdict = autoapproval.evaluate(
            key=data["key"],
            tags=data.get("tag", []),
            experts=data.get("expert", []),
            auto_approve_after_n=data.get("autoApproveAfterN", limits.NO_AUTO_APPROVE_THRESHOLD),
            agent_id=data.get("agentId"),
        )
        return Response(AutoApprovalSerializer(verdict.as_dict()).data)


def _int_or_raw(value: str) -> int | str:
    try:
        return int(value)
    except ValueError:
        return value
