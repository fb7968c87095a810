"""Reviewers' decisions: comments, releases, votes of routed seats, "Always approve"."""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any

from django.db import transaction
from django.utils import timezone

from accounts import experts as routing
from accounts.people import is_person_named
from audit.models import EventType
from breakpoints.answers.results import result_released, result_voted, vote
from breakpoints.answers.voting import VOTING_STRATEGIES, approval_disagreeing, votes_outcome
from breakpoints.models import Breakpoint, Feedback
from breakpoints.payload import form_schema
from breakpoints.payload.validation import options_of
from breakpoints.representation import expected_decision
from breakpoints.services.expiry import breakpoint_expire_if_due
from breakpoints.services.refusals import refusal_recorded, refusals_recorded
from breakpoints.services.transitions import (
    feedback_cached,
    feedback_write_and_read,
    lock,
    move,
    record,
    recorded_together,
)
from breakpoints.wakeups import announce
from core.actors import Actor, require_not_requester, require_reviewer
from core.choices import Status, Via
from core.exceptions import DomainError, InvalidInput, InvalidState, NotFound
from grants import services as grants
from grants.models import Grant
from infra.db.prepared import update_where
from policies import autoapproval, configuration, foureyes, shadow
from policies.models import AutoApprovalRule

# Whether a name (a breakpoint's requestedBy) is the person's (accounts.people).
NamesPerson = Callable[[Any, str | None], bool]


@dataclass(frozen=True)
class Release:
    """What one reviewer's release does: the seat it fills, the votes after it, and the
    decision (None while a collect-all/quorum vote leaves the breakpoint open)."""

    seat: routing.Seat | None
    votes: list[dict[str, Any]]
    decision: bool | None
    result: dict[str, Any] | None


def _json_bool(value: bool) -> str:
    return "true" if value else "false"


def _require_waiting(bp: Breakpoint) -> None:
    if not bp.is_waiting:
        raise InvalidState(
            f"Breakpoint is {bp.status}; it no longer takes feedback.",
            current_status=bp.status,
        )


def _check_release(bp: Breakpoint, option: str | None, approved: bool | None) -> bool:
    """The verdict a release with this option and `approved` gives, or raise if it is refused.

    An option that carries a verdict ({"label": "Hold", "approved": false}) decides
    `approved`; an explicit `approved` that contradicts it is refused, not overridden. A
    plain-string option, or none, leaves it to the reviewer: approve unless told otherwise.
    """
    _require_waiting(bp)
    options = options_of(bp.payload)
    if option is None or not options:
        return True if approved is None else approved
    verdicts = {choice.label: choice.approved for choice in options}
    if option not in verdicts:
        raise InvalidInput(
            "option must be one of the breakpoint's options.",
            {"option": [f"Must be one of: {', '.join(verdicts)}."]},
        )
    verdict = verdicts[option]
    if verdict is None:
        return True if approved is None else approved
    if approved is not None and approved is not verdict:
        said, meant = _json_bool(approved), _json_bool(verdict)
        raise InvalidInput(
            f"approved: {said} contradicts option “{option}”, which releases with "
            f"approved: {meant}. Send approved: {meant} or leave approved out.",
            {
                "approved": [f"Contradicts option “{option}” (approved: {meant})."],
                "option": [f"Releases with approved: {meant}, not {said}."],
            },
        )
    return verdict


def self_review_prevented(bp: Breakpoint) -> bool:
    """Whether its requester is refused a decision: its own preventSelfReview (payload or
    a matching route's default, fixed at creation) or the service's BPM_PREVENT_SELF_REVIEW."""
    return foureyes.under_four_eyes(bp.prevent_self_review)


def require_other_reviewer(
    bp: Breakpoint, actor: Actor, names_person: NamesPerson = is_person_named
) -> None:
    """Four eyes: refuse (SelfReview) a decision by the person who requested it, when
    self-review is prevented for it. Every channel's release passes here. A person, not an
    account: any account of theirs (accounts.people.is_person_named; `names_person` the
    same question with the person's accounts read once, for many breakpoints) is refused."""
    require_not_requester(
        actor, bp.requested_by, prevent=self_review_prevented(bp), names_person=names_person
    )


def _refusal(
    bp: Breakpoint,
    actor: Actor,
    resolved: Mapping[str, routing.Seat] | None = None,
    names_person: NamesPerson = is_person_named,
) -> DomainError | None:
    """Why this actor may not release it now, or None: the checks of every release
    (feedback_add, release_preview) that need no verdict, comment or option."""
    try:
        require_reviewer(actor)
        _require_waiting(bp)
        require_other_reviewer(bp, actor, names_person)
        if bp.experts:
            seats = routing.seats_for(bp.experts, resolved)
            voted = [v.get("seat") for v in bp.votes]
            routing.seat_for_response(actor.user, seats, voted, _voters(bp))
    except DomainError as exc:
        return exc
    return None


def release_refusal(
    bp: Breakpoint,
    actor: Actor,
    resolved: Mapping[str, routing.Seat] | None = None,
    names_person: NamesPerson = is_person_named,
) -> str | None:
    """Why this person may not release it now (not a reviewer, no longer waiting, its
    requester under four eyes, no open seat of a routed one), or None: "may this person
    release this?", asked once for every channel. Only a question, nothing is written (the
    console's review page, the email decision page). `resolved`: the breakpoint's seats
    when the caller resolved them already (accounts.experts); `names_person`: four eyes'
    question when the caller asks it of many breakpoints (accounts.people.person_namer)."""
    refusal = _refusal(bp, actor, resolved, names_person)
    return refusal.message if refusal is not None else None


def release_check(*, breakpoint_id: str, actor: Actor, via: str) -> Breakpoint:
    """A release asked for before it is given (a Slack Reject button, the console's release
    form): the breakpoint when the actor may release it now, else the refusal raised, and
    recorded as feedback_add records its own. Nothing else is written: the release is
    feedback_add's (an overdue breakpoint is expired first, as there)."""
    breakpoint_expire_if_due(breakpoint_id)
    bp = Breakpoint.objects.filter(pk=breakpoint_id).first()
    if bp is None:
        raise NotFound("Breakpoint not found.")
    refusal = _refusal(bp, actor)
    if refusal is not None:
        refusal_recorded(breakpoint_id=bp.pk, actor=actor, via=via, exc=refusal)
        raise refusal
    return bp


def _release(
    bp: Breakpoint,
    *,
    actor: Actor,
    approved: bool,
    comment: str,
    option: str | None,
    at: datetime | None = None,
    values: dict[str, Any] | None = None,
) -> Release:
    """Work out a release without writing anything (raises if the actor may not release:
    the requester of a breakpoint that prevents self-review, a reviewer without a seat).
    `values`: the answer to its form (form_schema.release_values), carried by the vote."""
    require_other_reviewer(bp, actor)
    seat: routing.Seat | None = None
    seat_count = 0
    if bp.experts:
        seats = routing.seats_for(bp.experts)
        seat_count = len(seats)
        voted = [v.get("seat") for v in bp.votes]
        seat = routing.seat_for_response(actor.user, seats, voted, _voters(bp))
    response = vote(
        approved=approved,
        comment=comment,
        option=option,
        responder=actor.name,
        at=at or timezone.now(),
        seat=seat.name if seat else None,
        values=values,
    )
    votes = [*bp.votes, response]
    if seat is not None and bp.strategy in VOTING_STRATEGIES:
        if approved:
            _require_values_approved_alike(bp.votes, values)
        decision = votes_outcome(bp.strategy, seat_count, [v["approved"] for v in votes])
        result = result_voted(decision, votes) if decision is not None else None
        return Release(seat, votes, decision, result)
    return Release(seat, votes, approved, result_released(response))


def _voters(bp: Breakpoint) -> dict[str, str]:
    """The person behind each vote so far (the account's username; a trigger rule's vote:
    its owner's), to the seat it filled: a person fills one seat (accounts.experts).
    No query until someone voted."""
    if not bp.votes:
        return {}
    seat_of = {v["respondedBy"]: v.get("seat") or "" for v in bp.votes}
    rows = Feedback.objects.filter(breakpoint_id=bp.pk, approved__isnull=False).values_list(
        "author", "author_user__username"
    )
    return {username or author: seat_of.get(author, "") for author, username in rows}


def _require_values_approved_alike(votes: list[dict[str, Any]], values: Any) -> None:
    """Refuse (409) an approving vote whose values differ from an earlier approval's: a
    multi-seat approval releases only values every approving seat approved. Refused as
    soon as it is cast, not when it would complete the decision: a seat votes once, so
    a differing vote kept would leave no approval possible."""
    disagreeing = approval_disagreeing(votes, values)
    if disagreeing is None:
        return
    earlier, fields = disagreeing
    who = f"{earlier.get('seat')} ({earlier['respondedBy']})"
    raise InvalidState(
        f"{who} approved other values ({', '.join(fields) or 'the answer'} differ): "
        "approve the values approved already, or reject; this breakpoint is released "
        "only with values every approving seat approved.",
        current_status=Status.WAITING,
        details={"differingValues": fields, "approvedValues": earlier["values"]},
    )


def release_preview(
    *,
    bp: Breakpoint,
    actor: Actor,
    approved: bool | None,
    comment: str,
    option: str | None,
    values: Any = None,
) -> Release:
    """What a release would send the agent, for the console's confirmation step.

    `approved` None means the reviewer did not say: the option's verdict, else approve.
    `values` are checked as feedback_add checks them (a 400's InvalidInput names each
    field's problem). Refused, like feedback_add, unless the actor is a reviewer or an admin.
    """
    require_reviewer(actor)
    verdict = _check_release(bp, option, approved)
    answer = form_schema.release_values(bp.payload, values=values, release=True, approved=verdict)
    return _release(
        bp,
        actor=actor,
        approved=verdict,
        comment=comment,
        option=option,
        at=timezone.now(),
        values=answer,
    )


def feedback_add(
    *,
    breakpoint_id: str,
    actor: Actor,
    comment: str,
    release: bool = False,
    approved: bool | None = None,
    option: str | None = None,
    values: Any = None,
    via: str = Via.API,
    within: Callable[[], None] | None = None,
    grant: Any = None,
) -> tuple[Feedback, Breakpoint]:
    """Add a reviewer's comment; with release=True it also decides the breakpoint.

    `values` answer the breakpoint's form (payload.form/proposal), checked here for every
    channel (breakpoints.payload.form_schema.release_values): an approval without them approves the
    proposal as it is; a rejection, a comment, or a breakpoint without a form takes none.

    The release approves unless `approved` is false or the chosen option carries the
    verdict false (payload.options [{"label": "Hold", "approved": false}]); an `approved`
    that contradicts the option's verdict is refused before anything is written.
    On a routed breakpoint (payload.expert) only members of its seats, or admins, may
    release; any reviewer may comment. With collect-all or quorum a release is one seat's
    vote, and the breakpoint is released once the votes decide it. A seat votes once, and
    a person fills one seat; an approving vote must approve the values earlier approving
    votes approved (else 409), so the values released are every approving seat's.
    `via` records where it was given (api, console, trigger, or a channel's kind: slack).
    The person it was requested by may not release it when self-review is prevented
    (require_other_reviewer), whatever the channel. A permission or state refusal is
    recorded (services.refusals), once, whatever the channel. `within`: more the caller
    writes in the decision's own transaction, first (an email link's use): it commits
    with the decision or rolls back with its refusal. `grant`: an approval's grant
    (feedback_add_granting, which also returns the grant).
    """
    feedback, bp, _ = feedback_add_granting(
        breakpoint_id=breakpoint_id,
        actor=actor,
        comment=comment,
        release=release,
        approved=approved,
        option=option,
        values=values,
        via=via,
        within=within,
        grant=grant,
    )
    return feedback, bp


def feedback_add_granting(
    *,
    breakpoint_id: str,
    actor: Actor,
    comment: str,
    release: bool = False,
    approved: bool | None = None,
    option: str | None = None,
    values: Any = None,
    via: str = Via.API,
    within: Callable[[], None] | None = None,
    grant: Any = None,
) -> tuple[Feedback, Breakpoint, Grant | None]:
    """feedback_add, and the grant its approval gave (None without `grant`).

    `grant` ({scope, uses?, expiresInSeconds?, values?}: grants.services.grant_spec) is
    given in the decision's own transaction, only with a final approval
    (grants.services.grant_refusal says when not: a rejection or comment, a voting
    breakpoint, four eyes, a key that is not its own, scope run without a runId). Refused,
    nothing is written and the decision is not given either: the reviewer may retry
    without it.
    """
    spec = grants.grant_spec(grant) if grant is not None else None
    with refusals_recorded(breakpoint_id=breakpoint_id, actor=actor, via=via):
        return _feedback_add(
            breakpoint_id=breakpoint_id,
            actor=actor,
            comment=comment or "",
            release=release,
            approved=approved,
            option=option,
            values=values,
            via=via,
            within=within,
            grant=spec,
        )


def _feedback_add(
    *,
    breakpoint_id: str,
    actor: Actor,
    comment: str,
    release: bool,
    approved: bool | None,
    option: str | None,
    via: str,
    values: Any = None,
    within: Callable[[], None] | None = None,
    grant: grants.GrantSpec | None = None,
) -> tuple[Feedback, Breakpoint, Grant | None]:
    """feedback_add_granting without recording its refusal (its callers do)."""
    require_reviewer(actor)
    # The one home of the contract's comment rule: every channel relies on it, none adds
    # its own (a rejection may come without a comment, as an approval may).
    if not release and not comment.strip():
        raise InvalidInput(
            "comment may be empty only when release is true.",
            {"comment": ["This field may not be blank unless release is true."]},
        )
    decide = partial(
        _decide,
        breakpoint_id,
        actor,
        comment,
        release,
        approved,
        option,
        via,
        values,
        within,
        grant=grant,
    )
    with form_schema.checks_remembered():
        _values_checked_unlocked(breakpoint_id, values if release else None)
        try:
            feedback, bp, given = decide(overdue_refused=True)
        except _Overdue:
            # Past expiresAt: too late, even before the sweep. Expired (or what its
            # onTimeout says) in a transaction of its own, then asked again: refused unless
            # still waiting.
            breakpoint_expire_if_due(breakpoint_id)
            feedback, bp, given = decide(overdue_refused=False)
    feedback_cached(bp, None)  # read once for the outbox bodies (_feedback_record)
    return feedback, bp, given


def _values_checked_unlocked(breakpoint_id: str, values: Any) -> None:
    """A release's values checked against the breakpoint's form (which never changes)
    before its row is locked: a costly check holds no lock, and the locked decision finds
    the answer (form_schema.checks_remembered) in the order of its own refusals."""
    if values is None or form_schema.values_shape_problem(values) is not None:
        return
    payload = Breakpoint.objects.filter(pk=breakpoint_id).values_list("payload", flat=True)
    form = (payload.first() or {}).get(form_schema.FORM_KEY)
    if form is not None:
        form_schema.values_problems(form, values)


class _Overdue(Exception):
    """The locked breakpoint is past its expiresAt: roll the decision back, expire it first."""


def _decide(
    breakpoint_id: str,
    actor: Actor,
    comment: str,
    release: bool,
    approved: bool | None,
    option: str | None,
    via: str,
    values: Any,
    within: Callable[[], None] | None,
    *,
    overdue_refused: bool,
    grant: grants.GrantSpec | None = None,
) -> tuple[Feedback, Breakpoint, Grant | None]:
    """The decision's transaction: the row locked, the feedback, the release or vote, their
    events and outbox rows written together (transitions.recorded_together). An overdue
    row raises _Overdue (rolled back: the caller expires it, then asks again) while
    `overdue_refused`. A `grant` is refused before any write, else given after the release."""
    with transaction.atomic(), configuration.reading(), recorded_together():
        if within is not None:
            within()
        bp = lock(breakpoint_id, and_configuration=True)  # the webhooks read with it
        if overdue_refused and bp.is_overdue():
            raise _Overdue
        verdict = _check_release(bp, option, approved)
        if release:  # four eyes: a trigger's approval is automatic, refused (recorded)
            foureyes.require_person_to_approve(
                via=via, approved=verdict, prevent_self_review=bp.prevent_self_review
            )
        answer = form_schema.release_values(
            bp.payload, values=values, release=release, approved=verdict
        )
        _check_grant(bp, grant, approves=release and verdict)
        outcome = None
        if release:
            outcome = _release(
                bp, actor=actor, approved=verdict, comment=comment, option=option, values=answer
            )
        feedback = _feedback_record(
            bp, actor, comment, outcome, verdict=verdict, option=option, via=via, values=answer
        )
        if outcome is None:
            return feedback, bp, None
        if outcome.decision is None or outcome.result is None:  # both None until decided
            _votes_save(bp, outcome.votes)
            return feedback, bp, None
        move(
            bp,
            to=Status.RELEASED,
            actor=actor,
            result=outcome.result,
            event_type=EventType.RELEASED,
            metadata={"approved": outcome.decision, "option": outcome.result.get("option", option)},
            also={"votes": outcome.votes},
            via=via,
        )
        _released(bp, approved=outcome.decision, via=via)
        given = grants.grant_create(actor=actor, bp=bp, spec=grant) if grant else None
    return feedback, bp, given


def _released(bp: Breakpoint, *, approved: bool, via: str) -> None:
    """After a person's (or a trigger's) release: a shadow rule's agreement, and the
    decision time observed."""
    if (bp.auto_approval or {}).get("shadow"):  # read from the locked row: no query
        shadow.shadow_outcome_record(breakpoint_id=bp.pk, approved=approved)
    if via != Via.TRIGGER:  # a person decided: against what was expected (metrics)
        transaction.on_commit(partial(_decision_observed, bp), robust=True)


def _check_grant(bp: Breakpoint, grant: grants.GrantSpec | None, *, approves: bool) -> None:
    """Refuse (raise) a grant this decision may not carry: only an approving release of a
    breakpoint that is not a voting one (where a release is a final decision) does."""
    if grant is None:
        return
    refusal = grants.grant_refusal(
        bp, grant, approved=approves, voting=bp.strategy in VOTING_STRATEGIES
    )
    if refusal is not None:
        raise refusal


def _decision_observed(bp: Breakpoint) -> None:
    assert bp.released_at is not None  # just released
    expected_decision.decision_observe(
        key=bp.key, experts=bp.experts, created_at=bp.created_at, decided_at=bp.released_at
    )


def _feedback_record(
    bp: Breakpoint,
    actor: Actor,
    comment: str,
    outcome: Release | None,
    *,
    verdict: bool,
    option: str | None,
    via: str,
    values: Any = None,
) -> Feedback:
    """The comment and its event; a release (outcome) also stores its verdict and option,
    and its event the values it approves (the history shows each vote's)."""
    releasing = outcome is not None
    # Written, and its breakpoint's feedback read with it (this one included), in one
    # statement: every outbox body of the decision shows it.
    feedback = feedback_write_and_read(
        bp,
        Feedback(
            breakpoint=bp,
            author=actor.name,
            author_user=actor.user,
            comment=comment,
            releases=outcome is not None and outcome.decision is not None,
            approved=verdict if releasing else None,
            option=option if releasing else None,
            via=via,
        ),
    )
    metadata: dict[str, Any] = {"feedbackId": str(feedback.pk), "release": releasing, "via": via}
    if outcome is not None and outcome.seat is not None:
        metadata["vote"] = {"seat": outcome.seat.name, "approved": verdict}
    if releasing and verdict and values is not None:
        metadata["values"] = values
    record(bp, type=EventType.FEEDBACK, actor=actor, metadata=metadata)
    return feedback


def _votes_save(bp: Breakpoint, votes: list[dict[str, Any]]) -> None:
    """Record a vote that did not decide yet, only while the breakpoint is still waiting."""
    now = timezone.now()
    saved = update_where(
        Breakpoint,
        {"votes": votes, "updated_at": now},
        where={"id": bp.pk, "status": Status.WAITING},
    )
    if not saved:
        current = Breakpoint.objects.values_list("status", flat=True).get(pk=bp.pk)
        raise InvalidState(f"Breakpoint is already {current}.", current_status=current)
    announce([bp.pk])
    bp.votes, bp.updated_at = votes, now


def breakpoint_always_approve(
    *, breakpoint_id: str, actor: Actor, comment: str = "", via: str = Via.CONSOLE
) -> tuple[Feedback, Breakpoint, AutoApprovalRule]:
    """A reviewer's "Always approve": approve (or vote approve) and add an auto-approve rule.

    The rule matches exactly this breakpoint's key and records the reviewer as its
    author; an identical existing rule is reused. Refused when the agent sent
    presentAlwaysApprove: false, or when the key is not the breakpoint's own
    (autoapproval.always_approve_refusal); refused as feedback_add is otherwise, and
    recorded the same way.
    """
    with refusals_recorded(breakpoint_id=breakpoint_id, actor=actor, via=via):
        with transaction.atomic():
            bp = lock(breakpoint_id)
            refusal = autoapproval.always_approve_refusal(bp)
            if refusal is not None:
                raise InvalidInput(
                    f"This breakpoint does not offer Always approve. {refusal}",
                    {"alwaysApprove": [refusal]},
                )
            feedback, bp, _ = _feedback_add(
                breakpoint_id=breakpoint_id,
                actor=actor,
                comment=comment,
                release=True,
                approved=True,
                option=None,
                via=via,
            )
            rule = autoapproval.rule_always_approve_key(
                actor=actor, key=bp.key, note=f"Always approve, from breakpoint {bp.pk}"
            )
    return feedback, bp, rule
