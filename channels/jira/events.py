"""What an authentic JIRA webhook means, and the decision it gives.

A `jira:issue_updated` event whose changelog moves the status to JIRA_APPROVED_STATUS or
JIRA_REJECTED_STATUS, on an issue the JIRA channel created, releases that issue's
breakpoint: the JIRA user (by `user.emailAddress`) must be exactly one active user
(accounts.people.person_with_email), and feedback_add checks the rest (reviewer role,
routed seats, still waiting). Everything else is ignored. A refusal on a known breakpoint
is audited (REFUSED): by feedback_add for its own, here for a user not matched.
"""

import logging
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from accounts.people import NoSinglePerson, person_with_email
from audit.models import EventType
from audit.services import refusal_record
from breakpoints.models import Feedback
from breakpoints.services import feedback_add
from channels.jira.issues import ISSUE_LABEL_PREFIX
from core import limits
from core.actors import Actor
from core.choices import Channel, Status, Via
from core.exceptions import Forbidden, InvalidInput, InvalidState, NotFound
from core.storable import storable_text
from notifications.models import Delivery

ISSUE_UPDATED = "jira:issue_updated"
MAX_KEY_LENGTH = 255
MAX_LABELS = 100
audit_log = logging.getLogger("breakpoints.audit")
USER_NOT_MATCHED = "user_not_matched"  # no one active user has the JIRA user's email
logger = logging.getLogger(__name__)


class Ignored(Exception):
    """Nothing to decide: another event, another status, no issue key."""


class Malformed(Exception):
    """Text no database can hold (NUL, a lone surrogate) where we read: a 400, not retried."""


@dataclass(frozen=True)
class StatusChange:
    issue_key: str
    status: str
    approved: bool
    email: str
    who: str  # the JIRA user as the audit trail names them: email, else account id
    comment: str
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
    user = _dict(payload.get("user"))
    email = _text(user.get("emailAddress"))
    change = StatusChange(
        issue_key=key,
        status=status,
        approved=verdicts[status.casefold()],
        email=email,
        who=(email or _text(user.get("accountId")) or _text(user.get("name")) or "?")[:150],
        comment=_comment(payload, email),
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
        ("email", change.email),
        ("user", change.who),
        ("comment", change.comment),
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


def _comment(payload: dict[str, Any], email: str) -> str:
    """The comment given with the transition, when it is plain text by the same user."""
    comment = _dict(payload.get("comment"))
    body = comment.get("body")
    author = _text(_dict(comment.get("author")).get("emailAddress"))
    if not isinstance(body, str) or not body.strip():
        return ""
    if author and author.casefold() != email.casefold():
        return ""
    return body.strip()[: limits.MAX_COMMENT_LENGTH]


def breakpoint_for_issue(key: str, labels: tuple[str, ...]) -> str | None:
    """The breakpoint whose JIRA `created` delivery recorded this issue key.

    The issue's `bpm-<id>` label narrows the search to that breakpoint's deliveries (an
    index); the recorded key decides, so a label alone never points anywhere.
    """
    created = Delivery.objects.filter(
        channel=Channel.JIRA, event_type=EventType.CREATED, reply__key=key
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
        breakpoint_id=breakpoint_id, author_user=user, via=Via.JIRA, approved=approved
    ).exists()


def decide(change: StatusChange) -> Handled:
    """Release (or vote on) the issue's breakpoint as the JIRA user, or say why not."""
    breakpoint_id = breakpoint_for_issue(change.issue_key, change.labels)
    if breakpoint_id is None:
        logger.info("JIRA webhook: no breakpoint has the issue %s; ignored.", change.issue_key)
        return Handled("ignored", f"no breakpoint has the issue {change.issue_key}")
    user, problem = _reviewer(change.email)
    if user is None:  # no person to ask the services about: the channel's own refusal
        refusal_record(
            breakpoint_id=breakpoint_id,
            via=Via.JIRA,
            who=change.who,
            reason=USER_NOT_MATCHED,
            message=problem,
            issue=change.issue_key,
            status=change.status[:100],
            approved=change.approved,
        )
        _log_refusal(breakpoint_id, change, USER_NOT_MATCHED, problem)
        return Handled("refused", problem, breakpoint_id)
    duplicate = Handled("duplicate", "this decision was recorded already", breakpoint_id)
    if _already(breakpoint_id, user, change.approved):
        return duplicate
    verb = "Approved" if change.approved else "Rejected"
    actor = Actor.for_user(user).known_as(
        change.who, issue=change.issue_key, status=change.status[:100], approved=change.approved
    )
    try:
        _, bp = feedback_add(
            breakpoint_id=breakpoint_id,
            actor=actor,
            comment=change.comment or f"{verb} in JIRA {change.issue_key}",
            release=True,
            approved=change.approved,
            via=Via.JIRA,
        )
    except NotFound:
        return Handled("ignored", "the breakpoint is gone", breakpoint_id)
    except (Forbidden, InvalidInput, InvalidState) as exc:
        if _already(breakpoint_id, user, change.approved):
            return duplicate  # a concurrent copy of this webhook won
        _log_refusal(breakpoint_id, change, exc.code, exc.message)  # the service recorded it
        return Handled("refused", exc.message, breakpoint_id)
    outcome = "released" if bp.status == Status.RELEASED else "voted"
    return Handled(outcome, f"{verb.lower()} by {user.get_username()}", breakpoint_id)


def _log_refusal(breakpoint_id: str, change: StatusChange, reason: str, message: str) -> None:
    """An authentic decision on a known breakpoint that may not be applied: logged (the
    audit trail holds its `refused` event)."""
    audit_log.warning(
        "JIRA decision on %s refused for %s: %s",
        change.issue_key,
        change.who,
        message,
        extra={"breakpoint_id": breakpoint_id, "channel": "jira", "reason": reason},
    )
