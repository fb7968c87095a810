"""The auto-approval rules API (admins): list, add, remove, promote a shadow rule, evaluate
a key, and replay a rule over the history (simulate)."""

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
from policies import autoapproval, replay, shadow
from policies.api.schema import AUTO_APPROVE_AFTER_N_SCHEMA
from policies.api.serializers import AutoApprovalSerializer
from policies.models import AutoApprovalRule, RuleAction, RuleMode
from policies.validators import auto_approve_after_n_problem
from web.api.fields import (
    NoBody,
    RespondedByField,
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


class RuleSimulateSerializer(StrictBody):
    """A rule's body as POST /api/rules takes it, or autoApproveAfterN with a key and n."""

    action = serializers.ChoiceField(
        choices=list(replay.ACTIONS),
        required=False,
        default=RuleAction.AUTO_APPROVE,
        help_text=f"A rule's action, or `{replay.AFTER_N}` (with `key` and `n`).",
    )
    pattern = RulePatternField(
        required=False,
        trim_whitespace=False,  # an error's position counts from the first character sent
        max_length=MAX_PATTERN_LENGTH,
        help_text="The rule's pattern (required unless the action is autoApproveAfterN).",
    )
    key = StrictCharField(
        required=False,
        max_length=limits.MAX_KEY_LENGTH,
        help_text="autoApproveAfterN only: the breakpoint key it applies to.",
    )
    n = StrictIntegerField(
        required=False,
        min_value=limits.MIN_AUTO_APPROVE_AFTER_N,
        max_value=limits.MAX_AUTO_APPROVE_AFTER_N,
        help_text="autoApproveAfterN only: the consecutive manual approvals it needs.",
    )
    since = StrictCharField(
        required=False,
        max_length=40,
        help_text="The window's start: an ISO 8601 time (UTC when it names no offset) or a "
        f"duration back from now such as `90d`, `12h`, `30m`, `2w`. Default "
        f"`{replay.DEFAULT_SINCE}`; at most {replay.MAX_SINCE_DAYS} days back.",
    )


class ReplayedRuleSerializer(serializers.Serializer):
    action = serializers.CharField()
    pattern = serializers.CharField(required=False, help_text="Canonical form.")
    key = serializers.CharField(required=False)
    n = serializers.IntegerField(required=False)


class RejectedButWouldApproveSerializer(serializers.Serializer):
    breakpointId = serializers.CharField()
    key = serializers.CharField()
    respondedBy = RespondedByField()
    feedback = serializers.CharField(allow_null=True)
    decidedAt = UtcDateTimeField(allow_null=True)


class RuleReplaySerializer(serializers.Serializer):
    """docs/routing-and-auto-approval.md, "Replaying a rule", defines each figure."""

    rule = ReplayedRuleSerializer()
    since = UtcDateTimeField(help_text="The window's start: breakpoints created since.")
    considered = serializers.IntegerField(
        help_text="Finished breakpoints (released, expired, cancelled) created in the window."
    )
    matched = serializers.IntegerField(
        help_text="Of those, the ones the rule applies to: its pattern matches (or, for "
        "autoApproveAfterN, they have its key)."
    )
    wouldAutoApprove = serializers.IntegerField(
        help_text="Of the matched, the ones the rules that exist now, with this one added, "
        "would have approved without a person (production precedence: four eyes, a form "
        "to fill in, never-auto-approve rules and always-break-on tags win)."
    )
    agreedWithHumans = serializers.IntegerField(
        help_text="Of wouldAutoApprove, the ones a person approved."
    )
    humanApproved = serializers.IntegerField(
        help_text="Of the matched, the ones a person approved (not a rule at creation, not "
        "a timeout policy; expiries and cancellations are nobody's decision)."
    )
    humanRejected = serializers.IntegerField(
        help_text="Of the matched, the ones a person rejected."
    )
    rejectedButWouldApprove = RejectedButWouldApproveSerializer(
        many=True,
        help_text=f"Of wouldAutoApprove, the ones a person rejected: newest first, at most "
        f"{replay.LIST_CAP}.",
    )
    rejectedButWouldApproveCount = serializers.IntegerField(
        help_text="How many there are in all (the list is capped)."
    )
    grantApproved = serializers.IntegerField(
        help_text="Of the matched, the ones a reviewer's grant approved (no person decided "
        "them, so neither humanApproved nor humanRejected counts them)."
    )


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

    @extend_schema(
        summary="Replay a rule over the decisions already made (admins)",
        operation_id="rules_simulate",
        description="What the rule would have done over the finished breakpoints created "
        "since `since`, evaluated with the rules that exist now by the production "
        "precedence: a never-auto-approve rule that would win is honoured. Nothing is "
        "saved. Bad input is 400 naming the field.",
        request=RuleSimulateSerializer,
        responses={
            200: RuleReplaySerializer,
            **error_responses(
                400,
                401,
                403,
                invalid="the action is a rule's and there is no pattern, or a key or n; or "
                "it is autoApproveAfterN and there is a pattern, or no key or n; or since "
                "does not parse, is in the future or more than 3660 days back",
            ),
        },
    )
    @action(detail=False, methods=["post"])
    def simulate(self, request: Request) -> Response:
        data = validated(RuleSimulateSerializer, request)
        answer = replay.rule_simulate(
            actor=actor_for_request_user(request.user),
            action=data["action"],
            pattern=data.get("pattern"),
            key=data.get("key"),
            n=data.get("n"),
            since=data.get("since"),
        )
        return Response(RuleReplaySerializer(answer.as_dict()).data)


def _int_or_raw(value: str) -> int | str:
    try:
        return int(value)
    except ValueError:
        return value
