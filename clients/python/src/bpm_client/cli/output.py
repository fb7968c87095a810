"""What `bpm` prints: one-line summaries, the list table, and JSON in the API's own shape."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import click

from ..models import Breakpoint, BreakpointResult, Event, FeedbackCreated
from .failures import APPROVED, ENDED, REJECTED

TITLE_WIDTH = 70
OPTION_WIDTH = 30
DECIDED_BY_WIDTH = 30


def warn(message: str) -> None:
    """A note on stderr that does not stop the command."""
    click.echo(f"bpm: warning: {message}", err=True)


def warn_about(created: Breakpoint) -> None:
    """The create answer's warnings (payload keys that look misspelt), one line each."""
    for warning in created.warnings:
        warn(warning)


def exit_code(result: BreakpointResult) -> int:
    """0 approved, 1 rejected, 2 expired or cancelled."""
    if result.status == "released":
        return APPROVED if result.approved else REJECTED
    return ENDED


def summary(result: BreakpointResult) -> str:
    """`approved by alice: "go ahead"`, `rejected by bob: "..."`, `expired: ...`."""
    if result.status == "waiting":
        return "waiting"
    text = result.response or result.feedback
    if result.status != "released":
        return f"{result.status}: {text}" if text else str(result.status)
    verb = "approved" if result.approved else "rejected"
    who = result.responded_by
    names = ", ".join(who) if isinstance(who, list) else who
    line = f"{verb} by {names}" if names else verb
    if result.option:
        line += f" (option {quoted(result.option)})"
    line = f"{line}: {quoted(text)}" if text else line
    if result.values is not None:  # the answer to the form, on a line of its own
        edited = " (edited)" if result.edited else ""
        line += f"\nvalues{edited}: {json.dumps(result.values, ensure_ascii=False)}"
    return line


def quoted(text: str) -> str:
    """JSON-quoted: a multi-line comment stays on one line."""
    return json.dumps(text, ensure_ascii=False)


def decided(breakpoint_id: str, answer: FeedbackCreated) -> BreakpointResult:
    """The result after a reviewer's release (still `waiting` when more votes are needed)."""
    result = answer.result or BreakpointResult(approved=False)
    return dataclasses.replace(result, status=answer.status, breakpoint_id=breakpoint_id)


def dumps(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False)


def table(breakpoints: Sequence[Breakpoint]) -> str:
    """ID, OUTCOME, DECIDED BY, CREATED (UTC), TITLE (or the question) in aligned columns:
    what the list page already holds, so no request per row."""
    rows = [("ID", "OUTCOME", "DECIDED BY", "CREATED", "TITLE")]
    rows += [
        (b.breakpoint_id, outcome(b), decided_by(b), moment(b.created_at), label(b))
        for b in breakpoints
    ]
    padded = len(rows[0]) - 1  # the title, last, is not padded
    widths = [max(len(row[column]) for row in rows) for column in range(padded)]
    return "\n".join(
        "  ".join(
            [
                *(cell.ljust(width) for cell, width in zip(row[:padded], widths, strict=True)),
                row[padded],
            ]
        )
        for row in rows
    )


def outcome(breakpoint: Breakpoint) -> str:
    """`approved`, `rejected` or `approved (option "us")` for a released breakpoint (its
    status alone says neither); else its status: waiting, expired, cancelled."""
    result = breakpoint.result
    if breakpoint.status != "released" or result is None:
        return str(breakpoint.status)
    verb = "approved" if result.approved else "rejected"
    if not result.option:
        return verb
    return f"{verb} (option {quoted(clipped(result.option, OPTION_WIDTH))})"


def decided_by(breakpoint: Breakpoint) -> str:
    """Who released, expired or cancelled it (a person, a rule, `system`; every voter of a
    collect-all or quorum), `-` while it waits."""
    who = breakpoint.result.responded_by if breakpoint.result is not None else None
    if breakpoint.status == "waiting" or not who:
        return "-"
    return clipped(", ".join(who) if isinstance(who, list) else who, DECIDED_BY_WIDTH)


def label(breakpoint: Breakpoint) -> str:
    return clipped(breakpoint.title or breakpoint.question or breakpoint.key or "", TITLE_WIDTH)


def clipped(text: str, width: int) -> str:
    """`text` on one line, cut to `width` characters with an ellipsis."""
    text = re.sub(r"\s+", " ", text)
    return text if len(text) <= width else text[: width - 1] + "…"


def moment(value: datetime | Any) -> str:
    if not isinstance(value, datetime):
        return str(value)
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def event_line(event: Event) -> str:
    """`2025-01-01 12:00:00Z  released  alice  {"approved": true}`."""
    parts = [moment(event.timestamp), str(event.type), event.actor]
    if event.metadata:
        parts.append(json.dumps(event.metadata, ensure_ascii=False, sort_keys=True))
    return "  ".join(parts)
