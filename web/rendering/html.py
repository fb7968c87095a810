"""The console's words for a breakpoint: age, decision, status badge (escaped HTML).

The sanitized rendering of what an agent sent lives in web.rendering.markup, shared with
the channels; it is re-exported here for the console's templates and presenters.
"""

import html
from datetime import datetime
from typing import Any

from django.utils.functional import Promise
from django.utils.safestring import SafeString, mark_safe
from django.utils.text import Truncator

from core.choices import Status
from web.rendering.markup import (  # noqa: F401 - re-exported for the console
    CODE_CSS_CLASS,
    MARKDOWN_TAGS,
    MARKDOWN_URL_SCHEMES,
    MAX_RICH_CHARS,
    SRCDOC_CSP,
    ContextFile,
    RenderBudget,
    compact_duration,
    context_files,
    lexer_for,
    pretty_json,
    render_code,
    render_context_file,
    render_json,
    render_lede,
    render_markdown,
    render_text,
)


def format_html(template: str, *args: Any) -> SafeString:
    """Django's format_html(template, *args), for markup written many times a page (the
    queue's cells): each argument escaped as conditional_escape does (safe markup kept,
    anything else html.escape'd), without its lazy-string wrappers around every escape.
    tests/console/test_queue_rows.py checks it writes what Django's writes."""
    escaped = []
    for arg in args:
        if isinstance(arg, Promise):
            arg = str(arg)
        escaped.append(arg.__html__() if hasattr(arg, "__html__") else html.escape(str(arg)))
    return mark_safe(template.format(*escaped))


def age(since: datetime, now: datetime) -> str:
    return compact_duration(now - since)


OPTION_BADGE_CHARS = 40


def decision(approved: Any) -> str:
    """result.approved as "approved" / "rejected" ("" when unknown): a bool, or the
    "true" / "false" a JSON key lookup (KT("result__approved")) reads from the database."""
    if approved in (True, "true"):
        return "approved"
    if approved in (False, "false"):
        return "rejected"
    return ""


def status_badge(
    status: str, approved: Any = None, option: Any = None, *, large: bool = False
) -> SafeString:
    """A breakpoint's status badge. A released one also says what was decided: green for
    approved (or the option chosen), red for rejected. Everything is escaped."""
    size = " bpm-badge--large" if large else ""
    label = Status(status).label if status in Status.values else status
    decided = decision(approved) if status == Status.RELEASED else ""
    if not decided:
        return format_html('<span class="bpm-badge{} bpm-badge--{}">{}</span>', size, status, label)
    if decided == "approved" and isinstance(option, str) and option:
        # The agent's words: not lower-cased like the badge, cut short (whole in the title).
        detail = format_html(
            'chose <span class="bpm-badge__option" title="{}">“{}”</span>',
            option,
            Truncator(option).chars(OPTION_BADGE_CHARS),
        )
    else:
        detail = format_html("{}", decided)
    return format_html(
        '<span class="bpm-badge{} bpm-badge--{}" data-bpm-decision="{}">{} · {}</span>',
        size,
        decided,
        decided,
        label,
        detail,
    )
