"""Adaptive Cards for a breakpoint in Teams, from a delivery's contract JSON.

Everything an agent sent is untrusted. Teams reads a TextBlock's text (and a FactSet's)
as markdown and expands {{DATE(...)}} in it, so no text of the agent's goes there: all of
it is a TextRun of a RichTextBlock, which is shown as written, with "{{" broken up so no
function can be smuggled in either; it is cut to a length, visibly. Buttons are
Action.Execute with a verb (approve, reject, option) and the breakpoint id in their data;
the comment box and the options' choice are inputs Teams merges into that data. The
messaging endpoint treats all of it as untrusted too.
"""

from datetime import datetime
from typing import Any

from audit.models import EventType
from breakpoints.answers.outcome import outcome_of
from breakpoints.payload.form_schema import has_form
from breakpoints.payload.validation import payload_options
from breakpoints.representation.contract import console_url
from core import fileformats, limits
from core.naming import display_name

CONTENT_TYPE = "application/vnd.microsoft.card.adaptive"
VERSION = "1.4"
APPROVE, REJECT, OPTION = "approve", "reject", "option"
COMMENT_INPUT, OPTION_INPUT = "comment", "option"
TITLE_MAX, TEXT_MAX, FACT_MAX, BUTTON_MAX = 200, 3000, 500, 60
FILES_SHOWN, FILE_LINES, FILE_CHARS = 5, 8, 1500
FEEDBACK_MAX = 2400
MORE = "… (cut: the console shows it all)"
BANNERS: dict[str, str] = {
    EventType.REMINDER: "Reminder: this breakpoint still waits for a decision.",
    EventType.ESCALATED: "Escalated: nobody decided in time; it is yours now.",
}

Element = dict[str, Any]


def literal(text: Any, limit: int = TEXT_MAX) -> str:
    """Text shown as written (a TextRun is no markdown; "{{" would start a function), at
    most `limit` characters; a cut says so."""
    value = str(text).replace("{{", "{\u200b{")
    return value if len(value) <= limit else value[: limit - len(MORE)] + MORE


def one_line(text: Any, limit: int) -> str:
    """A button's or a title's text: one line, at most `limit` characters."""
    flat = " ".join(str(text).split()).replace("{{", "{\u200b{")
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def run(text: str, **style: Any) -> Element:
    return {"type": "TextRun", "text": text, **style}


def rich(*runs: Element, **extra: Any) -> Element:
    """A RichTextBlock: its runs are never read as markdown."""
    return {"type": "RichTextBlock", "inlines": list(runs), **extra}


def card(body: list[Element], actions: list[Element] | None = None) -> Element:
    content: Element = {
        "type": "AdaptiveCard",
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "version": VERSION,
        "body": body,
        "msteams": {"width": "Full"},
    }
    if actions:
        content["actions"] = actions
    return content


def attachment(content: Element) -> Element:
    """The card as an activity's attachment."""
    return {"contentType": CONTENT_TYPE, "content": content}


def _title(data: dict[str, Any]) -> Element:
    return rich(run(one_line(display_name(data), TITLE_MAX), size="Large", weight="Bolder"))


def _parsed(value: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(value)) if value else None
    except ValueError:
        return None


def time_left(expires_at: Any, now: datetime) -> str:
    """ "3h 12m left (until 2025-05-01 14:00 UTC)", "overdue", or "no deadline"."""
    deadline = _parsed(expires_at)
    if deadline is None:
        return "no deadline"
    seconds = int((deadline - now).total_seconds())
    if seconds <= 0:
        return "overdue"
    days, rest = divmod(seconds, 86400)
    hours, minutes = rest // 3600, rest % 3600 // 60
    parts = [f"{days}d"] * bool(days) + [f"{hours}h"] * bool(hours)
    parts += [f"{minutes}m"] * bool(minutes and not days)
    until = deadline.strftime("%Y-%m-%d %H:%M %Z").strip()
    return f"{' '.join(parts) or 'under 1m'} left (until {until})"


def _facts(data: dict[str, Any], now: datetime) -> list[Element]:
    tags = ", ".join(str(tag) for tag in data.get("tags") or [])
    experts = ", ".join(
        str(seat.get("name")) for seat in data.get("experts") or [] if isinstance(seat, dict)
    )
    pairs = [
        ("Agent", data.get("agentId") or "?"),
        ("Run", data.get("runId") or "—"),
        ("Time left", time_left(data.get("expiresAt"), now)),
        ("Tags", tags or "—"),
    ]
    if experts:
        pairs.append(("Routed to", experts))
    return [
        rich(run(f"{name}: ", weight="Bolder"), run(literal(value, FACT_MAX)), spacing="None")
        for name, value in pairs
    ]


def _files(data: dict[str, Any]) -> list[Element]:
    context = (data.get("payload") or {}).get("context")
    files = context.get("files") if isinstance(context, dict) else None
    if not isinstance(files, list):
        return []
    shown: list[Element] = []
    for item in [f for f in files if isinstance(f, dict)][:FILES_SHOWN]:
        file_format, language = fileformats.file_format(item)
        heading = f"{one_line(item.get('path') or '?', 300)} ({language or file_format})"
        content = item.get("content")
        if isinstance(content, str) and content.strip():
            lines = content.splitlines()
            excerpt = literal("\n".join(lines[:FILE_LINES]), FILE_CHARS)
            excerpt += "\n…" if len(lines) > FILE_LINES else ""
            body = run(excerpt, fontType="Monospace")
        else:
            body = run("(no content sent)", italic=True)
        shown += [rich(run(heading, weight="Bolder"), separator=True), rich(body)]
    if len(files) > FILES_SHOWN:
        shown.append(rich(run(f"+{len(files) - FILES_SHOWN} more file(s) in the console.")))
    return shown


def _execute(title: str, verb: str, pk: str, **extra: Any) -> Element:
    return {
        "type": "Action.Execute",
        "title": one_line(title, BUTTON_MAX),
        "verb": verb,
        "data": {"breakpointId": pk},
        **extra,
    }


def _console(pk: str) -> Element:
    return {"type": "Action.OpenUrl", "title": "Open in the console", "url": console_url(pk)}


def _decision_parts(data: dict[str, Any]) -> tuple[list[Element], list[Element]]:
    """(body, actions) that decide: the comment box, the options' choice, the buttons."""
    pk, payload = str(data.get("breakpointId")), data.get("payload") or {}
    answered = has_form(payload)
    body: list[Element] = []
    if answered:
        body.append(rich(run("The agent's form can be edited in the console.", italic=True)))
    body.append(
        {
            "type": "Input.Text",
            "id": COMMENT_INPUT,
            "isMultiline": True,
            "maxLength": limits.MAX_COMMENT_LENGTH,
            "placeholder": "Feedback for the agent (optional)",
        }
    )
    actions = [
        _execute("Approve as proposed" if answered else "Approve", APPROVE, pk, style="positive"),
        _execute("Reject", REJECT, pk, style="destructive"),
    ]
    labels = payload_options(payload)
    if labels:
        choices = [
            {"title": one_line(label, BUTTON_MAX), "value": str(index)}
            for index, label in enumerate(labels)
        ]
        body.append(
            {
                "type": "Input.ChoiceSet",
                "id": OPTION_INPUT,
                "choices": choices,
                "placeholder": "Or choose one of the agent's options",
            }
        )
        actions.append(_execute("Choose the option", OPTION, pk))
    return body, [*actions, _console(pk)]


def announcement(
    data: dict[str, Any], event_type: str, now: datetime, *, notice: str = ""
) -> Element:
    """The card of a created/reminder/escalated breakpoint, buttons included; `notice`
    (a refusal, a recorded vote) on top when it answers a button press."""
    body = [_title(data)]
    if notice:
        body.append(rich(run(literal(notice, 1000), color="Attention", weight="Bolder")))
    if event_type in BANNERS:
        body.append(rich(run(BANNERS[event_type], color="Warning", weight="Bolder")))
    question = data.get("question")
    body.append(rich(run(literal(question)) if question else run("(no question)", italic=True)))
    body += _facts(data, now)
    body += _files(data)
    inputs, actions = _decision_parts(data)
    return card([*body, *inputs], actions)


def nudge(data: dict[str, Any], event_type: str, now: datetime) -> Element:
    """A reminder or escalation as a reply to the card that has the buttons."""
    left = time_left(data.get("expiresAt"), now)
    body = [
        rich(run(BANNERS.get(event_type, ""), weight="Bolder")),
        rich(run(f"{left[:1].upper()}{left[1:]}.")),
    ]
    return card(body, [_console(str(data.get("breakpointId")))])


def decision_runs(data: dict[str, Any], event_type: str) -> list[Element]:
    """ "Approved by alice (option Ship)", "Expired", "Cancelled by bob"."""
    outcome = outcome_of(data.get("status"), data.get("result"))
    who = literal(", ".join(outcome.responders) or "?", 500)
    if event_type == EventType.RELEASED:
        verdict = "Approved" if outcome.approved else "Rejected"
        color = "Good" if outcome.approved else "Attention"
        runs = [run(verdict, weight="Bolder", color=color), run(f" by {who}")]
        if outcome.option:
            runs.append(run(f" (option {one_line(outcome.option, 300)})"))
        return runs
    if event_type == EventType.EXPIRED:
        return [run("Expired", weight="Bolder"), run(f" ({who})")]
    return [run("Cancelled", weight="Bolder"), run(f" by {who}")]


def outcome(data: dict[str, Any], event_type: str, *, notice: str = "") -> Element:
    """The card of a decided breakpoint: the decision, who made it, no buttons."""
    body = [_title(data)]
    if notice:
        body.append(rich(run(literal(notice, 1000), weight="Bolder")))
    body.append(rich(*decision_runs(data, event_type)))
    feedback = outcome_of(data.get("status"), data.get("result")).feedback.strip()
    if feedback:
        body.append(rich(run(literal(feedback, FEEDBACK_MAX), italic=True)))
    if data.get("question"):
        body.append(rich(run(literal(data["question"], 500), isSubtle=True)))
    return card(body, [_console(str(data.get("breakpointId")))])


def message(text: str) -> Element:
    """A card that only says something (an answer to a press on no known breakpoint)."""
    return card([rich(run(literal(text, 1000)))])
