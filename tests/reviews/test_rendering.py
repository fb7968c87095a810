"""Rendering of what agents send: sanitized markdown, highlighted code, escaped text."""

from datetime import timedelta

from pygments.lexers.special import TextLexer

from reviews import rendering


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
