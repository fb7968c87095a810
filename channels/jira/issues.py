"""The JIRA channel: an issue per audit-required breakpoint, a comment per feedback, and
the outcome as a comment plus a transition (JIRA_DONE_TRANSITION or JIRA_WONT_DO_TRANSITION);
a decision made in JIRA and refused, undone there (a comment, then JIRA_REFUSED_TRANSITION);
and the issue's changelog, read to learn who made a status change (issue_record_get).

JIRA REST v2 at settings.JIRA_URL, operator configuration rather than user input: plain
httpx, short timeouts, no redirects. Basic auth JIRA_USER / JIRA_TOKEN (a token without
a user is sent as a bearer token: Data Center personal access tokens). Text from agents
and reviewers goes into {noformat} blocks, so JIRA's wiki markup never interprets it.

Retries come from the outbox; each step is safe to repeat: a retried creation first
looks the issue up by its `bpm-<breakpoint id>` label (an answer lost after JIRA
created it must not make a second issue), and an outcome whose comment went out
records that in the delivery's reply, so the retry only transitions.
"""

import re
from dataclasses import replace
from typing import Any
from urllib.parse import quote

import httpx
from django.conf import settings

from audit.models import EventType
from breakpoints.answers.outcome import Outcome, outcome_of
from breakpoints.models import Breakpoint, Feedback
from breakpoints.payload.form_schema import has_form
from breakpoints.representation.contract import console_url
from channels.jira import JIRA
from channels.jira.changelog import CHANGELOG_QUERY, IssueRecord, issue_record
from core.choices import Status
from core.fileformats import file_format
from core.naming import display_name
from notifications.base import Sent, retry_after_seconds
from notifications.models import Delivery, DeliveryStatus

API = "/rest/api/2"
TIMEOUT = httpx.Timeout(10.0, connect=5.0)
ISSUE_LABEL_PREFIX = "bpm-"  # + the breakpoint id: finds the issue again (and the webhook)
SUMMARY_MAX = 255
QUESTION_MAX = 10_000  # with the rest, a description stays under JIRA's 32,767 characters
EXCERPT_MAX = 2_000
EXCERPTS_MAX = 5
TAGS_TEXT_MAX = 2_000
LABEL_MAX = 255
RETRYABLE_STATUSES = frozenset({408, 429})
OUTCOMES = frozenset({EventType.RELEASED, EventType.EXPIRED, EventType.CANCELLED})
NOT_CREATED = "issue not created yet"


class JiraError(Exception):
    """A step failed; `sent` is what the attempt records."""

    def __init__(self, sent: Sent):
        super().__init__(sent.error)
        self.sent = sent


def send(delivery: Delivery) -> Sent:
    """One attempt of a JIRA delivery: create, comment, or comment and transition."""
    project = str(delivery.target.get("project") or "")
    try:
        if delivery.event_type == EventType.CREATED:
            with _client() as client:
                return _create(client, delivery, project)
        if delivery.event_type == EventType.REFUSED:
            with _client() as client:
                return _turn_back(client, delivery)
        if delivery.event_type not in OUTCOMES | {EventType.FEEDBACK}:
            return Sent(error=f"JIRA has nothing to do on {delivery.event_type}", retryable=False)
        key = _issue_key(delivery, project)
        with _client() as client:
            if delivery.event_type == EventType.FEEDBACK:
                return _comment_feedback(client, delivery, key)
            return _close(client, delivery, key)
    except JiraError as exc:
        return exc.sent


def issue_record_get(key: str) -> IssueRecord:
    """The issue's status, comments and changelog, as JIRA answers the service account;
    raises JiraError (retryable when JIRA could not be reached or failed)."""
    with _client() as client:
        return _issue_record(client, key)


def _issue_record(client: httpx.Client, key: str) -> IssueRecord:
    _, answer = _call(client, "GET", _issue_path(key), params=CHANGELOG_QUERY)
    return issue_record(answer)


# --- HTTP ------------------------------------------------------------------------------


def _client() -> httpx.Client:
    headers = {"accept": "application/json", "user-agent": "BreakpointManager-JIRA/1.0"}
    auth = None
    if settings.JIRA_USER:
        auth = httpx.BasicAuth(settings.JIRA_USER, settings.JIRA_TOKEN)
    elif settings.JIRA_TOKEN:
        headers["authorization"] = f"Bearer {settings.JIRA_TOKEN}"
    return httpx.Client(
        base_url=settings.JIRA_URL.rstrip("/"),
        auth=auth,
        headers=headers,
        timeout=TIMEOUT,
        follow_redirects=False,
    )


def _call(
    client: httpx.Client, method: str, path: str, *, json: Any = None, params: Any = None
) -> tuple[int, Any]:
    """(status, JSON) of a 2xx answer; raises JiraError otherwise, retryable or not."""
    try:
        response = client.request(method, API + path, json=json, params=params)
    except httpx.HTTPError as exc:
        error = _scrubbed(f"JIRA unreachable: {type(exc).__name__}: {exc}")
        raise JiraError(Sent(error=error)) from None
    code = response.status_code
    if 200 <= code < 300:
        try:
            return code, response.json() if response.content else None
        except ValueError:
            return code, None
    retryable = code >= 500 or code in RETRYABLE_STATUSES
    error = f"JIRA answered HTTP {code} to {method} {API}{path}"
    if 300 <= code < 400:
        error += " (a redirect: redirects are not followed; check JIRA_URL)"
    details = _jira_messages(response)
    error += f": {details}" if details else ""
    retry_after = retry_after_seconds(response.headers.get("retry-after")) if retryable else None
    raise JiraError(Sent(code, _scrubbed(error), retryable=retryable, retry_after=retry_after))


def _jira_messages(response: httpx.Response) -> str:
    """JIRA's errorMessages and field errors, never a page of HTML."""
    try:
        body = response.json()
    except ValueError:
        return ""
    if not isinstance(body, dict):
        return ""
    messages = [str(m) for m in body.get("errorMessages") or [] if m]
    errors = body.get("errors")
    if isinstance(errors, dict):
        messages += [f"{name}: {text}" for name, text in errors.items()]
    return "; ".join(messages)[:1000]


def _scrubbed(text: str) -> str:
    for secret in (settings.JIRA_TOKEN,):
        if secret:
            text = text.replace(secret, "[redacted]")
    return text


def _issue_path(key: str, tail: str = "") -> str:
    return f"/issue/{quote(key, safe='')}{tail}"


# --- the steps -----------------------------------------------------------------------


def _create(client: httpx.Client, delivery: Delivery, project: str) -> Sent:
    """Create the issue, unless an earlier attempt did (lost answer) or a resend repeats it."""
    if delivery.reply.get("key"):
        return Sent(reply={"key": delivery.reply["key"]})
    data = delivery.body["data"]
    label = ISSUE_LABEL_PREFIX + str(data["breakpointId"])
    if delivery.attempts > 1:
        jql = f"project = {_jql_string(project)} AND labels = {_jql_string(label)}"
        _, found = _call(client, "GET", "/search", params={"jql": jql, "fields": "key"})
        issues = found.get("issues") if isinstance(found, dict) else None
        if issues and isinstance(issues[0], dict) and issues[0].get("key"):
            return Sent(200, reply={"key": str(issues[0]["key"])})
    fields = {
        "project": {"key": project},
        "issuetype": {"name": "Task"},
        "summary": _summary(data),
        "description": _description(data),
        "labels": _labels(data.get("tags") or [], label),
    }
    status, created = _call(client, "POST", "/issue", json={"fields": fields})
    key = created.get("key") if isinstance(created, dict) else None
    if not isinstance(key, str) or not key:
        return Sent(status, "JIRA created the issue but answered no key", retryable=False)
    return Sent(status, reply={"key": key})


def _issue_key(delivery: Delivery, project: str) -> str:
    """The key the `created` delivery of this breakpoint and project recorded."""
    created = (
        Delivery.objects.filter(
            breakpoint_id=delivery.breakpoint_id,
            channel=JIRA,
            event_type=EventType.CREATED,
            target__project=project,
        )
        .order_by("created_at")
        .values_list("status", "reply")
        .first()
    )
    if created is not None and (created[1] or {}).get("key"):
        return str(created[1]["key"])
    if created is not None and created[0] == DeliveryStatus.FAILED:
        raise JiraError(Sent(error=f"the {project} issue was never created", retryable=False))
    raise JiraError(Sent(error=NOT_CREATED))


def _comment_feedback(client: httpx.Client, delivery: Delivery, key: str) -> Sent:
    """The newest feedback of the breakpoint as it was then, as a comment."""
    entries = delivery.body["data"].get("feedback") or []
    latest = entries[-1] if entries and isinstance(entries[-1], dict) else {}
    comment = str(latest.get("comment") or "")
    if not comment.strip():
        return Sent(reply={"key": key, "skipped": "no comment to post"})
    feedback_id = str(latest.get("id") or "")
    if feedback_id.isdigit() and Feedback.objects.filter(pk=feedback_id, via=JIRA).exists():
        return Sent(reply={"key": key, "skipped": "given in JIRA"})  # JIRA shows it already
    body = "Feedback in the Breakpoint Manager:\n" + _block(f"{latest.get('author')}: {comment}")
    status, _ = _call(client, "POST", _issue_path(key, "/comment"), json={"body": body})
    return Sent(status, reply={"key": key})


def _close(client: httpx.Client, delivery: Delivery, key: str) -> Sent:
    """The outcome as a comment (once), then the transition by its configured name."""
    if delivery.reply.get("transition"):
        return Sent(reply={"key": key})  # a resend of a finished outcome: nothing left to do
    data = delivery.body["data"]
    outcome = outcome_of(data.get("status"), data.get("result"))
    approved = delivery.event_type == EventType.RELEASED and outcome.approved
    name = settings.JIRA_DONE_TRANSITION if approved else settings.JIRA_WONT_DO_TRANSITION
    progress: dict[str, Any] = {"key": key}
    try:
        if not delivery.reply.get("commented"):
            text = _outcome_text(delivery.event_type, approved, outcome)
            _call(client, "POST", _issue_path(key, "/comment"), json={"body": text})
        progress["commented"] = True
        status = _transition(client, key, name)
    except JiraError as exc:
        return replace(exc.sent, reply=progress)
    return Sent(status, reply={**progress, "transition": name})


def _turn_back(client: httpx.Client, delivery: Delivery) -> Sent:
    """A decision made in JIRA and refused, undone there: a comment saying why (once), then
    JIRA_REFUSED_TRANSITION, but only while the refused change is what the issue shows and
    the breakpoint still waits (decided elsewhere, its outcome's transition follows)."""
    if delivery.reply.get("transition") or delivery.reply.get("skipped"):
        return Sent(reply=delivery.reply)  # a resend of a finished undo: nothing left to do
    data = delivery.body["data"]
    key = str(data["issueKey"])
    progress: dict[str, Any] = {"key": key}
    name = settings.JIRA_REFUSED_TRANSITION
    try:
        if not delivery.reply.get("commented"):
            text = _refusal_text(data)
            _call(client, "POST", _issue_path(key, "/comment"), json={"body": text})
        progress["commented"] = True
        waiting = Breakpoint.objects.filter(
            pk=delivery.breakpoint_id, status=Status.WAITING
        ).exists()
        if not waiting or not _issue_record(client, key).shows(str(data.get("changelogId"))):
            return Sent(200, reply={**progress, "skipped": "the issue shows another change"})
        status = _transition(client, key, name)
    except JiraError as exc:
        return replace(exc.sent, reply=progress)
    return Sent(status, reply={**progress, "transition": name})


def _transition(client: httpx.Client, key: str, name: str) -> int:
    _, answer = _call(client, "GET", _issue_path(key, "/transitions"))
    listed = answer.get("transitions") if isinstance(answer, dict) else None
    offered = [t for t in listed or [] if isinstance(t, dict)]
    chosen = next(
        (t for t in offered if str(t.get("name", "")).casefold() == name.casefold()), None
    )
    if chosen is None:
        available = ", ".join(str(t.get("name")) for t in offered) or "none"
        raise JiraError(
            Sent(
                200,
                f"JIRA offers no transition named {name!r} on {key} (available: {available}); "
                "set JIRA_DONE_TRANSITION / JIRA_WONT_DO_TRANSITION / "
                "JIRA_REFUSED_TRANSITION to one of them",
                retryable=False,
            )
        )
    body = {"transition": {"id": str(chosen.get("id"))}}
    status, _ = _call(client, "POST", _issue_path(key, "/transitions"), json=body)
    return status


# --- texts ----------------------------------------------------------------------------


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _one_line(text: Any) -> str:
    return " ".join(str(text or "").split())


def _cut(text: str, limit: int) -> str:
    return (
        text if len(text) <= limit else f"{text[:limit]}\n… ({len(text) - limit} more characters)"
    )


def _block(text: str) -> str:
    """Text shown as is: a {noformat} block that the text itself cannot close."""
    text = re.sub(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]", "", text)
    text = re.sub(r"\{(noformat)", r"{ \1", text, flags=re.IGNORECASE)
    return "{noformat}\n" + text + "\n{noformat}"


def _jql_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _summary(data: dict[str, Any]) -> str:
    summary = display_name(data)
    return summary if len(summary) <= SUMMARY_MAX else summary[: SUMMARY_MAX - 1] + "…"


def _labels(tags: list[Any], id_label: str) -> list[str]:
    """Tags as JIRA labels (no whitespace, at most 255 characters), then the id label."""
    labels = [re.sub(r"\s+", "-", str(tag).strip())[:LABEL_MAX] for tag in tags]
    return list(dict.fromkeys(label for label in [*labels, id_label] if label))


FORM_NOTE = (
    "The agent asks for values (a form): approving here approves its proposal as it is. "
    "To edit the values, decide in the console."
)


def _description(data: dict[str, Any]) -> str:
    payload = _mapping(data.get("payload"))
    tags = ", ".join(str(tag) for tag in data.get("tags") or []) or "(none)"
    details = "\n".join(
        [
            f"Title: {_one_line(data.get('title'))}",
            f"Key: {_one_line(data.get('key'))}",
            f"Agent: {_one_line(data.get('agentId'))}, run {_one_line(data.get('runId')) or '-'}",
            f"Tags: {_cut(tags, TAGS_TEXT_MAX)}",
            f"Expires: {data.get('expiresAt') or 'never'}",
            "",
            "Question:",
            _cut(str(data.get("question") or ""), QUESTION_MAX),
        ]
    )
    parts = [
        f"Breakpoint {data['breakpointId']} needs a decision in the Breakpoint Manager.",
        f"Review and decide in the console: [{console_url(str(data['breakpointId']))}]",
        "",
        _block(details),
    ]
    if has_form(payload):
        parts[2:2] = [FORM_NOTE]
    parts += _excerpts(payload)
    return "\n".join(parts)


def _excerpts(payload: dict[str, Any]) -> list[str]:
    context = _mapping(payload.get("context"))
    files = [f for f in context.get("files") or [] if isinstance(f, dict) and f.get("content")]
    if not files:
        return []
    parts = ["", f"h3. Context files ({len(files)})"]
    for item in files[:EXCERPTS_MAX]:
        header = f"{_one_line(item.get('path'))[:1000]} ({file_format(item)[0]})"
        parts.append(_block(f"{header}\n\n{_cut(str(item['content']), EXCERPT_MAX)}"))
    if len(files) > EXCERPTS_MAX:
        parts.append(f"… and {len(files) - EXCERPTS_MAX} more in the console.")
    return parts


def _outcome_text(event_type: str, approved: bool, outcome: Outcome) -> str:
    if event_type == EventType.RELEASED:
        headline = "approved" if approved else "rejected"
    else:
        headline = str(event_type)
    lines = [f"By: {_one_line(outcome.by) or '-'}"]
    if outcome.option:
        lines.append(f"Option: {_one_line(outcome.option)}")
    lines.append(f"Feedback: {_cut(outcome.feedback, QUESTION_MAX)}")
    return f"The breakpoint was {headline} in the Breakpoint Manager.\n" + _block("\n".join(lines))


def _refusal_text(data: dict[str, Any]) -> str:
    """Why a status change made in JIRA decided nothing, for the people watching the issue."""
    status = _one_line(data.get("status"))
    if data.get("unconfirmed"):
        headline = (
            f"{status} could not be confirmed with JIRA when the Breakpoint Manager received "
            "it, so it decided nothing. To decide, move the issue again."
        )
    else:
        headline = (
            f"{status} by {_one_line(data.get('who'))} was refused in the Breakpoint "
            "Manager: the breakpoint was not decided by it."
        )
    return f"{headline}\n" + _block(str(data.get("message") or ""))
