"""An issue's status changes and comments as JIRA itself records them: who made a change is
read here, never from a webhook's body.

JIRA answers `GET /rest/api/2/issue/{key}?expand=changelog&fields=status,comment` (Cloud
and Data Center alike) with the issue's status, its comments and its changelog: histories,
each with an id (the webhook's `changelog.id`), an author and the fields it changed.
"""

from dataclasses import dataclass
from typing import Any

CHANGELOG_QUERY = {"expand": "changelog", "fields": "status,comment"}


@dataclass(frozen=True)
class JiraUser:
    """A JIRA user as JIRA names them: Cloud's accountId, Data Center's name, an email
    address when the user's profile shows it."""

    account_id: str = ""
    name: str = ""
    email: str = ""

    @property
    def who(self) -> str:
        """How the audit trail names them: email, else account id, else name."""
        return (self.email or self.account_id or self.name or "?")[:150]

    def same(self, other: "JiraUser") -> bool:
        """Whether both name the same JIRA user (by the first identifier both have)."""
        for mine, theirs in (
            (self.account_id, other.account_id),
            (self.name, other.name),
            (self.email.casefold(), other.email.casefold()),
        ):
            if mine and theirs:
                return mine == theirs
        return False


@dataclass(frozen=True)
class RecordedChange:
    """A history of the changelog that changed the status."""

    id: str
    author: JiraUser
    to_status: str


@dataclass(frozen=True)
class IssueRecord:
    status: str
    changes: tuple[RecordedChange, ...]  # status changes, oldest (lowest id) first
    comments: dict[str, tuple[JiraUser, str]]  # id -> (author, body)

    def change(self, changelog_id: str) -> RecordedChange | None:
        return next((c for c in self.changes if c.id == changelog_id), None)

    def latest(self) -> RecordedChange | None:
        return self.changes[-1] if self.changes else None

    def shows(self, changelog_id: str) -> bool:
        """Whether this change is the issue's latest status change and the issue still
        shows the status it set: what a person sees in JIRA is that change."""
        latest = self.latest()
        return (
            latest is not None
            and latest.id == changelog_id
            and latest.to_status.casefold() == self.status.casefold()
        )


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _text(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value.strip() if isinstance(value, str) else ""


def jira_user(value: Any) -> JiraUser:
    user = _dict(value)
    return JiraUser(
        account_id=_text(user.get("accountId")),
        name=_text(user.get("name")) or _text(user.get("key")),
        email=_text(user.get("emailAddress")),
    )


def _status_set(history: dict[str, Any]) -> str:
    """The status a history moved the issue to, or "" when it changed no status."""
    for item in _list(history.get("items")):
        item = _dict(item)
        if "status" in (item.get("fieldId"), item.get("field")) and _text(item.get("toString")):
            return _text(item.get("toString"))
    return ""


def _order(changelog_id: str) -> tuple[int, str]:
    """JIRA's history ids grow: numeric order, whatever order the page came in."""
    return (int(changelog_id), "") if changelog_id.isdigit() else (-1, changelog_id)


def issue_record(answer: Any) -> IssueRecord:
    """The record in JIRA's answer to CHANGELOG_QUERY (whatever it holds, never raises)."""
    fields = _dict(_dict(answer).get("fields"))
    changes = []
    for history in _list(_dict(_dict(answer).get("changelog")).get("histories")):
        history = _dict(history)
        to_status, changelog_id = _status_set(history), _text(history.get("id"))
        if to_status and changelog_id:
            changes.append(
                RecordedChange(changelog_id, jira_user(history.get("author")), to_status)
            )
    comments = {}
    for comment in _list(_dict(fields.get("comment")).get("comments")):
        comment = _dict(comment)
        body = comment.get("body")
        if _text(comment.get("id")) and isinstance(body, str):
            comments[_text(comment.get("id"))] = (jira_user(comment.get("author")), body)
    return IssueRecord(
        status=_text(_dict(fields.get("status")).get("name")),
        changes=tuple(sorted(changes, key=lambda change: _order(change.id))),
        comments=comments,
    )
