"""A context file's `format` may be omitted (issue 13): it is inferred from the path's
extension wherever the file is shown, and the stored payload stays as the agent sent it."""

from datetime import UTC, datetime

import pytest
from pygments.lexers import get_lexer_by_name

from breakpoints.models import Breakpoint
from channels.email import messages as email
from channels.slack import blocks as slack_blocks
from core.fileformats import (
    CODE_EXTENSIONS,
    CODE_FILE_NAMES,
    file_format,
    infer_format,
)
from tests.support.console import review_url, session_client
from tests.support.factories import ReviewerFactory
from web.rendering.markup import render_context_file

URL = "/api/breakpoints"

INFERENCE = [
    ("docs/plan.md", "markdown", None),
    ("README.MARKDOWN", "markdown", None),
    ("out/report.html", "html", None),
    ("out/page.HTM", "html", None),
    ("src/app.py", "code", "python"),
    ("web/app.js", "code", "javascript"),
    ("web/app.ts", "code", "typescript"),
    ("web/App.tsx", "code", "tsx"),
    ("web/App.jsx", "code", "jsx"),
    ("cmd/main.go", "code", "go"),
    ("src/lib.rs", "code", "rust"),
    ("src/Main.java", "code", "java"),
    ("lib/tool.rb", "code", "ruby"),
    ("scripts/run.sh", "code", "bash"),
    ("scripts/run.bash", "code", "bash"),
    ("deploy/values.yaml", "code", "yaml"),
    (".github/workflows/ci.yml", "code", "yaml"),
    ("package.json", "code", "json"),
    ("pyproject.toml", "code", "toml"),
    ("db/001_init.sql", "code", "sql"),
    ("src/main.c", "code", "c"),
    ("include/main.h", "code", "c"),
    ("src/main.cpp", "code", "cpp"),
    ("src/Program.cs", "code", "csharp"),
    ("app/Main.kt", "code", "kotlin"),
    ("app/View.swift", "code", "swift"),
    ("web/index.php", "code", "php"),
    ("infra/main.tf", "code", "hcl"),
    ("web/site.css", "code", "css"),
    ("changes.diff", "code", "diff"),
    ("fix.patch", "code", "diff"),
    ("Dockerfile", "code", "dockerfile"),
    ("build/Dockerfile.prod", "code", "dockerfile"),
    ("Makefile", "code", "make"),
    ("windows\\dir\\tool.py", "code", "python"),
    ("notes.txt", "text", None),
    ("LICENSE", "text", None),
    (".env", "text", None),
    ("archive.tar.gz", "text", None),
    ("md", "text", None),
    (None, "text", None),
]


@pytest.mark.parametrize("path, expected_format, expected_language", INFERENCE)
def test_the_format_of_a_file_without_one_comes_from_its_extension(
    path, expected_format, expected_language
):
    assert infer_format(path) == (expected_format, expected_language)
    assert file_format({"path": path}) == (expected_format, expected_language)
    assert file_format({"path": path, "format": None}) == (expected_format, expected_language)


def test_every_inferred_language_is_one_the_console_can_highlight():
    for language in {*CODE_EXTENSIONS.values(), *CODE_FILE_NAMES.values()}:
        assert get_lexer_by_name(language).name != "Text only", language


def test_the_agents_format_wins_over_the_extension():
    assert file_format({"path": "src/app.py", "format": "text"}) == ("text", None)
    assert file_format({"path": "notes.txt", "format": "markdown"}) == ("markdown", None)


def test_an_explicit_code_format_still_gets_the_extensions_language():
    assert file_format({"path": "src/app.py", "format": "code"}) == ("code", "python")
    assert file_format({"path": "notes.txt", "format": "code"}) == ("code", None)


def test_the_agents_language_wins_over_the_inferred_one():
    assert file_format({"path": "build.py", "language": "starlark"}) == ("code", "starlark")
    assert file_format({"path": "x.py", "format": "code", "language": " go "}) == ("code", "go")
    assert file_format({"path": "x.py", "language": ""}) == ("code", "python")


def test_a_rendered_python_file_without_format_is_highlighted_code():
    rendered = render_context_file({"path": "src/app.py", "content": "def main():\n    pass\n"})

    assert (rendered.format, rendered.language) == ("code", "python")
    assert '<div class="bpm-highlight">' in rendered.html
    assert '<span class="k">def</span>' in rendered.html


def test_an_unknown_language_falls_back_to_the_file_name():
    rendered = render_context_file(
        {"path": "src/app.py", "language": "no-such-language", "content": "def main(): pass"}
    )

    assert '<span class="k">def</span>' in rendered.html


# --- the API -------------------------------------------------------------------------------


def test_a_breakpoint_with_files_without_format_is_created_and_stored_as_sent(agent_client):
    payload = {
        "question": "Ship it?",
        "context": {
            "files": [
                {"path": "docs/plan.md", "content": "# Plan"},
                {"path": "src/app.py", "format": None, "content": "x = 1"},
                {"path": "Dockerfile", "language": "docker"},
            ]
        },
    }

    response = agent_client.post(URL, {"payload": payload}, format="json")

    assert response.status_code == 201, response.content
    assert response.json()["payload"] == payload
    assert Breakpoint.objects.get(pk=response.json()["breakpointId"]).payload == payload


@pytest.mark.parametrize("bad", ["pdf", "Markdown", "", 3, {"kind": "code"}])
def test_a_present_but_invalid_format_is_still_refused(agent_client, bad):
    payload = {"context": {"files": [{"path": "docs/plan.md", "format": bad}]}}

    response = agent_client.post(URL, {"payload": payload}, format="json")

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "validation_error"
    assert "payload.context.files[0].format" in error["details"]
    assert not Breakpoint.objects.exists()


# --- where files are shown -----------------------------------------------------------------


def test_the_console_renders_files_without_format_by_their_extension(make_breakpoint):
    bp = make_breakpoint(
        payload={
            "question": "Review?",
            "context": {
                "files": [
                    {"path": "artifacts/plan.md", "content": "# The plan\n\n- one"},
                    {"path": "code/main.py", "content": "def main():\n    return 42\n"},
                    {"path": "notes.txt", "content": "*not markdown*"},
                ]
            },
        }
    )
    browser = session_client(ReviewerFactory(username="rita"))

    response = browser.get(review_url(bp.pk))

    assert response.status_code == 200
    html = response.content.decode()
    files = html[html.index('id="bpm-files"') :]
    assert '<article class="bpm-file bpm-file--markdown">' in files
    assert "<h1>The plan</h1>" in files and "<li>one</li>" in files
    assert '<article class="bpm-file bpm-file--code">' in files
    assert "code &middot; python" in files
    assert '<div class="bpm-highlight">' in files and '<span class="k">def</span>' in files
    assert '<article class="bpm-file bpm-file--text">' in files
    assert '<pre class="bpm-pre">*not markdown*</pre>' in files


def test_mail_and_slack_name_the_inferred_format():
    data = {
        "breakpointId": "bp-formats",
        "question": "Review?",
        "payload": {
            "context": {
                "files": [
                    {"path": "plan.md", "content": "# Plan"},
                    {"path": "main.go", "content": "package main"},
                ]
            }
        },
    }

    mailed = email.announce_context(data, "created", {})["files"]
    _, blocks = slack_blocks.announcement(data, "created", datetime.now(UTC), in_thread=False)

    assert [f["format"] for f in mailed] == ["markdown", "code"]
    assert '<div class="bpm-markdown"><h1>Plan</h1>' in mailed[0]["html"]
    texts = [b["text"]["text"] for b in blocks if b["type"] == "section" and "text" in b]
    assert any(text.startswith("*plan.md* (markdown)") for text in texts)
    assert any(text.startswith("*main.go* (go)") for text in texts)
