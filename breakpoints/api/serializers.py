"""API input and output shapes (camelCase, as in the contract)."""

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from audit.models import Event
from breakpoints.api.payload_schema import PAYLOAD_SCHEMA, text_schema
from breakpoints.models import Breakpoint, DecisionBasis, Feedback
from breakpoints.representation import contract
from core import limits
from core.choices import Status, Strategy
from grants.api.serializers import GrantInputField, GrantSerializer
from policies.api.serializers import AutoApprovalSerializer
from web.api.fields import (
    JSONObjectField,
    RespondedByField,
    StrictBody,
    StrictBooleanField,
    StrictCharField,
    StrictIntegerField,
    TagListField,
    UtcDateTimeField,
)
from web.api.schema import NOT_BLANK
from web.api.serializers import ErrorBodySerializer

# --- documentation-only shapes ------------------------------------------------


@extend_schema_field({"type": "object", "additionalProperties": True})
class AnswerField(serializers.JSONField):
    """An answer to a breakpoint's form: an object of values (breakpoints.payload.form_schema)."""


class ResponseVoteSerializer(serializers.Serializer):
    respondedBy = serializers.CharField()
    approved = serializers.BooleanField()
    feedback = serializers.CharField(required=False)
    option = serializers.CharField(required=False)
    respondedAt = UtcDateTimeField()
    seat = serializers.CharField(
        required=False, help_text="The expert (payload.expert) this response answered for."
    )
    values = AnswerField(
        required=False,
        help_text="An approving response's answer to payload.form (the proposal as it is "
        "when the reviewer sent none).",
    )


class ApproverSerializer(serializers.Serializer):
    """One approving seat of a collect-all or quorum decision, and who answered for it."""

    seat = serializers.CharField(help_text="The expert (payload.expert) that approved.")
    respondedBy = serializers.CharField(help_text="Who answered for that seat.")


class TimeoutPolicySerializer(serializers.Serializer):
    """What payload.onTimeout asked for at the TTL, and what was done."""

    requested = serializers.ChoiceField(choices=["approve", "reject"])
    applied = serializers.ChoiceField(choices=["approve", "reject", "expire"])
    reason = serializers.CharField(
        required=False, help_text="Why approve was not applied (a rule forbids it)."
    )


class BreakpointResultSerializer(serializers.Serializer):
    """babysitter's BreakpointResult; present once the breakpoint is no longer waiting."""

    approved = serializers.BooleanField()
    response = serializers.CharField(required=False)
    feedback = serializers.CharField(required=False)
    option = serializers.CharField(required=False)
    respondedBy = RespondedByField(required=False)
    allResponses = ResponseVoteSerializer(many=True, required=False)
    approvers = ApproverSerializer(
        many=True,
        required=False,
        help_text="collect-all and quorum: each seat that approved and who answered for it, "
        "in the order they voted (a person fills one seat). The receipt signs them too.",
    )
    timeoutPolicy = TimeoutPolicySerializer(
        required=False, help_text="Present when payload.onTimeout decided at the TTL."
    )
    values = AnswerField(
        required=False,
        allow_null=True,
        help_text="The approved answer to payload.form / payload.proposal: the reviewer's "
        "values, or the proposal as it is (an approval without values, an automatic "
        "approval). For collect-all and quorum, the values every approving vote approved "
        "(an approving vote with other values is refused). Null when rejected, expired or "
        "cancelled, or without a form.",
    )
    edited = serializers.BooleanField(
        required=False,
        help_text="True when `values` differ from payload.proposal (compared as JSON).",
    )
    payloadDigest = serializers.CharField(
        required=False,
        allow_null=True,
        help_text="The breakpoint's payloadDigest: what this decision was made on (null for "
        "breakpoints created before digests).",
    )
    valuesDigest = serializers.CharField(
        required=False,
        allow_null=True,
        help_text='"sha256:" + the hex SHA-256 of the RFC 8785 canonical JSON of `values` '
        "(as payloadDigest is computed); null when there are none.",
    )
    receipt = serializers.CharField(
        required=False,
        help_text="The service's signed statement of this decision: a compact JWS (EdDSA, "
        "Ed25519; header typ bpm-receipt+jws) whose claims are breakpointId, agentId, runId, "
        "status, approved, option, respondedBy, via, decidedAt, payloadDigest and "
        "valuesDigest, approvers on a collect-all or quorum decision, and grantId and "
        "grantedBy on a grant's approval (via grant). Verify it with the keys of "
        "GET /.well-known/jwks.json.",
    )


class ExpertSerializer(serializers.Serializer):
    """One seat of a routed breakpoint (one name of payload.expert)."""

    name = serializers.CharField()
    resolved = serializers.BooleanField(
        help_text="False when the name matches no group with members, no user and (for "
        "owner) no configured project owner: only admins can answer for it."
    )
    kind = serializers.ChoiceField(
        choices=["group", "user", "owner"],
        allow_null=True,
        help_text="What the name resolved to; null when unresolved.",
    )


@extend_schema_field(BreakpointResultSerializer(allow_null=True))
class ResultField(serializers.JSONField):
    pass


class ExpectedDecisionSerializer(serializers.Serializer):
    """How long people took to decide breakpoints like this one (docs/waiting.md)."""

    p50Seconds = serializers.IntegerField(
        min_value=0, help_text="Half the decisions came within this many seconds (median)."
    )
    p90Seconds = serializers.IntegerField(
        min_value=0, help_text="Nine decisions in ten came within this many seconds."
    )
    samples = serializers.IntegerField(
        min_value=20, help_text="How many human decisions these figures come from."
    )
    basis = serializers.ChoiceField(
        choices=DecisionBasis.choices,
        help_text="Which decisions: those of the same key, else of the same expert seats, "
        "else all of them.",
    )


EXPECTED_DECISION_HELP = (
    "While waiting: how long a person usually takes to decide it, from the human decisions "
    "of the last 90 days (the same key, else the same expert seats, else all; refreshed "
    "every few minutes). Null once it is decided, and while fewer than 20 decisions back it."
)


@extend_schema_field(ExpectedDecisionSerializer(allow_null=True))
class ExpectedDecisionField(serializers.JSONField):
    pass


@extend_schema_field(AutoApprovalSerializer(allow_null=True))
class AutoApprovalField(serializers.JSONField):
    pass


@extend_schema_field(ResponseVoteSerializer(many=True))
class VotesField(serializers.JSONField):
    pass


@extend_schema_field(ExpertSerializer(many=True))
class ExpertsField(serializers.ListField):
    """A breakpoint's seats, resolved (contract.experts_json; a list view's `seats`
    in the serializer's context save the queries)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(read_only=True, **kwargs)

    def to_representation(self, data: list[str]) -> list[dict[str, Any]]:
        return contract.experts_json(data, self.context.get("seats"))


@extend_schema_field(OpenApiTypes.URI)
class ConsoleUrlField(serializers.CharField):
    """A breakpoint's page in the reviewer console, from its id (contract.console_url)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(source="pk", read_only=True, **kwargs)

    def to_representation(self, value: str) -> str:
        return contract.console_url(value)


# --- output --------------------------------------------------------------------


class FeedbackSerializer(serializers.ModelSerializer):
    id = serializers.CharField(read_only=True)
    createdAt = UtcDateTimeField(source="created_at", read_only=True)

    class Meta:
        model = Feedback
        fields = ["id", "author", "comment", "createdAt"]

    def to_representation(self, instance: Feedback) -> dict:
        return contract.feedback_json(instance)


class BreakpointSerializer(serializers.ModelSerializer):
    breakpointId = serializers.CharField(source="id", read_only=True)
    agentId = serializers.CharField(source="agent_id")
    runId = serializers.CharField(source="run_id", allow_null=True)
    payload = JSONObjectField()
    tags = TagListField()
    ttlSeconds = serializers.IntegerField(source="ttl_seconds", allow_null=True)
    expiresAt = UtcDateTimeField(source="expires_at", allow_null=True)
    createdAt = UtcDateTimeField(source="created_at")
    updatedAt = UtcDateTimeField(source="updated_at")
    releasedAt = UtcDateTimeField(source="released_at", allow_null=True)
    expiredAt = UtcDateTimeField(source="expired_at", allow_null=True)
    cancelledAt = UtcDateTimeField(source="cancelled_at", allow_null=True)
    feedback = FeedbackSerializer(many=True, read_only=True)
    result = ResultField(allow_null=True)
    autoApproval = AutoApprovalField(source="auto_approval", allow_null=True)
    strategy = serializers.ChoiceField(choices=Strategy.choices)
    experts = ExpertsField(
        help_text="The seats (payload.expert names) it is routed to; empty when unrouted."
    )
    votes = VotesField(
        help_text="The responses so far, one per seat (collect-all and quorum fill it while "
        "waiting); the deciding response for other strategies."
    )
    requestedBy = serializers.CharField(
        source="requested_by",
        allow_null=True,
        help_text="Who it is on behalf of, by username: the agent token's owner when it has "
        "one, else the known person the create body named. With preventSelfReview that "
        "person cannot decide it and no automatic approval applies.",
    )
    payloadDigest = serializers.CharField(
        source="payload_digest",
        allow_null=True,
        help_text='"sha256:" + the hex SHA-256 of the RFC 8785 canonical JSON of {"question", '
        '"title", "payload"} as stored, computed at creation (the payload never changes). '
        "Null for breakpoints finished before digests existed.",
    )
    consoleUrl = ConsoleUrlField(
        help_text="The breakpoint's page in the reviewer console (absolute, from "
        "BPM_PUBLIC_URL): where a person answers it. Every channel's message links to it.",
    )
    expectedDecision = ExpectedDecisionField(allow_null=True, help_text=EXPECTED_DECISION_HELP)

    warnings = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        help_text="In the create answer only (201, and a replay's 200): the payload's keys "
        "that look like misspelt known ones, e.g. 'payload.questoin: did you mean "
        "question?'. The payload is stored as sent; empty when nothing looks misspelt.",
    )

    class Meta:
        model = Breakpoint
        # The representation's fields (one list, breakpoints.representation.contract.FIELDS), and
        # the create answer's warnings.
        fields = [*contract.FIELDS, "warnings"]
        read_only_fields = fields

    def to_representation(self, instance: Breakpoint) -> dict:
        """breakpoints.representation.contract writes it (webhooks send the same); the fields
        above document it. A list view passes `seats` (routing.resolve of the page)."""
        return contract.breakpoint_json(instance, seats=self.context.get("seats"))


POLL_AFTER_HELP = (
    "A hint: milliseconds to wait before polling again without `wait` (grows with the "
    "server's load); null once the status is final."
)


class StatusSerializer(serializers.Serializer):
    """Documentation of the status answer (built by breakpoints.waiting.bodies)."""

    status = serializers.ChoiceField(choices=Status.choices)
    updatedAt = UtcDateTimeField(source="updated_at")
    result = ResultField(allow_null=True)
    pollAfterMs = serializers.IntegerField(allow_null=True, help_text=POLL_AFTER_HELP)
    expectedDecision = ExpectedDecisionField(allow_null=True, help_text=EXPECTED_DECISION_HELP)


class NotVisibleSerializer(serializers.Serializer):
    code = serializers.ChoiceField(choices=["not_found"])
    message = serializers.CharField()


class ManyStatusEntrySerializer(serializers.Serializer):
    """One asked-for breakpoint: its status, or `error` (not_found) when not visible."""

    breakpointId = serializers.CharField()
    status = serializers.ChoiceField(choices=Status.choices, required=False)
    updatedAt = UtcDateTimeField(required=False)
    result = ResultField(allow_null=True, required=False)
    pollAfterMs = serializers.IntegerField(
        allow_null=True, required=False, help_text=POLL_AFTER_HELP
    )
    expectedDecision = ExpectedDecisionField(
        allow_null=True, required=False, help_text=EXPECTED_DECISION_HELP
    )
    error = NotVisibleSerializer(required=False)


class ManyStatusSerializer(serializers.Serializer):
    results = ManyStatusEntrySerializer(many=True)


class StatusOnlySerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=Status.choices)


class EventSerializer(serializers.ModelSerializer):
    id = serializers.CharField(read_only=True)
    timestamp = UtcDateTimeField(read_only=True)

    class Meta:
        model = Event
        fields = ["id", "type", "actor", "timestamp", "metadata"]
        read_only_fields = fields


class EventListSerializer(serializers.Serializer):
    results = EventSerializer(many=True)


class FeedbackCreatedSerializer(serializers.Serializer):
    feedback = FeedbackSerializer()
    status = serializers.ChoiceField(choices=Status.choices)
    result = ResultField(allow_null=True)
    grant = GrantSerializer(
        required=False, help_text="The grant the approval gave, when it asked for one."
    )


# --- input ---------------------------------------------------------------------


@extend_schema_field(PAYLOAD_SCHEMA)
class PayloadField(JSONObjectField):
    pass


@extend_schema_field(
    {
        "type": "array",
        "maxItems": limits.MAX_TAGS,
        "items": text_schema(limits.MAX_TAG_LENGTH),
    }
)
class TagInputField(TagListField):
    pass


@extend_schema_field({"type": "object", "additionalProperties": True, "nullable": True})
class ValuesInputField(JSONObjectField):
    pass


class BreakpointCreateSerializer(StrictBody):
    """Unknown top-level keys are refused (a misspelt ttlSeconds must not mean "never
    expires"); the payload stays free-form."""

    agentId = StrictCharField(required=False, max_length=limits.MAX_AGENT_ID_LENGTH)
    runId = StrictCharField(required=False, allow_null=True, max_length=limits.MAX_RUN_ID_LENGTH)
    title = StrictCharField(
        required=False, allow_null=True, allow_blank=True, max_length=limits.MAX_TITLE_LENGTH
    )
    payload = PayloadField()
    tags = TagInputField(required=False, allow_null=True)
    ttlSeconds = StrictIntegerField(
        required=False,
        allow_null=True,
        min_value=limits.MIN_TTL_SECONDS,
        max_value=limits.MAX_TTL_SECONDS,
    )
    requestedBy = StrictCharField(
        required=False,
        allow_null=True,
        max_length=limits.MAX_REQUESTED_BY_LENGTH,
        help_text="Who it is on behalf of (a username or email). A token with an owner: "
        "omitted, null or naming the owner means the owner; anyone else is a 403. A token "
        "without one: a known person (stored by username), an unknown name is a 400; "
        "under four eyes (preventSelfReview) it must name someone: omitted is a 400.",
    )


class FeedbackCreateSerializer(StrictBody):
    """Unknown keys are refused: a misspelt `approved` must not approve by default."""

    comment = StrictCharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=limits.MAX_COMMENT_LENGTH,
        help_text="Required, not blank, unless release is true (else 400).",
    )
    release = StrictBooleanField(
        required=False,
        default=False,
        help_text="true decides the breakpoint (see approved); false adds a comment only.",
    )
    # Left out it is None: the chosen option's verdict decides, else true (approve).
    approved = StrictBooleanField(
        required=False,
        default=None,
        help_text="With release: true approves (the default), false rejects. Left out, a "
        "chosen option that carries a verdict ({label, approved}) decides; sent, it must "
        "agree with that verdict (else 400).",
    )
    option = StrictCharField(
        required=False,
        allow_null=True,
        default=None,
        max_length=limits.MAX_RELEASE_OPTION_LENGTH,
        help_text="The label of one of payload.options (any text when there are none); "
        "result.option. An option object's `approved` is the release's verdict.",
    )
    values = ValuesInputField(
        required=False,
        allow_null=True,
        default=None,
        help_text="With an approving release of a breakpoint that has payload.form or "
        "payload.proposal: the answer, validated against the form (400 with one entry per "
        "problem in details, keyed by the field's JSON pointer, e.g. /replicas). Left out, "
        "the proposal is approved as it is (a 400 when the form has required fields and "
        "there is no proposal). Refused with a rejection, a comment, or no form.",
    )
    grant = GrantInputField(required=False, allow_null=True, default=None)


class StatusQuerySerializer(serializers.Serializer):
    """Documentation of ?wait= (validated by breakpoints.waiting.query)."""

    wait = serializers.IntegerField(
        required=False,
        min_value=0,
        max_value=60,
        help_text="Seconds (0-60) to hold the answer while the breakpoint is waiting.",
    )


@extend_schema_field(
    {
        "type": "array",
        "items": {"type": "string", "minLength": 1, "pattern": NOT_BLANK},
        "minItems": 1,
        "maxItems": 100,
        "uniqueItems": True,
    }
)
class IdListField(serializers.ListField):
    pass


class ManyStatusQuerySerializer(StatusQuerySerializer):
    id = IdListField(
        child=serializers.CharField(),
        min_length=1,
        max_length=100,
        help_text="A breakpoint id; repeat for each (1-100, no repeats).",
    )


class CancelSerializer(StrictBody):
    reason = StrictCharField(
        required=False, allow_blank=True, default="", max_length=limits.MAX_REASON_LENGTH
    )


# --- decisions in batches, and the queue's groups ------------------------------------------


class DecisionItemSerializer(StrictBody):
    """One decision of a batch: a single decision's fields (release is implied), and the
    breakpoint it decides. Unknown keys are refused, as in a single decision."""

    breakpointId = StrictCharField(help_text="The breakpoint to decide.")
    approved = StrictBooleanField(
        help_text="true approves, false rejects (a chosen option's verdict must agree)."
    )
    comment = StrictCharField(
        required=False, allow_blank=True, default="", max_length=limits.MAX_COMMENT_LENGTH
    )
    option = StrictCharField(
        required=False,
        allow_null=True,
        default=None,
        max_length=limits.MAX_RELEASE_OPTION_LENGTH,
        help_text="The label of one of payload.options (any text when there are none).",
    )
    values = ValuesInputField(
        required=False,
        allow_null=True,
        default=None,
        help_text="With an approval of a breakpoint that has payload.form or "
        "payload.proposal: the answer (else the proposal is approved as it is).",
    )

    def validate_values(self, value: Any) -> Any:
        # A wrong type is the body's problem (400, nothing decided), as the schema says;
        # an object that does not answer the form is the item's (its own 400).
        if value is not None and not isinstance(value, dict):
            raise serializers.ValidationError("Must be an object.")
        return value


class DecisionsBatchSerializer(StrictBody):
    """Decisions in a batch: each item decided on its own, in order."""

    items: serializers.ListSerializer = serializers.ListSerializer(
        child=DecisionItemSerializer(),
        min_length=1,
        max_length=limits.MAX_BATCH_DECISIONS,
        help_text=f"1 to {limits.MAX_BATCH_DECISIONS} decisions, decided in this order.",
    )


# An item's status in a batch's answer: the HTTP status its single decision would have had.
DECISION_STATUSES = [(code, str(code)) for code in (201, 400, 403, 404, 409)]


class DecidedBreakpointSerializer(serializers.Serializer):
    id = serializers.CharField()
    status = serializers.ChoiceField(choices=Status.choices)


class DecisionOutcomeSerializer(serializers.Serializer):
    """What became of one item: 201 and the breakpoint as decided (still waiting when the
    decision was one seat's vote), or the status and error a single decision would answer."""

    breakpointId = serializers.CharField()
    status = serializers.ChoiceField(
        choices=DECISION_STATUSES,
        help_text="201 decided (or the vote recorded); else the single decision's status.",
    )
    error = ErrorBodySerializer(required=False)
    breakpoint = DecidedBreakpointSerializer(required=False)


class DecisionOutcomesSerializer(serializers.Serializer):
    results = DecisionOutcomeSerializer(many=True)


class BreakpointGroupSerializer(serializers.Serializer):
    key = serializers.CharField()
    runId = serializers.CharField(allow_null=True)
    count = serializers.IntegerField()
    oldestCreatedAt = UtcDateTimeField()


class BreakpointGroupsSerializer(serializers.Serializer):
    results = BreakpointGroupSerializer(many=True)


class GroupsQuerySerializer(serializers.Serializer):
    """Documentation of the groups' query (validated by the view)."""

    status = serializers.ChoiceField(
        choices=[Status.WAITING],
        required=False,
        help_text="Only waiting breakpoints are grouped (the default).",
    )
