"""Typed views of the API's answers (dataclasses), decoded from its camelCase JSON.

Attribute names are the wire names in snake_case (`breakpointId` -> `breakpoint_id`). A field
without a default is one the server always sends; `X | None` is one it may send as null.
`tests/clients/test_models_schema.py` holds these shapes against the server's OpenAPI
schema, so the SDK cannot drift from the API.

Decoding is lenient by default (unknown keys go to `extra`, so a newer server does not break
an older client); `strict=True` refuses unknown and missing keys and wrong types.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from datetime import datetime
from typing import Any, ClassVar, Literal, TypeVar, Union

from .errors import DecodeError

StatusName = Literal["waiting", "released", "expired", "cancelled"]
Strategy = Literal["single", "first-response-wins", "collect-all", "quorum"]
EventType = Literal[
    "created",
    "feedback",
    "released",
    "expired",
    "cancelled",
    "auto_approved",
    "auto_approval.shadow",
    "escalated",
    "reminder",
    "refused",
    "notification",
]
FINAL_STATUSES: frozenset[str] = frozenset({"released", "expired", "cancelled"})

M = TypeVar("M", bound="Model")


def wire_name(attribute: str) -> str:
    """`breakpoint_id` -> `breakpointId`."""
    head, *rest = attribute.split("_")
    return head + "".join(part.title() for part in rest)


class Model:
    """Base of every model: decoding from the API's JSON."""

    # Attributes the client adds that the server does not send (left out of decoding).
    CLIENT_FIELDS: ClassVar[frozenset[str]] = frozenset({"extra"})

    @classmethod
    def wire_fields(cls) -> dict[str, dataclasses.Field[Any]]:
        return {
            wire_name(f.name): f
            for f in dataclasses.fields(cls)  # type: ignore[arg-type]
            if f.name not in cls.CLIENT_FIELDS
        }

    @classmethod
    def from_json(cls: type[M], data: Any, *, strict: bool = False, at: str = "") -> M:
        if not isinstance(data, dict):
            raise DecodeError(
                f"{at or cls.__name__}: expected an object, got {type(data).__name__}"
            )
        hints = typing.get_type_hints(cls)
        values: dict[str, Any] = {}
        for key, field in cls.wire_fields().items():
            required = (
                field.default is dataclasses.MISSING
                and field.default_factory is dataclasses.MISSING
            )
            if key not in data:
                if required and strict:
                    raise DecodeError(f"{at}{key}: missing")
                if required:
                    values[field.name] = None
                continue
            values[field.name] = _decode(hints[field.name], data[key], strict, f"{at}{key}")
        unknown = {k: v for k, v in data.items() if k not in cls.wire_fields()}
        if unknown and strict:
            raise DecodeError(f"{at or cls.__name__}: unknown keys {sorted(unknown)}")
        instance = cls(**values)
        if "extra" in {f.name for f in dataclasses.fields(cls)}:  # type: ignore[arg-type]
            instance.extra = unknown  # type: ignore[attr-defined]
        return instance

    def to_json(self) -> dict[str, Any]:
        """Back to the API's camelCase JSON (unknown keys kept as received)."""
        data = {key: to_wire(getattr(self, f.name)) for key, f in self.wire_fields().items()}
        data.update(getattr(self, "extra", None) or {})
        return data


def to_wire(value: Any) -> Any:
    """A model, or anything holding models and datetimes, as JSON-ready data (times as
    the API writes them)."""
    if isinstance(value, Model):
        return value.to_json()
    if isinstance(value, datetime):
        text = value.isoformat()  # UTC as the API writes it: `Z`, not `+00:00`
        return text.removesuffix("+00:00") + "Z" if text.endswith("+00:00") else text
    if isinstance(value, list | tuple):
        return [to_wire(item) for item in value]
    if isinstance(value, dict):
        return {key: to_wire(item) for key, item in value.items()}
    return value


def _decode(hint: Any, value: Any, strict: bool, at: str) -> Any:
    """Convert one JSON value to `hint`; in strict mode refuse what does not fit."""
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        options = typing.get_args(hint)
        if value is None and type(None) in options:
            return None
        errors = []
        for option in (o for o in options if o is not type(None)):
            try:
                return _decode(option, value, True, at)
            except DecodeError as error:
                errors.append(str(error))
        if strict:
            raise DecodeError("; ".join(errors))
        return value
    if origin is list:
        if not isinstance(value, list):
            return _mismatch(hint, value, strict, at)
        (item,) = typing.get_args(hint)
        return [_decode(item, v, strict, f"{at}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        return value if isinstance(value, dict) else _mismatch(hint, value, strict, at)
    if origin is Literal:
        return value if value in typing.get_args(hint) else _mismatch(hint, value, strict, at)
    if isinstance(hint, type) and issubclass(hint, Model):
        return hint.from_json(value, strict=strict, at=f"{at}.")
    if hint is datetime:
        return _datetime(value, strict, at)
    if hint is Any:
        return value
    if hint is int and isinstance(value, bool):
        return _mismatch(hint, value, strict, at)
    if isinstance(hint, type) and isinstance(value, hint):
        return value
    return _mismatch(hint, value, strict, at)


def _datetime(value: Any, strict: bool, at: str) -> Any:
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return _mismatch(datetime, value, strict, at)


def _mismatch(hint: Any, value: Any, strict: bool, at: str) -> Any:
    if strict:
        raise DecodeError(f"{at}: {value!r} is not {hint}")
    return value


@dataclasses.dataclass
class ResponseVote(Model):
    """One response: a reviewer's (or a rule's) decision for a seat."""

    responded_by: str
    approved: bool
    responded_at: datetime
    feedback: str | None = None
    option: str | None = None
    seat: str | None = None
    # An approving response's answer to the breakpoint's form.
    values: dict[str, Any] | None = None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False)


@dataclasses.dataclass
class Approver(Model):
    """One approving seat of a collect-all or quorum decision, and who answered for it."""

    seat: str
    responded_by: str
    extra: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False)


@dataclasses.dataclass
class TimeoutPolicy(Model):
    """What payload.onTimeout asked for when the TTL passed, and what was applied."""

    requested: Literal["approve", "reject"]
    applied: Literal["approve", "reject", "expire"]
    reason: str | None = None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False)


@dataclasses.dataclass
class BreakpointResult(Model):
    """babysitter's BreakpointResult: what a decided breakpoint answered.

    `status` and `breakpoint_id` are the client's additions (from the status around it):
    `approved` is false for a rejection, an expiry and a cancellation alike.
    """

    CLIENT_FIELDS: ClassVar[frozenset[str]] = frozenset(
        {"extra", "status", "breakpoint_id", "verified"}
    )

    approved: bool
    response: str | None = None
    feedback: str | None = None
    option: str | None = None
    responded_by: str | list[str] | None = None
    all_responses: list[ResponseVote] = dataclasses.field(default_factory=list)
    # collect-all, quorum: each approving seat and who answered for it (the receipt too).
    approvers: list[Approver] | None = None
    timeout_policy: TimeoutPolicy | None = None
    # The approved answer to the form (payload.form / payload.proposal): the reviewer's
    # values, or the proposal as it was; None when rejected, expired, cancelled, or no form.
    values: dict[str, Any] | None = None
    # True when `values` differ from the proposal (the reviewer edited it).
    edited: bool | None = None
    payload_digest: str | None = None
    values_digest: str | None = None
    receipt: str | None = None
    status: StatusName | None = None
    breakpoint_id: str | None = None
    # The client's check of `receipt` (bpm_client.receipts): True once it verified against
    # the JWKS and matches this result; None when not checked (or no receipt).
    verified: bool | None = None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False)

    def to_json(self) -> dict[str, Any]:
        """The contract's camelCase shape, plus `breakpointId` and `status`."""
        return {"breakpointId": self.breakpoint_id, "status": self.status, **super().to_json()}


@dataclasses.dataclass
class Grant(Model):
    """A reviewer's grant: the same agent's next breakpoints of `key` (scope key), or of
    `key` in `run_id` (scope run), approved for `uses` of them or until `expires_at`."""

    id: str
    scope: Literal["run", "key"]
    agent_id: str
    run_id: str | None
    key: str
    values: dict[str, Any]
    uses: int | None
    uses_left: int | None
    expires_at: datetime | None
    created_at: datetime
    granted_by: str
    breakpoint_id: str
    status: Literal["live", "revoked", "expired", "used"]
    revoked_at: datetime | None
    revoked_by: str | None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False)


@dataclasses.dataclass
class Feedback(Model):
    id: str
    author: str
    created_at: datetime
    comment: str | None = None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False)


@dataclasses.dataclass
class Expert(Model):
    """One seat a breakpoint is routed to."""

    name: str
    resolved: bool
    kind: Literal["group", "user", "owner"] | None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False)


@dataclasses.dataclass
class AutoApproval(Model):
    recommended: bool
    reason: str
    matched_rule: str | None
    consecutive_approvals: int
    # Sent only when a shadow rule would have approved (the breakpoint waits all the same).
    shadow: bool | None = None
    shadow_rules: list[str] | None = None
    # Sent only when a reviewer's grant approved it: the grant and who gave it.
    grant_id: str | None = None
    granted_by: str | None = None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False)


@dataclasses.dataclass
class ExpectedDecision(Model):
    """How long a person usually takes to decide a breakpoint like this one: p50 and p90
    of the human decisions of the last 90 days with the same key (`basis` "key"), else
    the same expert seats ("experts"), else all of them ("all")."""

    p50_seconds: int
    p90_seconds: int
    samples: int
    basis: Literal["key", "experts", "all"]
    extra: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False)

    def describe(self) -> str:
        """`usually answered in about 4 min (p90 22 min)`."""
        return (
            f"usually answered in about {_duration(self.p50_seconds)} "
            f"(p90 {_duration(self.p90_seconds)})"
        )


def _duration(seconds: int) -> str:
    """Roughly, for people: 40 s, 4 min, 2.5 h, 3 days."""
    if seconds < 90:
        return f"{seconds} s"
    if seconds < 90 * 60:
        return f"{round(seconds / 60)} min"
    if seconds < 36 * 3600:
        hours = seconds / 3600
        return f"{hours:.1f} h".replace(".0 h", " h")
    return f"{round(seconds / 86400)} days"


@dataclasses.dataclass
class Breakpoint(Model):
    """The full representation (`GET /api/breakpoints/{id}`)."""

    breakpoint_id: str
    status: StatusName
    agent_id: str
    run_id: str | None
    title: str | None
    key: str
    question: str | None
    payload: dict[str, Any]
    tags: list[str]
    ttl_seconds: int | None
    expires_at: datetime | None
    created_at: datetime
    updated_at: datetime
    released_at: datetime | None
    expired_at: datetime | None
    cancelled_at: datetime | None
    feedback: list[Feedback]
    result: BreakpointResult | None
    auto_approval: AutoApproval | None
    strategy: Strategy
    experts: list[Expert]
    votes: list[ResponseVote]
    requested_by: str | None
    payload_digest: str | None
    # The breakpoint's page in the reviewer console, absolute: where a person answers it.
    console_url: str
    # While waiting: how long people usually take (None once decided, or too little history).
    expected_decision: ExpectedDecision | None
    # The create answer's only: payload keys that look misspelt ("payload.questoin: did you
    # mean question?"). The payload was stored as sent; empty elsewhere.
    warnings: list[str] = dataclasses.field(default_factory=list)
    extra: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False)

    @property
    def done(self) -> bool:
        return self.status in FINAL_STATUSES

    def to_json(self) -> dict[str, Any]:
        """As the API sent it: `warnings` only when there are some."""
        data = super().to_json()
        if not self.warnings:
            data.pop("warnings")
        return data


@dataclasses.dataclass
class Status(Model):
    """The polling answer (`GET /api/breakpoints/{id}/status`)."""

    status: StatusName
    updated_at: datetime
    result: BreakpointResult | None
    poll_after_ms: int | None
    # As Breakpoint.expected_decision.
    expected_decision: ExpectedDecision | None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False)

    @property
    def done(self) -> bool:
        return self.status in FINAL_STATUSES


@dataclasses.dataclass
class NotVisible(Model):
    code: Literal["not_found"]
    message: str
    extra: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False)


@dataclasses.dataclass
class StatusEntry(Model):
    """One breakpoint of a many-status answer; `error` when it is not visible to you."""

    breakpoint_id: str
    status: StatusName | None = None
    updated_at: datetime | None = None
    result: BreakpointResult | None = None
    poll_after_ms: int | None = None
    expected_decision: ExpectedDecision | None = None
    error: NotVisible | None = None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False)

    @property
    def done(self) -> bool:
        return self.status in FINAL_STATUSES


@dataclasses.dataclass
class ManyStatus(Model):
    results: list[StatusEntry]
    extra: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False)


@dataclasses.dataclass
class Event(Model):
    """One audit event of a breakpoint's history."""

    id: str
    type: EventType
    actor: str
    timestamp: datetime
    metadata: Any
    extra: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False)


@dataclasses.dataclass
class EventList(Model):
    results: list[Event]
    extra: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False)


@dataclasses.dataclass
class BreakpointPage(Model):
    """One page of `GET /api/breakpoints` (`next` and `previous` are cursor URLs)."""

    results: list[Breakpoint]
    next: str | None = None
    previous: str | None = None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False)


@dataclasses.dataclass
class ReplayedRule(Model):
    """The rule a replay evaluated: a pattern rule, or autoApproveAfterN with key and n."""

    action: str
    pattern: str | None = None
    key: str | None = None
    n: int | None = None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False)


@dataclasses.dataclass
class RejectedButWouldApprove(Model):
    """A breakpoint a person rejected that the replayed rule would have approved."""

    breakpoint_id: str
    key: str
    responded_by: str | list[str]
    feedback: str | None
    decided_at: datetime | None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False)


@dataclasses.dataclass
class RuleReplay(Model):
    """What a rule would have done over the history (`POST /api/rules/simulate`)."""

    rule: ReplayedRule
    since: datetime
    considered: int
    matched: int
    would_auto_approve: int
    agreed_with_humans: int
    human_approved: int
    human_rejected: int
    rejected_but_would_approve: list[RejectedButWouldApprove]
    rejected_but_would_approve_count: int
    # Of the matched, the ones a reviewer's grant approved (nobody's decision).
    grant_approved: int
    extra: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False)


@dataclasses.dataclass
class StatusOnly(Model):
    status: StatusName
    extra: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False)


@dataclasses.dataclass
class FeedbackCreated(Model):
    """The answer to a comment (and release) by a reviewer; `grant` when the approval gave one."""

    feedback: Feedback
    status: StatusName
    result: BreakpointResult | None
    grant: Grant | None = None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False)


ErrorCode = Literal[
    "validation_error",
    "not_authenticated",
    "permission_denied",
    "not_found",
    "method_not_allowed",
    "not_acceptable",
    "request_timeout",
    "invalid_state",
    "idempotency_conflict",
    "conflict",
    "payload_too_large",
    "unsupported_media_type",
    "throttled",
    "server_error",
    "unavailable",
]


@dataclasses.dataclass
class ErrorBody(Model):
    """The error object of the API's error envelope (`{"error": {...}}`)."""

    code: ErrorCode
    message: str
    details: dict[str, Any]
    extra: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False)


@dataclasses.dataclass
class DecidedBreakpoint(Model):
    id: str
    status: StatusName
    extra: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False)


@dataclasses.dataclass
class DecisionOutcome(Model):
    """One item of a batch of decisions: 201 and the breakpoint, or a status and `error`."""

    breakpoint_id: str
    status: Literal[201, 400, 403, 404, 409]
    error: ErrorBody | None = None
    breakpoint: DecidedBreakpoint | None = None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False)


@dataclasses.dataclass
class DecisionOutcomes(Model):
    """The answer to `POST /api/breakpoints/decisions`: one result per item, in order."""

    results: list[DecisionOutcome]
    extra: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False)


@dataclasses.dataclass
class BreakpointGroup(Model):
    """Waiting breakpoints of one key and run (`run_id` None: without a run)."""

    key: str
    run_id: str | None
    count: int
    oldest_created_at: datetime
    extra: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False)


@dataclasses.dataclass
class BreakpointGroups(Model):
    """The answer to `GET /api/breakpoints/groups`: the largest groups first, at most 100."""

    results: list[BreakpointGroup]
    extra: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False)
