"""Rendering of what agents send: sanitized markdown, highlighted code, escaped text."""

import html
import re
import time
from datetime import timedelta

from django.core.cache import cache
from pygments.lexers.special import TextLexer

from web.rendering import html as rendering
from web.rendering import markup
from web.rendering.budget import RenderBudget, cache_key


def test_markdown_becomes_html_without_scripts_handlers_or_images():
    html = rendering.render_markdown(
        "# Title\n\n**bold** <script>alert(1)</script><img src=x onerror=alert(1)> "
        "[x](javascript:alert(1)) [ok](https://example.com)"
    )
    assert "<h1>Title</h1>" in html and "<strong>bold</strong>" in html
    assert "<script" not in html and "onerror" not in html and "<img" not in html
    assert "javascript:" not in html
    assert 'href="https://example.com"' in html and "noopener" in html


def test_code_is_highlighted_and_escaped():
    html = rendering.render_code('print("<script>")', "python")
    assert '<span class="nb">print</span>' in html
    assert "&lt;script&gt;" in html and "<script>" not in html


def test_unknown_language_falls_back_to_plain_text():
    assert isinstance(rendering.lexer_for("no-such-language"), TextLexer)
    html = rendering.render_code("<b>x</b>", "no-such-language")
    assert "&lt;b&gt;x&lt;/b&gt;" in html


def test_language_missing_uses_the_file_name():
    assert rendering.lexer_for(None, "main.py").name == "Python"
    assert isinstance(rendering.lexer_for(None, "README"), TextLexer)


def test_text_is_preformatted_and_escaped():
    assert rendering.render_text("a <b>") == '<pre class="bpm-pre">a &lt;b&gt;</pre>'


def test_huge_files_are_shown_as_plain_text():
    big = "# x\n" * (rendering.MAX_RICH_CHARS // 4 + 1)
    assert rendering.render_markdown(big).startswith('<pre class="bpm-pre">')
    assert rendering.render_code(big, "python").startswith('<pre class="bpm-pre">')


def test_context_files_by_format():
    files = rendering.context_files(
        {
            "context": {
                "files": [
                    {"path": "a.md", "format": "markdown", "content": "# A"},
                    {"path": "b.html", "format": "html", "content": "<p>B</p>"},
                    {"path": "c.md", "format": "markdown"},
                    "not an object",
                ]
            }
        }
    )
    markdown, html, missing, malformed = files
    assert "<h1>A</h1>" in markdown.html
    assert html.is_html and html.html is None and html.srcdoc.endswith("<p>B</p>")
    assert not missing.has_content and missing.path == "c.md"
    assert malformed.path == "(malformed entry)"


def test_no_context_means_no_files():
    assert rendering.context_files({}) == []
    assert rendering.context_files({"context": {"files": "nope"}}) == []
    assert rendering.context_files("not a dict") == []


def test_compact_durations():
    assert rendering.compact_duration(timedelta(seconds=42)) == "42s"
    assert rendering.compact_duration(timedelta(minutes=12, seconds=5)) == "12m"
    assert rendering.compact_duration(timedelta(hours=3, minutes=20)) == "3h 20m"
    assert rendering.compact_duration(timedelta(days=2, hours=4)) == "2d 4h"
    assert rendering.compact_duration(timedelta(seconds=-5)) == "0s"


# --- bounded rendering: a deadline, a depth limit, a cache ----------------------------------

PAST = 0.0  # a monotonic deadline long gone


def test_markdown_past_its_deadline_is_escaped_text():
    rendered = markup.markdown_rendering("# Title <b>bold</b>", PAST)
    assert rendered.html == '<pre class="bpm-pre"># Title &lt;b&gt;bold&lt;/b&gt;</pre>'
    assert not rendered.complete


def test_code_past_its_deadline_is_escaped_not_highlighted():
    rendered = markup.code_rendering('print("<b>")\n', rendering.lexer_for("python"), PAST)
    assert 'print("&lt;b&gt;")' in rendered.html
    assert '<span class="nb">' not in rendered.html
    assert not rendered.complete


def test_code_cut_by_its_deadline_keeps_the_whole_text():
    """The tokens lexed in time are highlighted, the rest is escaped, nothing is lost."""
    source = "x = 1\n" * 200
    text = html.unescape(re.sub(r"<[^>]+>", "", rendering.render_code(source, "python")))
    cut = markup.code_rendering(source, rendering.lexer_for("python"), PAST)
    assert html.unescape(re.sub(r"<[^>]+>", "", cut.html)) == text


def nested_list(depth: int) -> str:
    return "".join(f"{'  ' * level}- item {level}\n" for level in range(depth))


def test_markdown_nested_beyond_the_limit_is_escaped_text():
    assert rendering.render_markdown(nested_list(500)).startswith('<pre class="bpm-pre">')
    shallow = rendering.render_markdown(nested_list(5))
    assert shallow.count("<ul>") == 5 and "item 4" in shallow


def test_markdown_with_too_much_raw_html_is_escaped_text():
    deep = "<div>" * (markup.MAX_MARKDOWN_HTML_TAGS + 1)
    assert rendering.render_markdown(deep).startswith('<pre class="bpm-pre">&lt;div&gt;')
    assert "<b>kept</b>" in rendering.render_markdown("some <b>kept</b> html")


def files_of(content: str) -> dict:
    return {"context": {"files": [{"path": "a.md", "format": "markdown", "content": content}]}}


def test_a_page_without_time_left_shows_escaped_text_and_caches_nothing():
    [spent] = rendering.context_files(files_of("# Later"), RenderBudget(seconds=0))
    assert spent.html == '<pre class="bpm-pre"># Later</pre>'
    [fresh] = rendering.context_files(files_of("# Later"))
    assert "<h1>Later</h1>" in fresh.html


def test_a_rendering_is_cached_for_the_next_page():
    rendering.context_files(files_of("# Once"))
    [cached] = rendering.context_files(files_of("# Once"), RenderBudget(seconds=0))
    assert "<h1>Once</h1>" in cached.html


DEPLOY = {"path": "deploy.py", "content": "import os\nprint(os.environ)\n"}  # CODE · PYTHON
HIGHLIGHTED = '<span class="kn">import</span>'


def out_of_time(item: dict) -> str:
    """`item` rendered on a page that has time, the file none of its own: it starts, and
    runs out while lexing or parsing."""
    [rendered] = rendering.context_files(
        {"context": {"files": [item]}}, RenderBudget(seconds=60, file_seconds=0)
    )
    return rendered.html


def test_a_file_cut_by_its_time_once_is_not_cached_and_the_next_page_highlights_it():
    first = out_of_time(DEPLOY)

    assert HIGHLIGHTED not in first and "import os" in first
    assert cache.get(cache_key(markup.cache_source(DEPLOY))) is None
    [second] = rendering.context_files({"context": {"files": [DEPLOY]}})
    assert HIGHLIGHTED in second.html


def test_a_file_cut_by_its_time_twice_is_cached_as_escaped_text():
    item = {"path": "slow.md", "format": "markdown", "content": "[" * 40_000}
    out_of_time(item)
    assert cache.get(cache_key(markup.cache_source(item))) is None

    slow = out_of_time(item)

    assert slow.startswith('<pre class="bpm-pre">[[[')
    assert cache.get(cache_key(markup.cache_source(item))) == slow
    [later] = rendering.context_files({"context": {"files": [item]}})
    assert later.html == slow


def test_a_code_file_s_clock_starts_after_its_lexer_is_looked_up(monkeypatch):
    """The first lookup of a language in a process imports its lexer's module: that time is
    not the file's. (Shown by the deadline the lexing gets, not by timing anything.)"""
    looked_up: list[float] = []
    deadlines: list[float] = []
    lookup, code_rendering = markup.lexer_for, markup.code_rendering

    def slow_lookup(language, path=None):
        time.sleep(0.01)  # a module import: the monotonic clock moves on
        looked_up.append(time.monotonic())
        return lookup(language, path)

    def recorded(content, lexer, deadline):
        deadlines.append(deadline)
        return code_rendering(content, lexer, deadline)

    monkeypatch.setattr(markup, "lexer_for", slow_lookup)
    monkeypatch.setattr(markup, "code_rendering", recorded)

    [rendered] = rendering.context_files(
        {"context": {"files": [DEPLOY]}}, RenderBudget(seconds=60, file_seconds=5)
    )

    assert HIGHLIGHTED in rendered.html
    assert deadlines[0] >= looked_up[0] + 5


def test_the_default_budget_is_a_setting(settings):
    settings.BPM_RENDER_BUDGET_SECONDS = 0
    assert rendering.render_markdown("# Title").startswith('<pre class="bpm-pre">')
