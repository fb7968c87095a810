"""Safe HTML for what an agent sent: context files by format, pretty JSON, durations.

Shared by the console (web.rendering.html adds its badges) and the channels (email).

Everything here treats its input as hostile. Markdown is converted (markdown-it-py, a
linear-time CommonMark parser) and then sanitized with nh3; code and text are escaped
(Pygments escapes its tokens); HTML is never inlined: the template puts it in a sandboxed
iframe's `srcdoc`, escaped as an attribute value. Rich rendering is bounded in time and
depth (budget.py): past its deadline, too deep, or too large, a file is shown as
escaped text. The functions are pure: strings in, SafeString out.
"""

import json
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import nh3
from django.conf import settings
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt
from markdown_it.token import Token as MarkdownToken
from pygments import format as format_tokens
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import get_lexer_by_name, get_lexer_for_filename
from pygments.lexers.special import TextLexer
from pygments.token import Token
from pygments.util import ClassNotFound

from core import fileformats
from core.choices import FileFormat
from web.rendering.budget import RenderBudget, Rendered

# Past this size, markdown and code are shown as plain text: highlighting or
# converting megabytes would make the page slow for no reading benefit.
MAX_RICH_CHARS = 300_000
# Blocks nested deeper than this (a list item is two levels, a quote one) make the whole
# file plain text: the parser would silently drop what is deeper.
MAX_MARKDOWN_NESTING = 40
# The sanitizer's time grows with the square of raw HTML's nesting: a markdown file with
# more raw HTML tags than this is shown as plain text.
MAX_MARKDOWN_HTML_TAGS = 1_000

# nh3's defaults, minus what would fetch remote resources (tracking pixels) or map areas.
MARKDOWN_TAGS = frozenset(nh3.ALLOWED_TAGS - {"img", "area", "map"})
MARKDOWN_URL_SCHEMES = frozenset({"http", "https", "mailto"})

CODE_CSS_CLASS = "bpm-highlight"

# Prepended to agent HTML shown in a sandboxed iframe: besides no scripts (sandbox),
# no network either, so a report cannot phone home or pull in remote content.
SRCDOC_CSP = (
    '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
    "style-src 'unsafe-inline'; img-src data:; font-src data:\">"
)


class RenderTimeout(Exception):
    """A rendering ran past its deadline."""


def _deadline_rule(state: Any, *_args: Any) -> bool:
    """A parser rule that matches nothing: it stops the parse once the deadline passed."""
    if time.monotonic() > state.env["bpm_deadline"]:
        raise RenderTimeout
    return False


def _markdown_parser() -> MarkdownIt:
    parser = MarkdownIt("commonmark", {"maxNesting": MAX_MARKDOWN_NESTING}).enable("table")
    # Every link is kept for nh3 to judge: one sanitizer decides which schemes stay.
    parser.validateLink = lambda url: True  # type: ignore[method-assign]
    for ruler in (parser.block.ruler, parser.inline.ruler):
        ruler.before(ruler.get_all_rules()[0], "bpm_deadline", _deadline_rule)
    return parser


MARKDOWN = _markdown_parser()

# A question shown as secondary text under its title: its `code` spans, paragraphs and line
# breaks, and nothing else of markdown (no links, emphasis or HTML: a sentence, not a
# document). These rules are linear in the text's length.
LEDE = MarkdownIt("zero", {"breaks": True}).enable(["backticks", "newline"])
LEDE_TAGS = frozenset({"p", "code", "br"})


def _or_default(deadline: float | None) -> float:
    """`deadline`, else a single rendering's own: a file's share of a page's budget."""
    if deadline is not None:
        return deadline
    return time.monotonic() + settings.BPM_RENDER_BUDGET_SECONDS / 2


def render_text(content: str) -> SafeString:
    """Preformatted, escaped text."""
    return format_html('<pre class="bpm-pre">{}</pre>', content)


def render_lede(content: str) -> SafeString:
    """A question as secondary text: `code` spans as <code>, paragraphs and line breaks
    kept, everything else escaped text; then sanitized like any agent markup."""
    clean = nh3.clean(LEDE.render(content), tags=set(LEDE_TAGS), attributes={})
    # mark_safe: nh3 output, sanitized just above.
    return mark_safe(clean)


def render_markdown(content: str, deadline: float | None = None) -> SafeString:
    """Markdown converted to HTML, then sanitized: no scripts, handlers, styles or images."""
    return markdown_rendering(content, _or_default(deadline)).html


def markdown_rendering(content: str, deadline: float) -> Rendered:
    """Sanitized markdown, or escaped text when it is too large, too deep, holds too much
    raw HTML, or its parse runs past `deadline`."""
    if len(content) > MAX_RICH_CHARS:
        return Rendered(render_text(content), complete=True)
    env = {"bpm_deadline": deadline}
    try:
        tokens = MARKDOWN.parse(content, env)
    except RenderTimeout:
        return Rendered(render_text(content), complete=False)
    if _too_deep(tokens) or _raw_html_tags(tokens) > MAX_MARKDOWN_HTML_TAGS:
        return Rendered(render_text(content), complete=True)
    html = MARKDOWN.renderer.render(tokens, MARKDOWN.options, env)
    if time.monotonic() > deadline:  # nh3 cannot be stopped: start it only in time
        return Rendered(render_text(content), complete=False)
    clean = nh3.clean(
        html,
        tags=set(MARKDOWN_TAGS),
        url_schemes=set(MARKDOWN_URL_SCHEMES),
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
    )
    # mark_safe: nh3 output, sanitized just above.
    return Rendered(format_html('<div class="bpm-markdown">{}</div>', mark_safe(clean)), True)


def _too_deep(tokens: list[MarkdownToken]) -> bool:
    # The parser stops nesting one level short of maxNesting and drops the rest.
    return any(token.level >= MAX_MARKDOWN_NESTING - 1 for token in tokens)


def _raw_html_tags(tokens: list[MarkdownToken]) -> int:
    blocks = sum(token.content.count("<") for token in tokens if token.type == "html_block")
    inline = sum(
        1 for token in tokens for child in token.children or () if child.type == "html_inline"
    )
    return blocks + inline


def lexer_for(language: str | None, path: str | None = None) -> Lexer:
    """The Pygments lexer for `language`, else for the file name, else plain text."""
    if language:
        try:
            return get_lexer_by_name(language.strip().lower())
        except ClassNotFound:
            pass  # a language Pygments does not know: the file name may still tell
    if path:
        try:
            return get_lexer_for_filename(path)
        except ClassNotFound:
            pass
    return TextLexer()


def render_code(
    content: str,
    language: str | None = None,
    path: str | None = None,
    deadline: float | None = None,
) -> SafeString:
    """Syntax-highlighted code; an unknown language gets the plain-text lexer."""
    return code_rendering(content, lexer_for(language, path), _or_default(deadline)).html


def code_rendering(content: str, lexer: Lexer, deadline: float) -> Rendered:
    """Highlighted code, up to `deadline`: what is left then is escaped, not highlighted
    (a lexer's regular expressions can take quadratic time on crafted input)."""
    if len(content) > MAX_RICH_CHARS:
        return Rendered(render_text(content), complete=True)
    tokens = _Tokens(lexer, content, deadline)
    formatter = HtmlFormatter(cssclass=CODE_CSS_CLASS, wrapcode=True)
    # mark_safe: Pygments escapes every token it writes, the unlexed rest included.
    return Rendered(mark_safe(format_tokens(list(tokens), formatter)), tokens.complete)


class _Tokens:
    """A lexer's tokens until the deadline, then the rest of the text as one plain token."""

    def __init__(self, lexer: Lexer, content: str, deadline: float) -> None:
        # What Lexer.get_tokens does first (newlines, stripnl, ensurenl), so offsets hold.
        text = content.replace("\r\n", "\n").replace("\r", "\n").strip("\n")
        self.text, self.lexer, self.deadline = text + "\n", lexer, deadline
        self.complete = True

    def __iter__(self) -> Iterator[tuple[Any, str]]:
        end = 0
        for index, kind, value in self.lexer.get_tokens_unprocessed(self.text):
            if time.monotonic() > self.deadline:
                self.complete = False
                yield Token.Text, self.text[index:]
                return
            yield kind, value
            end = index + len(value)
        if end < len(self.text):  # a lexer that stopped short: keep the text whole
            yield Token.Text, self.text[end:]


def render_json(value: Any, budget: RenderBudget | None = None) -> SafeString:
    """Pretty, highlighted JSON of any value (the raw payload, a result), within the
    page's budget when one is given."""
    text, lexer = pretty_json(value), lexer_for("json")  # before the clock starts
    deadline = budget.deadline_for_one() if budget is not None else None
    return code_rendering(text, lexer, _or_default(deadline)).html


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)


@dataclass(frozen=True)
class ContextFile:
    """One entry of payload.context.files, ready for the template."""

    path: str
    format: str
    language: str
    has_content: bool
    html: SafeString | None = None  # rendered body for markdown, code and text
    srcdoc: str | None = None  # raw HTML for a sandboxed iframe (escaped by the template)

    @property
    def is_html(self) -> bool:
        return self.srcdoc is not None


def render_context_file(item: Any, budget: RenderBudget | None = None) -> ContextFile:
    """Render one context file by its format (the agent's, else inferred from the path); a
    file without content shows only its path. Markdown and code are rendered within
    `budget` (else one of their own) and cached."""
    if not isinstance(item, Mapping):
        return ContextFile(
            path="(malformed entry)",
            format=FileFormat.TEXT,
            language="",
            has_content=True,
            html=render_text(pretty_json(item)),
        )
    path = item.get("path")
    path = path if isinstance(path, str) and path else "(no path)"
    file_format, language = fileformats.file_format(item)
    content = item.get("content")
    base: dict[str, Any] = {"path": path, "format": file_format, "language": language or ""}
    if not isinstance(content, str):
        return ContextFile(has_content=False, **base)
    if file_format == FileFormat.HTML:
        return ContextFile(has_content=True, srcdoc=SRCDOC_CSP + content, **base)
    if file_format not in RICH_FORMATS:
        return ContextFile(has_content=True, html=render_text(content), **base)
    own = budget is None
    budget = RenderBudget() if budget is None else budget
    if own:
        budget.prefetch([cache_source(item)])
    html = budget.render(
        cache_source(item),
        lambda start: _rich(file_format, content, language, path, start),
        lambda: render_text(content),
    )
    if own:
        budget.save()
    return ContextFile(has_content=True, html=html, **base)


RICH_FORMATS = frozenset({FileFormat.MARKDOWN, FileFormat.CODE})


def _rich(
    file_format: str, content: str, language: str | None, path: str, start: Callable[[], float]
) -> Rendered:
    """A markdown or code file's rendering; `start()` starts its clock (RenderBudget.render)."""
    if file_format == FileFormat.MARKDOWN:
        return markdown_rendering(content, start())
    # Looked up before the clock starts: a language's first lookup in a process imports its
    # lexer's module (0.2 s seen), which would count against this file's time.
    lexer = lexer_for(language, path)
    return code_rendering(content, lexer, start())


def cache_source(item: Mapping) -> list[Any]:
    """What a context file's rendering depends on: its format, language, path, content."""
    return ["file", *fileformats.file_format(item), item.get("path"), item.get("content")]


def context_files(payload: Any, budget: RenderBudget | None = None) -> list[ContextFile]:
    """The rendered payload.context.files of a breakpoint (empty when absent or malformed),
    within one page's `budget` (else a budget of their own); cache read and written once."""
    context = payload.get("context") if isinstance(payload, Mapping) else None
    files = context.get("files") if isinstance(context, Mapping) else None
    if not isinstance(files, list):
        return []
    budget = RenderBudget() if budget is None else budget
    budget.prefetch(
        cache_source(item)
        for item in files
        if isinstance(item, Mapping) and fileformats.file_format(item)[0] in RICH_FORMATS
    )
    rendered = [render_context_file(item, budget) for item in files]
    budget.save()
    return rendered


def compact_duration(delta: timedelta) -> str:
    """A short human duration: '45s', '12m', '3h 20m', '2d 4h'."""
    seconds = max(int(delta.total_seconds()), 0)
    if seconds < 60:
        return f"{seconds}s"
    minutes, _ = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h {minutes}m" if minutes else f"{hours}h"
    days, hours = divmod(hours, 24)
    return f"{days}d {hours}h" if hours else f"{days}d"
