"""Slack messages for a breakpoint (Block Kit), from a delivery's contract JSON.

Everything an agent sent is untrusted: it is escaped for mrkdwn (&, <, >, so no mention,
link or broadcast can be smuggled in) and cut to Slack's limits, visibly. Buttons carry
the breakpoint id as `value`; the interactions endpoint treats it as untrusted too.
"""

from datetime import datetime
from typing import Any

from audit.models import EventType
from breakpoints.answers.outcome import outcome_of
from breakpoints.payload.form_schema import has_form
from breakpoints.payload.validation import payload_options
from breakpoints.representation.contract import console_url
from channels.slack import modals
from core import fileformats
from core.naming import display_name

APPROVE, REJECT, CONSOLE, EDIT = "bpm_approve", "bpm_reject", "bpm_console", "bpm_edit"
OPTION_PREFIX = "bpm_option_"  # + the option's index in payload.options
REJECT_MODAL, FEEDBACK_BLOCK, FEEDBACK_INPUT = "bpm_reject", "bpm_feedback", "text"
SECTION_MAX = 3000  # characters of a section's text
FIELD_MAX = 2000  # characters of one section field
HEADER_MAX = 150
BUTTON_MAX = 75
FALLBACK_MAX = 300  # the notification text
FILES_SHOWN, FILE_LINES, FILE_CHARS = 5, 8, 1500  # files, lines, escaped characters
MORE = "… (cut: the console shows it all)"
_ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
BANNERS: dict[str, str] = {
    EventType.REMINDER: ":alarm_clock: *Reminder*: this breakpoint still waits for a decision.",
    EventType.ESCALATED: ":rotating_light: *Escalated*: nobody decided in time; it is yours now.",
}

LABELS: dict[str, str] = {EventType.REMINDER: "Reminder: ", EventType.ESCALATED: "Escalated: "}

Block = dict[str, Any]


def escape(text: Any) -> str:
    """Text as mrkdwn shows it literally."""
    return "".join(_ESCAPES.get(char, char) for char in str(text))


def mrkdwn(text: Any, limit: int = SECTION_MAX) -> str:
    """Escaped and at most `limit` characters; a cut says so."""
    escaped = escape(text)
    if len(escaped) <= limit:
        return escaped
    kept, used, budget = [], 0, limit - len(MORE)
    for char in str(text):
        piece = _ESCAPES.get(char, char)
        if used + len(piece) > budget:
            break
        kept.append(piece)
        used += len(piece)
    return "".join(kept) + MORE


def plain(text: Any, limit: int) -> str:
    """plain_text (never parsed as mrkdwn), on one line, at most `limit` characters."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _section(text: str) -> Block:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def _context(text: str) -> Block:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": text}]}


def _header(data: dict[str, Any]) -> Block:
    title = display_name(data)
    return {"type": "header", "text": {"type": "plain_text", "text": plain(title, HEADER_MAX)}}


def _parsed(value: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(value)) if value else None
    except ValueError:
        return None


def time_left(expires_at: Any, now: datetime) -> str:
    """ "3h 12m left (until <date in the reader's zone>)", "overdue", or "no deadline"."""
    deadline = _parsed(expires_at)
    if deadline is None:
        return "no deadline"
    seconds = int((deadline - now).total_seconds())
    if seconds <= 0:
        return "overdue"
    days, rest = divmod(seconds, 86400)
    hours, minutes = rest // 3600, rest % 3600 // 60
    parts = (
        [f"{days}d"] * bool(days)
        + [f"{hours}h"] * bool(hours)
        + [f"{minutes}m"] * bool(minutes and not days)
    )
    fallback = deadline.isoformat(timespec="minutes")
    until = f"<!date^{int(deadline.timestamp())}^{{date_short_pretty}} {{time}}|{fallback}>"
    return f"{' '.join(parts) or 'under 1m'} left (until {until})"


def _fields(data: dict[str, Any], now: datetime) -> Block:
    tags = [str(tag) for tag in data.get("tags") or []]
    experts = [
        str(seat.get("name")) for seat in data.get("experts") or [] if isinstance(seat, dict)
    ]
    limit = FIELD_MAX - 20
    pairs = [
        ("Agent", mrkdwn(data.get("agentId") or "?", limit)),
        ("Run", mrkdwn(data.get("runId") or "—", limit)),
        ("Time left", time_left(data.get("expiresAt"), now)),
        ("Tags", mrkdwn(", ".join(tags) or "—", limit)),
    ]
    if experts:
        pairs.append(("Routed to", mrkdwn(", ".join(experts), limit)))
    return {
        "type": "section",
        "fields": [{"type": "mrkdwn", "text": f"*{name}*\n{value}"} for name, value in pairs],
    }


def _excerpt(content: str) -> str:
    """The first lines of a file, as a code block nothing can break out of."""
    lines = content.splitlines()
    head = "\n".join(lines[:FILE_LINES])
    body = mrkdwn(head, FILE_CHARS).replace("```", "``\u200b`")
    more = "\n…" if len(lines) > FILE_LINES else ""
    return f"```{body}{more}```"


def _files(data: dict[str, Any]) -> list[Block]:
    context = (data.get("payload") or {}).get("context")
    files = context.get("files") if isinstance(context, dict) else None
    if not isinstance(files, list):
        return []
    blocks = []
    for item in [f for f in files if isinstance(f, dict)][:FILES_SHOWN]:
        file_format, language = fileformats.file_format(item)
        title = (
            f"*{mrkdwn(item.get('path') or '?', 1000)}* ({mrkdwn(language or file_format, 100)})"
        )
        content = item.get("content")
        excerpt = (
            _excerpt(content)
            if isinstance(content, str) and content.strip()
            else "_(no content sent)_"
        )
        blocks.append(_section(f"{title}\n{excerpt}"))
    if len(files) > FILES_SHOWN:
        blocks.append(_context(f"+{len(files) - FILES_SHOWN} more file(s) in the console."))
    return blocks


def _button(text: str, action_id: str, value: str, style: str | None = None) -> Block:
    button: Block = {
        "type": "button",
        "text": {"type": "plain_text", "text": plain(text, BUTTON_MAX)},
        "action_id": action_id,
        "value": value,
    }
    if style:
        button["style"] = style
    return button


def _actions(data: dict[str, Any]) -> list[Block]:
    """Approve (as proposed, with a form), Edit and approve (a form that fits a modal),
    Reject, the console; then the agent's options."""
    pk, payload = str(data.get("breakpointId")), data.get("payload") or {}
    answered = has_form(payload)
    buttons = [_button("Approve as proposed" if answered else "Approve", APPROVE, pk, "primary")]
    if answered and modals.editable_fields(payload) is not None:
        buttons.append(_button("Edit and approve…", EDIT, pk))
    decide = {
        "type": "actions",
        "block_id": "bpm_decide",
        "elements": [
            *buttons,
            _button("Reject…", REJECT, pk, "danger"),
            {
                "type": "button",
                "text": {"type": "plain_text", "text": "Open in the console"},
                "action_id": CONSOLE,
                "url": console_url(pk),
            },
        ],
    }
    labels = payload_options(payload)
    if answered and len(buttons) == 1:
        note = _context("The agent's form cannot be edited here: edit it in the console.")
        return [note, decide, *_options(pk, labels)]
    return [decide, *_options(pk, labels)]


def _options(pk: str, labels: list[str]) -> list[Block]:
    if not labels:
        return []
    options = {
        "type": "actions",
        "block_id": "bpm_options",
        "elements": [
            _button(label, f"{OPTION_PREFIX}{index}", pk) for index, label in enumerate(labels)
        ],
    }
    return [_context("Or choose one of the agent's options:"), options]


def _fallback(prefix: str, data: dict[str, Any]) -> str:
    question = f": {data['question']}" if data.get("title") and data.get("question") else ""
    return mrkdwn(f"{prefix}{display_name(data)}{question}", FALLBACK_MAX)


def announcement(
    data: dict[str, Any], event_type: str, now: datetime, *, in_thread: bool
) -> tuple[str, list[Block]]:
    """(text, blocks) of a created/reminder/escalated message.

    In the thread of the first message, a reminder is a short line (the buttons are
    above); elsewhere it is the whole message, buttons included.
    """
    banner = BANNERS.get(event_type)
    if in_thread and banner:
        left = time_left(data.get("expiresAt"), now)
        link = f"<{console_url(str(data.get('breakpointId')))}|Open in the console>"
        blocks = [_section(f"{banner}\n{left[:1].upper()}{left[1:]}."), _context(link)]
        return _fallback(LABELS[event_type], data), blocks
    blocks = [_header(data)]
    if banner:
        blocks.append(_section(banner))
    question = data.get("question") or "_(no question)_"
    blocks += [_section(mrkdwn(question)), _fields(data, now), *_files(data), *_actions(data)]
    return _fallback(LABELS.get(event_type, "Breakpoint: "), data), blocks


def decision_line(data: dict[str, Any], event_type: str) -> str:
    """ ":white_check_mark: *Approved* by alice (option *Ship*)", and the feedback quoted."""
    outcome = outcome_of(data.get("status"), data.get("result"))
    who = ", ".join(escape(name) for name in outcome.responders) or "?"
    if event_type == EventType.RELEASED:
        verdict = ":white_check_mark: *Approved*" if outcome.approved else ":x: *Rejected*"
        option = f" (option *{mrkdwn(outcome.option, 300)}*)" if outcome.option else ""
        line = f"{verdict} by {who}{option}"
    elif event_type == EventType.EXPIRED:
        line = f":hourglass: *Expired* ({who})"
    else:
        line = f":no_entry_sign: *Cancelled* by {who}"
    feedback = outcome.feedback.strip()
    if feedback:
        quoted = "\n".join(f"> {row}" for row in mrkdwn(feedback, 2400).splitlines())
        line += f"\n{quoted}"
    return line[:SECTION_MAX]


def outcome(data: dict[str, Any], event_type: str) -> tuple[str, list[Block]]:
    """(text, blocks) of a decided message: the decision, who made it, no buttons."""
    question = mrkdwn(data.get("question") or "", 500)
    link = f"<{console_url(str(data.get('breakpointId')))}|Open in the console>"
    blocks = [_header(data), _section(decision_line(data, event_type))]
    if question:
        blocks.append(_context(question))
    blocks.append(_context(link))
    verbs: dict[str, str] = {EventType.RELEASED: "Decided", EventType.EXPIRED: "Expired"}
    verb = verbs.get(event_type, "Cancelled")
    return _fallback(f"{verb}: ", data), blocks


def reject_modal(data: dict[str, Any], *, private_metadata: str) -> Block:
    """The modal Reject opens: the breakpoint, and the feedback the agent will read."""
    title = mrkdwn(display_name(data), 300)
    question = mrkdwn(data.get("question") or "", 1500)
    return {
        "type": "modal",
        "callback_id": REJECT_MODAL,
        "title": {"type": "plain_text", "text": "Reject breakpoint"},
        "submit": {"type": "plain_text", "text": "Reject"},
        "close": {"type": "plain_text", "text": "Cancel"},
        "private_metadata": private_metadata,
        "blocks": [
            _section(f"*{title}*\n{question}"),
            {
                "type": "input",
                "block_id": FEEDBACK_BLOCK,
                "optional": True,
                "label": {"type": "plain_text", "text": "Why? The agent reads this."},
                "element": {
                    "type": "plain_text_input",
                    "action_id": FEEDBACK_INPUT,
                    "multiline": True,
                    "max_length": SECTION_MAX,
                },
            },
        ],
    }


def edit_modal(data: dict[str, Any], payload: dict[str, Any], *, private_metadata: str) -> Block:
    """The modal "Edit and approve" opens: the form's fields prefilled with the proposal
    (channels.slack.modals); submitting approves with the values as left."""
    title = mrkdwn(display_name(data), 300)
    question = mrkdwn(data.get("question") or "", 1500)
    return {
        "type": "modal",
        "callback_id": modals.EDIT_MODAL,
        "title": {"type": "plain_text", "text": "Edit and approve"},
        "submit": {"type": "plain_text", "text": "Approve"},
        "close": {"type": "plain_text", "text": "Cancel"},
        "private_metadata": private_metadata,
        "blocks": [_section(f"*{title}*\n{question}"), *modals.field_blocks(payload)],
    }
