"""Safe HTML for what an agent sent: context files by format, pretty JSON, durations.

Shared by the console (reviews.rendering adds its badges) and the channels (email).

Everything here treats its input as hostile. Markdown is converted and then
sanitized with nh3; code and text are escaped (Pygments escapes its tokens); HTML is
never inlined: the template puts it in a sandboxed iframe's `srcdoc`, escaped as an
attribute value. The functions are pure: strings in, SafeString out.
"""

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import markdown
import nh3
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name, get_lexer_for_filename
from pygments.lexers.special import TextLexer
from pygments.util import ClassNotFound

from breakpoints import fileformats
from breakpoints.choices import FileFormat

# Past this size, markdown and code are shown as plain text: highlighting or
# converting megabytes would make the page slow for no reading benefit.
MAX_RICH_CHARS = 300_000

# nh3's defaults, minus what would fetch remote resources (tracking pixels) or map areas.
MARKDOWN_TAGS = frozenset(nh3.ALLOWED_TAGS - {"img", "area", "map"})
MARKDOWN_URL_SCHEMES = frozenset({"http", "https", "mailto"})
MARKDOWN_EXTENSIONS = ["fenced_code", "tables", "sane_lists"]

CODE_CSS_CLASS = "bpm-highlight"

# Prepended to agent HTML shown in a sandboxed iframe: besides no scripts (sandbox),
# no network either, so a report cannot phone home or pull in remote content.
SRCDOC_CSP = (
    '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
    "style-src 'unsafe-inline'; img-src data:; font-src data:\">"
)


def render_text(content: str) -> SafeString:
    """Preformatted, escaped text."""
    return format_html('<pre class="bpm-pre">{}</pre>', content)


def render_markdown(content: str) -> SafeString:
    """Markdown converted to HTML, then sanitized: no scripts, handlers, styles or images."""
    if len(content) > MAX_RICH_CHARS:
        return render_text(content)
    html = markdown.markdown(content, extensions=MARKDOWN_EXTENSIONS, output_format="html")
    clean = nh3.clean(
        html,
        tags=set(MARKDOWN_TAGS),
        url_schemes=set(MARKDOWN_URL_SCHEMES),
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
    )
    # mark_safe: nh3 output, sanitized just above.
    return format_html('<div class="bpm-markdown">{}</div>', mark_safe(clean))


def lexer_for(language: str | None, path: str | None = None):
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


def render_code(content: str, language: str | None = None, path: str | None = None) -> SafeString:
    """Syntax-highlighted code; an unknown language gets the plain-text lexer."""
    if len(content) > MAX_RICH_CHARS:
        return render_text(content)
    formatter = HtmlFormatter(cssclass=CODE_CSS_CLASS, wrapcode=True)
    # mark_safe: Pygments escapes every token it writes.
    return mark_safe(highlight(content, lexer_for(language, path), formatter))


def render_json(value: Any) -> SafeString:
    """Pretty, highlighted JSON of any value (the raw payload, a result)."""
    return render_code(pretty_json(value), "json")


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


def render_context_file(item: Any) -> ContextFile:
    """Render one context file by its format (the agent's, else inferred from the path); a
    file without content shows only its path."""
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
    if file_format == FileFormat.MARKDOWN:
        return ContextFile(has_content=True, html=render_markdown(content), **base)
    if file_format == FileFormat.CODE:
        return ContextFile(has_content=True, html=render_code(content, language, path), **base)
    return ContextFile(has_content=True, html=render_text(content), **base)


def context_files(payload: Any) -> list[ContextFile]:
    """The rendered payload.context.files of a breakpoint (empty when absent or malformed)."""
    context = payload.get("context") if isinstance(payload, Mapping) else None
    files = context.get("files") if isinstance(context, Mapping) else None
    if not isinstance(files, list):
        return []
    return [render_context_file(item) for item in files]


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
