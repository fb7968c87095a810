"""Grants: a reviewer's approval that also approves the same agent's next breakpoints of
the same key (and run), for some uses or some time.

Every write of a grant is here, each in one transaction with its audit event
(audit.GrantEvent):
- `grant_spec` checks what a reviewer asked for (the feedback's `grant`), and
  `grant_refusal` whether the breakpoint being approved may carry one; the decision
  service (breakpoints.services.decisions) asks both and calls `grant_create` in the
  decision's own transaction;
- `grant_use` is asked by a create whose rules left it waiting and that nothing forbids
  approving automatically: it consumes one use of a live grant that covers it, with one
  conditional UPDATE (two concurrent creates never spend the same last use);
- `grant_revoke` (the granter or an admin), and `grants_expire_due` (the beat sweep) end
  them.

A grant never applies to a breakpoint under four eyes, with a form only a person can
answer, a never-auto-approve rule or an always-break-on tag (the create asks only when the
rules' verdict is "No matching rule"), nor to a voting one, another agent's, another key's,
another run's (scope run), one whose proposal falls outside its values, or once its
granter is no longer an active reviewer (or no longer holds a seat the breakpoint names).
"""

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from accounts import experts as routing
from audit.models import GrantEventType
from audit.services import grant_event_record
from core.actors import Actor, is_admin, is_reviewer, require_reviewer
from core.exceptions import Forbidden, InvalidInput, InvalidState, NotFound
from grants import selectors
from grants.models import Grant, GrantEnd, GrantScope
from policies import autoapproval, foureyes

MAX_USES = 1000
MAX_VALUE_FIELDS = 20
MAX_TEXT = 1000  # a field's name, a prefix, a string to equal
CONSTRAINTS = ("prefix", "equals")
SWEEP_BATCH = 500


@dataclass(frozen=True)
class GrantSpec:
    """What a reviewer asked to grant: checked (grant_spec), not yet tied to a breakpoint."""

    scope: str
    uses: int | None
    expires_in_seconds: int | None
    values: dict[str, dict[str, Any]]


def _invalid(field: str, problem: str) -> InvalidInput:
    return InvalidInput(f"grant.{field}: {problem}", {f"grant.{field}": [problem]})


def grant_spec(raw: Any) -> GrantSpec:
    """The grant a feedback body asks for, or InvalidInput (400) naming the field:
    {scope: run|key, uses?: 1..1000, expiresInSeconds?: 1..BPM_GRANT_MAX_SECONDS (at least
    one of the two), values?: {field: {prefix: text} | {equals: a JSON scalar}}}."""
    if not isinstance(raw, Mapping):
        raise InvalidInput("grant must be an object.", {"grant": ["Must be an object."]})
    unknown = sorted(set(raw) - {"scope", "uses", "expiresInSeconds", "values"})
    if unknown:
        raise _invalid(unknown[0], "Unknown field.")
    scope = raw.get("scope")
    if scope not in GrantScope.values:
        raise _invalid("scope", f"Must be one of: {', '.join(GrantScope.values)}.")
    uses = _whole(raw.get("uses"), "uses", MAX_USES)
    seconds = _whole(raw.get("expiresInSeconds"), "expiresInSeconds", _max_seconds())
    if uses is None and seconds is None:
        problem = "Give uses, expiresInSeconds, or both: a grant ends."
        raise InvalidInput(f"grant: {problem}", {"grant": [problem]})
    return GrantSpec(
        scope=scope, uses=uses, expires_in_seconds=seconds, values=_constraints(raw.get("values"))
    )


def _max_seconds() -> int:
    return int(settings.BPM_GRANT_MAX_SECONDS)


def _whole(value: Any, field: str, high: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
        raise _invalid(field, f"Must be a whole number from 1 to {high}.")
    return value


def _constraints(raw: Any) -> dict[str, dict[str, Any]]:
    """The values constraints, each {prefix: text} or {equals: a JSON scalar}."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise _invalid("values", "Must be an object of constraints, one per field.")
    if len(raw) > MAX_VALUE_FIELDS:
        raise _invalid("values", f"At most {MAX_VALUE_FIELDS} fields.")
    checked: dict[str, dict[str, Any]] = {}
    for name, constraint in raw.items():
        where = f"values.{name[:50]}"
        if len(name) > MAX_TEXT:
            raise _invalid("values", f"A field's name has at most {MAX_TEXT} characters.")
        if not isinstance(constraint, Mapping) or len(constraint) != 1:
            raise _invalid(where, 'Must be {"prefix": text} or {"equals": a JSON scalar}.')
        ((kind, expected),) = constraint.items()
        if kind == "prefix" and isinstance(expected, str) and 1 <= len(expected) <= MAX_TEXT:
            checked[name] = {"prefix": expected}
        elif kind == "equals" and _scalar(expected):
            checked[name] = {"equals": expected}
        else:
            raise _invalid(
                where,
                f'Must be {{"prefix": 1 to {MAX_TEXT} characters}} or {{"equals": a string '
                f"of at most {MAX_TEXT} characters, a number, true, false or null}}.",
            )
    return checked


def _scalar(value: Any) -> bool:
    if isinstance(value, str):
        return len(value) <= MAX_TEXT
    return value is None or isinstance(value, bool | int | float)


# --- on the breakpoint being approved -------------------------------------------------


class Approved(Protocol):
    """What grant_refusal and grant_create read of the breakpoint being approved."""

    @property
    def pk(self) -> Any: ...
    @property
    def agent_id(self) -> str: ...
    @property
    def run_id(self) -> str | None: ...
    @property
    def key(self) -> str: ...
    @property
    def key_is_explicit(self) -> bool: ...
    @property
    def payload(self) -> Any: ...
    @property
    def prevent_self_review(self) -> bool: ...
    @property
    def strategy(self) -> str: ...


def grant_refusal(
    bp: Approved, spec: GrantSpec, *, approved: bool, voting: bool
) -> InvalidInput | Forbidden | None:
    """Why this approval may not carry this grant (raise it: nothing is written, the
    decision is not given either), or None. `approved`: the release approves; `voting`:
    its strategy is collect-all or quorum (a grant is one person's say)."""
    if voting:
        problem = (
            "A grant is one person's say: a collect-all or quorum breakpoint is decided by "
            "several, so its approvals carry none."
        )
        return InvalidInput(f"grant: {problem}", {"grant": [problem]})
    if not approved:
        problem = "Only an approval (release: true, approved) may carry a grant."
        return InvalidInput(f"grant: {problem}", {"grant": [problem]})
    if foureyes.under_four_eyes(bp.prevent_self_review):
        return Forbidden(
            "Four eyes (preventSelfReview): no automatic approval applies to this key's "
            "breakpoints, so no grant is given. Approve without one.",
            {"rule": "preventSelfReview"},
        )
    refusal = autoapproval.always_approve_refusal(bp)
    if refusal is not None:
        return InvalidInput(f"grant: {refusal}", {"grant": [refusal]})
    if spec.scope == GrantScope.RUN and not bp.run_id:
        problem = 'This breakpoint has no runId: a grant for "the rest of the run" needs one.'
        return InvalidInput(f"grant.scope: {problem}", {"grant.scope": [problem]})
    return None


def grant_offer_refusal(bp: Approved, *, voting: bool, scope: str = GrantScope.KEY) -> str | None:
    """Why an approval of `bp` may carry no grant of this scope (grant_refusal's own words),
    or None when it may: what the console asks before it offers "Approve, and allow this".
    The uses and expiry are the reviewer's to choose, so they play no part here."""
    spec = GrantSpec(scope=scope, uses=1, expires_in_seconds=None, values={})
    refusal = grant_refusal(bp, spec, approved=True, voting=voting)
    if refusal is None:
        return None
    problems = [
        text for texts in refusal.details.values() if isinstance(texts, list) for text in texts
    ]
    return str(problems[0]) if problems else refusal.message


def grant_create(
    *, actor: Actor, bp: Approved, spec: GrantSpec, now: datetime | None = None
) -> Grant:
    """The grant, written with its `created` event: call it inside the approval's own
    transaction, after grant_refusal said None."""
    now = now or timezone.now()
    seconds = spec.expires_in_seconds
    grant = Grant.objects.create(
        scope=spec.scope,
        agent_id=bp.agent_id,
        run_id=bp.run_id if spec.scope == GrantScope.RUN else None,
        key=bp.key,
        values=spec.values,
        uses_granted=spec.uses,
        uses_left=spec.uses,
        expires_at=now + timedelta(seconds=seconds) if seconds is not None else None,
        granted_by=actor.name,
        granted_by_user=actor.user,
        breakpoint_id=bp.pk,
        created_at=now,
    )
    _event(
        grant,
        GrantEventType.CREATED,
        actor.name,
        grant.breakpoint_id,
        scope=grant.scope,
        runId=grant.run_id,
        uses=grant.uses_granted,
        expiresAt=grant.expires_at.isoformat() if grant.expires_at else None,
        values=grant.values,
    )
    return grant


def _event(grant: Grant, type: str, actor: str, breakpoint_id: str = "", **metadata: Any) -> None:
    grant_event_record(
        type=type,
        grant_id=grant.pk,
        agent_id=grant.agent_id,
        key=grant.key,
        actor=actor,
        breakpoint_id=breakpoint_id,
        **metadata,
    )


# --- applying ----------------------------------------------------------------------


@dataclass(frozen=True)
class Later:
    """What a create asks a grant about: the new breakpoint."""

    breakpoint_id: str
    agent_id: str
    key: str
    run_id: str | None
    proposal: Mapping[str, Any] | None
    experts: list[str]


def grant_use(later: Later, *, now: datetime | None = None) -> Grant | None:
    """Consume one use of a live grant that covers `later`, or None. Call it inside the
    create's transaction, only for a breakpoint that nothing forbids approving
    automatically and that is not a voting one.

    No query unless a live grant exists for the agent and key (the process's copy of
    their pairs, kept by the configuration's generation). Then the candidates, oldest
    first; the first that covers it (run, values, its granter still a reviewer holding a
    seat it names) loses a use in one conditional UPDATE, or the next is tried: of
    concurrent creates, exactly as many as it has uses win one."""
    if not selectors.live_pair(later.agent_id, later.key):
        return None
    now = now or timezone.now()
    for grant in selectors.grant_candidates(agent_id=later.agent_id, key=later.key, now=now):
        if grant.scope == GrantScope.RUN and grant.run_id != later.run_id:
            continue
        if not values_within(grant.values, later.proposal):
            continue
        if not granter_may_approve(grant, later.experts):
            continue
        if _spent_one(grant, now):
            _event(grant, GrantEventType.USED, grant.granted_by, later.breakpoint_id)
            if grant.uses_left == 0:
                _end(grant, GrantEnd.USED, now, "system:grants")
            return grant
    return None


def values_within(constraints: Mapping[str, Any], proposal: Mapping[str, Any] | None) -> bool:
    """Whether the proposal meets every constraint; a field it lacks is outside. A
    `prefix` never covers a path that climbs out of it (a `..` segment)."""
    if not constraints:
        return True
    if not isinstance(proposal, Mapping):
        return False
    for name, constraint in constraints.items():
        if name not in proposal:
            return False
        value = proposal[name]
        if "prefix" in constraint:
            if not isinstance(value, str) or not value.startswith(constraint["prefix"]):
                return False
            if ".." in value.replace("\\", "/").split("/"):
                return False
        elif not _same_scalar(value, constraint.get("equals")):
            return False
    return True


def _same_scalar(value: Any, expected: Any) -> bool:
    """JSON equality of scalars: true is not 1, 1 is 1.0."""
    if isinstance(value, bool) or isinstance(expected, bool):
        return value is expected
    if isinstance(value, int | float) and isinstance(expected, int | float):
        return value == expected
    return type(value) is type(expected) and value == expected


def granter_may_approve(grant: Grant, experts: list[str]) -> bool:
    """Whether the granter could still approve such a breakpoint: an active reviewer (or
    admin), and, when it names experts, holding one of their seats (admins answer for
    any seat, as on a release)."""
    user = grant.granted_by_user
    if user is None or not user.is_active or not is_reviewer(user):
        return False
    if not experts or is_admin(user):
        return True
    return any(routing.holds(user, seat) for seat in routing.seats_for(experts))


_SPEND = (
    "UPDATE {table} SET uses_left = uses_left - 1 WHERE id = %s AND ended_at IS NULL "
    "AND (uses_left IS NULL OR uses_left > 0) AND (expires_at IS NULL OR expires_at > %s) "
    "RETURNING uses_left"
)


def _spent_one(grant: Grant, now: datetime) -> bool:
    """One use taken, in one conditional UPDATE (NULL uses: unlimited until its expiry);
    False when another create took the last one, or it ended meanwhile. The row stays
    locked until the create commits."""
    sql = _SPEND.format(table=connection.ops.quote_name(Grant._meta.db_table))
    with connection.cursor() as cursor:
        cursor.execute(sql, [grant.pk, now])
        row = cursor.fetchone()
    if row is None:
        return False
    grant.uses_left = row[0]
    return True


def _end(grant: Grant, reason: str, now: datetime, actor: str, **changes: Any) -> None:
    """Mark it ended (once) with its `expired` or `revoked` event."""
    Grant.objects.filter(pk=grant.pk).update(ended_at=now, ended_reason=reason, **changes)
    grant.ended_at, grant.ended_reason = now, reason
    for field, value in changes.items():
        setattr(grant, field, value)
    if reason == GrantEnd.REVOKED:
        _event(grant, GrantEventType.REVOKED, actor)
    else:
        _event(grant, GrantEventType.EXPIRED, actor, reason=reason)


# --- ending -----------------------------------------------------------------------


def grant_revoke(*, actor: Actor, grant_id: str) -> Grant:
    """Revoke a grant: its granter or an admin (others 403, unknown 404, revoked 409)."""
    require_reviewer(actor)
    with transaction.atomic():
        grant = Grant.objects.select_for_update().filter(pk=grant_id).first()
        if grant is None:
            raise NotFound(f"No grant {grant_id}.")
        if not selectors.is_granter(grant, actor.user) and not is_admin(actor.user):
            raise Forbidden("Only the reviewer who granted it, or an admin, may revoke it.")
        if grant.revoked_at is not None:
            raise InvalidState(f"Grant {grant.pk} is already revoked.", current_status="revoked")
        now = timezone.now()
        changes = {"revoked_at": now, "revoked_by": actor.name}
        if grant.ended_at is None:
            _end(grant, GrantEnd.REVOKED, now, actor.name, **changes)
        else:  # used up or expired already: revoked for the record, ended as it was
            Grant.objects.filter(pk=grant.pk).update(**changes)
            grant.revoked_at, grant.revoked_by = now, actor.name
            _event(grant, GrantEventType.REVOKED, actor.name)
    return grant


def grants_expire_due(now: datetime | None = None) -> int:
    """The sweep: each live grant past its expiry ended, with its `expired` event, once
    (rows locked, skipping those another sweep holds). Nothing is written when none is
    due (an UPDATE of no row would still move the configuration's generation)."""
    now = now or timezone.now()
    ended = 0
    while True:
        with transaction.atomic():
            due = list(
                Grant.objects.select_for_update(skip_locked=True)
                .filter(ended_at=None, expires_at__lte=now)
                .order_by("expires_at")[:SWEEP_BATCH]
            )
            for grant in due:
                _end(grant, GrantEnd.EXPIRED, now, "system:grants")
        ended += len(due)
        if len(due) < SWEEP_BATCH:
            return ended
