"""What an authentic JIRA webhook means, and the decision it gives.

A `jira:issue_updated` event whose changelog moves the status to JIRA_APPROVED_STATUS or
JIRA_REJECTED_STATUS, on an issue the JIRA channel created, releases that issue's
breakpoint as the JIRA user who made that change. Who that is, JIRA says, not the body:
whoever holds the webhook secret can write any `user` into it. So the issue's changelog is
read as the service account (channels.jira.changelog): the history the webhook names
(`changelog.id`) must be the issue's latest status change, to that status, and its author
decides; the comment is JIRA's copy, when the same user wrote it. That author must be
exactly one active user (accounts.people.person_with_email), and feedback_add checks the
rest (reviewer role, four eyes, routed seats, still waiting). Everything else is ignored.

A refusal on a known breakpoint is audited (REFUSED): by feedback_add for its own, here for
a change JIRA does not confirm (`unverified`), JIRA out of reach (`jira_unreachable`: never
decided on the body's word) and a user not matched. A refused change the issue still shows
(or one JIRA could not be asked about) is undone in JIRA through the outbox: a `refused`
JIRA delivery comments why and moves the issue back (channels.jira.issues).
"""

import logging
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction

from accounts.people import NoSinglePerson, person_with_email
from audit.models import EventType
from audit.services import refusal_record
from breakpoints.models import Feedback
from breakpoints.services import feedback_add
from channels.jira import JIRA
from channels.jira.changelog import JiraUser, jira_user
from channels.jira.issues import ISSUE_LABEL_PREFIX, JiraError, issue_record_get
from core import limits
from core.actors import Actor
from core.choices import Status
from core.exceptions import Forbidden, InvalidInput, InvalidState, NotFound
from core.storable import storable_text
from notifications.models import Delivery
from notifications.outbox import delivery_enqueue_to

ISSUE_UPDATED = "jira:issue_updated"
MAX_KEY_LENGTH = 255
MAX_LABELS = 100
audit_log = logging.getLogger("breakpoints.audit")
USER_NOT_MATCHED = "user_not_matched"  # no one active user has the JIRA user's email
UNVERIFIED = "unverified"  # JIRA's changelog does not show the change the webhook reports
JIRA_UNREACHABLE = "jira_unreachable"  # JIRA could not be asked who made the change
logger = logging.getLogger(__name__)


class Ignored(Exception):
    """Nothing to decide: another event, another status, no issue key."""


class Malformed(Exception):
    """Text no database can hold (NUL, a lone surrogate) where we read: a 400, not retried."""


class Unconfirmed(Exception):
    """JIRA does not confirm the change (UNVERIFIED), or could not be asked (JIRA_UNREACHABLE)."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason, self.message = reason, message


@dataclass(frozen=True)
class StatusChange:
    """What the webhook asks: the body's word, until JIRA confirms it (confirmed_by)."""

    issue_key: str
    status: str
    approved: bool
    changelog_id: str  # the history JIRA recorded the change as
    claimed: JiraUser  # the `user` the body names: recorded, never trusted
    comment_id: str
    labels: tuple[str, ...]


@dataclass(frozen=True)
class Handled:
    outcome: str  # released, voted, duplicate, refused, ignored
    detail: str
    breakpoint_id: str | None = None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def status_change(payload: dict[str, Any]) -> StatusChange:
    """The decision a payload asks for; raises Ignored when it asks for none."""
    event = payload.get("webhookEvent")
    if event != ISSUE_UPDATED:
        raise Ignored(f"{str(event)[:100]!r} events are not handled")
    status = _new_status(payload.get("changelog"))
    if status is None:
        raise Ignored("no status change")
    verdicts = {
        settings.JIRA_REJECTED_STATUS.casefold(): False,
        settings.JIRA_APPROVED_STATUS.casefold(): True,
    }
    if status.casefold() not in verdicts:
        raise Ignored(f"the status {status[:100]!r} decides nothing")
    issue = _dict(payload.get("issue"))
    key = _text(issue.get("key"))
    if not key or len(key) > MAX_KEY_LENGTH:
        raise Ignored("no issue key")
    labels = _dict(issue.get("fields")).get("labels")
    change = StatusChange(
        issue_key=key,
        status=status,
        approved=verdicts[status.casefold()],
        changelog_id=_id(_dict(payload.get("changelog")).get("id")),
        claimed=jira_user(payload.get("user")),
        comment_id=_id(_dict(payload.get("comment")).get("id")),
        labels=tuple(
            label
            for label in (labels if isinstance(labels, list) else [])[:MAX_LABELS]
            if isinstance(label, str)
        ),
    )
    _require_storable(change)
    return change


def _require_storable(change: StatusChange) -> None:
    """Raise Malformed naming the first field whose text no database can hold."""
    texts = [
        ("issue key", change.issue_key),
        ("changelog id", change.changelog_id),
        ("email", change.claimed.email),
        ("user", change.claimed.who),
        *(("label", label) for label in change.labels),
    ]
    for name, text in texts:
        if not storable_text(text):
            raise Malformed(f"The {name} holds a NUL or a lone surrogate.")


def _new_status(changelog: Any) -> str | None:
    items = _dict(changelog).get("items")
    for item in items if isinstance(items, list) else []:
        item = _dict(item)
        if "status" in (item.get("fieldId"), item.get("field")) and _text(item.get("toString")):
            return _text(item.get("toString"))
    return None


def _id(value: Any) -> str:
    """A JIRA id as text (JIRA sends some as numbers), at most 100 characters."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return _text(value)[:100]


def confirmed_by(change: StatusChange) -> tuple[JiraUser, str]:
    """(the JIRA user who made the change, the comment they gave with it) as JIRA's own
    changelog says; raises Unconfirmed when it does not say so, or cannot be asked."""
    try:
        record = issue_record_get(change.issue_key)
    except JiraError as exc:
        raise Unconfirmed(
            JIRA_UNREACHABLE,
            f"JIRA could not confirm who made the change ({exc.sent.error[:300]}); "
            "nothing was decided",
        ) from None
    recorded = record.change(change.changelog_id)
    if recorded is None or recorded.to_status.casefold() != change.status.casefold():
        raise Unconfirmed(
            UNVERIFIED,
            f"JIRA's changelog of {change.issue_key} has no change {change.changelog_id[:40]!r} "
            f"to {change.status[:100]!r}",
        )
    if not record.shows(recorded.id):
        raise Unconfirmed(
            UNVERIFIED, f"change {recorded.id} is no longer the status {change.issue_key} shows"
        )
    if not all(map(storable_text, (recorded.author.email, recorded.author.who))):
        raise Unconfirmed(UNVERIFIED, "JIRA names the user with a NUL or a lone surrogate")
    author, body = record.comments.get(change.comment_id, (None, ""))
    comment = body.strip() if author is not None and author.same(recorded.author) else ""
    comment = comment[: limits.MAX_COMMENT_LENGTH]
    return recorded.author, comment if storable_text(comment) else ""


def breakpoint_for_issue(key: str, labels: tuple[str, ...]) -> str | None:
    """The breakpoint whose JIRA `created` delivery recorded this issue key.

    The issue's `bpm-<id>` label narrows the search to that breakpoint's deliveries (an
    index); the recorded key decides, so a label alone never points anywhere.
    """
    created = Delivery.objects.filter(
        channel=JIRA, event_type=EventType.CREATED, reply__key=key
    ).order_by()
    ids = [label.removeprefix(ISSUE_LABEL_PREFIX) for label in labels]
    ids = [pk for pk, label in zip(ids, labels, strict=True) if pk != label][:5]
    if ids:
        found = created.filter(breakpoint_id__in=ids).values_list("breakpoint_id", flat=True)
        if first := found.first():
            return first
    matches = list(created.values_list("breakpoint_id", flat=True).distinct()[:2])
    return matches[0] if len(matches) == 1 else None


def _reviewer(email: str) -> tuple[Any, str]:
    """(the one active user with this email, "") or (None, why not)."""
    if not email:
        return None, "JIRA sent no email address for the user (hidden in their JIRA profile?)"
    try:
        return person_with_email(email), ""
    except NoSinglePerson as exc:
        return None, str(exc)


def _already(breakpoint_id: str, user: Any, approved: bool) -> bool:
    """This user gave this very decision from JIRA already (JIRA sent it twice)."""
    return Feedback.objects.filter(
        breakpoint_id=breakpoint_id, author_user=user, via=JIRA, approved=approved
    ).exists()


def decide(change: StatusChange) -> Handled:
    """Release (or vote on) the issue's breakpoint as the JIRA user JIRA says made the
    change, or say why not."""
    breakpoint_id = breakpoint_for_issue(change.issue_key, change.labels)
    if breakpoint_id is None:
        logger.info("JIRA webhook: no breakpoint has the issue %s; ignored.", change.issue_key)
        return Handled("ignored", f"no breakpoint has the issue {change.issue_key}")
    try:
        author, comment = confirmed_by(change)
    except Unconfirmed as exc:  # the issue shows this change only if JIRA was out of reach
        undo = exc.reason == JIRA_UNREACHABLE
        return _refused(breakpoint_id, change, change.claimed, exc.reason, exc.message, undo)
    user, problem = _reviewer(author.email)
    if user is None:  # no person to ask the services about: the channel's own refusal
        return _refused(breakpoint_id, change, author, USER_NOT_MATCHED, problem, True)
    duplicate = Handled("duplicate", "this decision was recorded already", breakpoint_id)
    if _already(breakpoint_id, user, change.approved):
        return duplicate
    verb = "Approved" if change.approved else "Rejected"
    actor = Actor.for_user(user).known_as(author.who, **_details(change, author))
    try:
        _, bp = feedback_add(
            breakpoint_id=breakpoint_id,
            actor=actor,
            comment=comment or f"{verb} in JIRA {change.issue_key}",
            release=True,
            approved=change.approved,
            via=JIRA,
        )
    except NotFound:
        return Handled("ignored", "the breakpoint is gone", breakpoint_id)
    except (Forbidden, InvalidInput, InvalidState) as exc:
        if _already(breakpoint_id, user, change.approved):
            return duplicate  # a concurrent copy of this webhook won
        _log_refusal(breakpoint_id, change, author, exc.code, exc.message)  # recorded by it
        _undo_in_jira(breakpoint_id, change, author, exc.message, unconfirmed=False)
        return Handled("refused", exc.message, breakpoint_id)
    outcome = "released" if bp.status == Status.RELEASED else "voted"
    return Handled(outcome, f"{verb.lower()} by {user.get_username()}", breakpoint_id)


def _details(change: StatusChange, author: JiraUser) -> dict[str, Any]:
    """A JIRA refusal's details: the issue, the status, and who the body named when JIRA
    says someone else made the change."""
    details: dict[str, Any] = {
        "issue": change.issue_key,
        "status": change.status[:100],
        "approved": change.approved,
    }
    claimed = change.claimed
    if (claimed.account_id or claimed.name or claimed.email) and not claimed.same(author):
        details["claimed"] = claimed.who
    return details


def _refused(
    breakpoint_id: str, change: StatusChange, who: JiraUser, reason: str, message: str, undo: bool
) -> Handled:
    """The channel's own refusal (no person to ask the services about), recorded and
    logged; with `undo`, the change is undone in JIRA (written with the refusal)."""
    with transaction.atomic():
        refusal_record(
            breakpoint_id=breakpoint_id,
            via=JIRA,
            who=who.who,
            reason=reason,
            message=message,
            **_details(change, who),
        )
        if undo:
            unconfirmed = reason == JIRA_UNREACHABLE
            _undo_in_jira(breakpoint_id, change, who, message, unconfirmed=unconfirmed)
    _log_refusal(breakpoint_id, change, who, reason, message)
    return Handled("refused", message, breakpoint_id)


def _undo_in_jira(
    breakpoint_id: str, change: StatusChange, who: JiraUser, message: str, *, unconfirmed: bool
) -> None:
    """A `refused` JIRA delivery (channels.jira.issues): a comment saying why, and the issue
    moved back while it still shows this change; once per change, whatever JIRA resends."""
    created = (
        Delivery.objects.filter(
            breakpoint_id=breakpoint_id,
            channel=JIRA,
            event_type=EventType.CREATED,
            reply__key=change.issue_key,
        )
        .values_list("target", flat=True)
        .first()
    )
    project = created.get("project") if isinstance(created, dict) else None
    if (
        not project
        or Delivery.objects.filter(
            breakpoint_id=breakpoint_id,
            channel=JIRA,
            event_type=EventType.REFUSED,
            body__data__issueKey=change.issue_key,
            body__data__changelogId=change.changelog_id,
        ).exists()
    ):
        return
    data = {
        "breakpointId": breakpoint_id,
        "issueKey": change.issue_key,
        "changelogId": change.changelog_id,
        "status": change.status[:100],
        "who": who.who,
        "message": message,
        "unconfirmed": unconfirmed,
    }
    delivery_enqueue_to(
        breakpoint_id=breakpoint_id,
        target=(JIRA, {"project": project}),
        event_type=EventType.REFUSED,
        data=data,
    )


def _log_refusal(
    breakpoint_id: str, change: StatusChange, who: JiraUser, reason: str, message: str
) -> None:
    """A decision on a known breakpoint that may not be applied: logged (the audit trail
    holds its `refused` event)."""
    audit_log.warning(
        "JIRA decision on %s refused for %s: %s",
        change.issue_key,
        who.who,
        message,
        extra={"breakpoint_id": breakpoint_id, "channel": "jira", "reason": reason},
    )
