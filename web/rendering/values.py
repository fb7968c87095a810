"""A form's values as HTML: the cells of a proposal's table and a reviewer's edits of it.

Values come from agents (a proposal) and reviewers (an edit), so every string is escaped,
or lexed by Pygments, which escapes its tokens. A scalar is a JSON literal (true, 3, null)
as the JSON shown beside it says; a text longer than a line is a block, highlighted when a
file name among the values tells its language; a list or an object too long for a line is
pretty JSON. An edited text is a line diff (difflib's unified format, highlighted); past
MAX_DIFF_LINES on either side both texts are shown whole instead (difflib's time grows
with the product of the lines). Highlighting runs within the page's RenderBudget.
"""

import difflib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import islice
from typing import Any

from django.utils.html import format_html
from django.utils.safestring import SafeString
from pygments.lexer import Lexer
from pygments.lexers import DiffLexer, get_lexer_for_filename
from pygments.lexers.special import TextLexer
from pygments.util import ClassNotFound

from core.limits import MAX_PATH_LENGTH
from web.rendering.budget import RenderBudget
from web.rendering.markup import code_rendering, lexer_for, pretty_json, render_text

# A text past this many characters, or with a line break, is a block of its own.
LINE_CHARS = 80
MAX_DIFF_LINES = 2_000
EOL_ONLY = "The same lines: only line endings, or the line break at the end, differ."
# A file name's last dot and what follows: what tells a text's language.
MAX_FILE_NAMES_TRIED = 8
FILE_NAME = re.compile(r"[^/\\\s]+\.[A-Za-z0-9_+-]{1,16}$")


class Absent:
    """A value the proposal or the answer does not hold (not the same as null)."""

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT = Absent()


def literal(value: Any) -> str:
    """A value as JSON on one line: true, 3, "prod", ["a", "b"]."""
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)


def is_block(value: Any) -> bool:
    """Whether a text is shown as a block: it has lines, or is too long for one."""
    return isinstance(value, str) and ("\n" in value or len(value) > LINE_CHARS)


def text_lexer(values: Iterable[Any]) -> Lexer | None:
    """The lexer of the first value that is a file name Pygments knows (a tool's `path`
    beside its `content`), else None: the long texts are then plain text."""
    names = (
        value
        for value in values
        if isinstance(value, str) and len(value) <= MAX_PATH_LENGTH and "\n" not in value
        if FILE_NAME.search(value) is not None
    )
    # A lookup scans every lexer's patterns (a millisecond): a proposal of a thousand file
    # names is asked about its first few only.
    for value in islice(names, MAX_FILE_NAMES_TRIED):
        try:
            lexer = get_lexer_for_filename(value)
        except ClassNotFound:
            continue
        if not isinstance(lexer, TextLexer):
            return lexer
    return None


def render_value(value: Any, lexer: Lexer | None, budget: RenderBudget) -> SafeString:
    """One value of a table: a text as text, a block highlighted with `lexer` (plain
    without one), a scalar or a short list or object as its JSON literal, a longer one as
    pretty JSON."""
    if isinstance(value, str):
        if not is_block(value):
            return format_html('<span class="bpm-value bpm-value--text">{}</span>', value)
        if lexer is None:
            return render_text(value)
        return _highlighted(value, lexer, budget)
    text = literal(value)
    if isinstance(value, (dict, list)):
        if len(text) <= LINE_CHARS:
            return format_html('<code class="bpm-value">{}</code>', text)
        return _highlighted(pretty_json(value), lexer_for("json"), budget)
    return format_html('<code class="bpm-value bpm-value--literal">{}</code>', text)


def _highlighted(text: str, lexer: Lexer, budget: RenderBudget) -> SafeString:
    """`text` highlighted within a share of the page's budget (values are small: at most
    MAX_VALUES_BYTES in all, so they are rendered each time, not cached)."""
    return code_rendering(text, lexer, budget.deadline_for_one()).html


@dataclass(frozen=True)
class Change:
    """One edited value: its proposed and approved cells, or, for a text with lines (or a
    long list or object), one line diff of both."""

    before: SafeString | None = None
    after: SafeString | None = None
    diff: SafeString | None = None


def render_change(before: Any, after: Any, budget: RenderBudget) -> Change:
    """How an edit reads: a line diff when either side is a block (two texts, or two lists
    or objects), else both sides as JSON literals, the proposed one struck out (`ABSENT`
    when a side holds no value)."""
    texts = _diff_texts(before, after)
    if texts is not None:
        old_lines, new_lines = texts[0].splitlines(), texts[1].splitlines()
        if max(len(old_lines), len(new_lines)) <= MAX_DIFF_LINES:
            lines = difflib.unified_diff(old_lines, new_lines, lineterm="")
            # Its first two lines name the files ("--- ", "+++ "): there are none here.
            text = "\n".join(list(lines)[2:])
            if not text:  # the same lines: what differs is a line ending or the last one
                return Change(diff=format_html('<p class="bpm-diff__none">{}</p>', EOL_ONLY))
            return Change(diff=_highlighted(text, DiffLexer(), budget))
    return Change(
        before=_side(before, '<del class="bpm-diff__old"><code>{}</code></del>', "not proposed"),
        after=_side(after, '<ins class="bpm-diff__new"><code>{}</code></ins>', "left out"),
    )


def _diff_texts(before: Any, after: Any) -> tuple[str, str] | None:
    """The texts a line diff compares for this edit, None when neither side is a block."""
    if isinstance(before, str) and isinstance(after, str):
        return (before, after) if is_block(before) or is_block(after) else None
    compound = (dict, list)
    if isinstance(before, compound) and isinstance(after, compound):
        if max(len(literal(before)), len(literal(after))) > LINE_CHARS:
            return _pretty(before), _pretty(after)
    return None


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


def _side(value: Any, template: str, absent: str) -> SafeString:
    if value is ABSENT:
        return format_html('<span class="bpm-diff__none">{}</span>', absent)
    return format_html(template, literal(value))


def same(before: Any, after: Any) -> bool:
    """Whether two values are the same JSON (an object's keys in any order); ABSENT is the
    same only as ABSENT."""
    if before is ABSENT or after is ABSENT:
        return before is after
    return json.dumps(before, sort_keys=True) == json.dumps(after, sort_keys=True)
