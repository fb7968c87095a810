"""What a newcomer meets first: the service's address, and a wrong Authorization scheme."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_the_root_address_leads_to_the_console_login(client, db):
    response = client.get("/", follow=True)

    assert response.redirect_chain[0] == ("/admin/", 302)
    assert response.status_code == 200
    assert response.request["PATH_INFO"] == "/admin/login/"


@pytest.mark.parametrize(
    "header, got",
    [
        ("Token {token}", "the scheme 'Token'"),
        ("{token}", "a value with no scheme"),
        ("Basic dXNlcjpwYXNz", "the scheme 'Basic'"),
    ],
)
def test_a_wrong_scheme_says_to_use_bearer_without_echoing_the_token(
    client, agent_token, header, got
):
    response = client.get("/api/breakpoints", HTTP_AUTHORIZATION=header.format(token=agent_token))

    assert response.status_code == 401
    message = response.json()["error"]["message"]
    assert "Authorization: Bearer <token>" in message
    assert got in message
    assert agent_token not in response.content.decode()


def test_the_right_scheme_in_any_case_still_works(client, agent_token):
    response = client.get("/api/breakpoints", HTTP_AUTHORIZATION=f"bearer {agent_token}")

    assert response.status_code == 200


@pytest.mark.parametrize("path", ["/admin/login/", "/decide/not-a-token"])
def test_console_and_decision_pages_carry_a_content_security_policy(client, db, path):
    response = client.get(path)

    policy = response["Content-Security-Policy"]
    assert "script-src 'self'" in policy
    assert "frame-ancestors 'none'" in policy
    assert "object-src 'none'" in policy


def test_the_api_docs_page_keeps_its_own_scripts(client, db):
    assert "Content-Security-Policy" not in client.get("/api/docs")


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_help_lists_every_target_with_a_line_of_its_own():
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z][a-z-]*):", makefile, re.MULTILINE))

    result = subprocess.run(
        ["make", "--no-print-directory", "help"], cwd=ROOT, capture_output=True, text=True
    )

    assert result.returncode == 0, result.stderr
    listed = dict(re.findall(r"^  make (\S+)\s+(.+)$", result.stdout, re.MULTILINE))
    assert {"run", "test", "help", "lint", "docs", "bench", "bench-smoke"} <= set(listed)
    assert set(listed) == targets, (sorted(targets), sorted(listed))
    assert all(text.strip() for text in listed.values())


def test_the_docs_port_is_neither_make_runs_nor_the_one_the_readme_suggests_instead():
    makefile = (ROOT / "Makefile").read_text()
    readme = (ROOT / "README.md").read_text()
    [docs_port] = re.findall(r"^DOCS_PORT \?= (\d+)$", makefile, re.MULTILINE)
    [docs_serve_help] = re.findall(r"^docs-serve:.*## (.+)$", makefile, re.MULTILINE)
    suggested = set(re.findall(r"BPM_PORT=(\d+)", readme))

    assert suggested, "the README suggests a BPM_PORT for when 8000 is taken"
    assert docs_port not in suggested | {"8000"}
    assert f"http://127.0.0.1:{docs_port}" in docs_serve_help
    assert f"`make docs-serve` serves them on http://127.0.0.1:{docs_port}" in readme
    # Nothing else here listens there (the Procfiles, compose, the guides' examples).
    others = [ROOT / "Procfile", ROOT / "Procfile.dev", ROOT / "compose.yaml"]
    for path in [*others, *(ROOT / "docs").glob("*.md")]:
        for line in path.read_text().splitlines():
            if re.search(rf"\b{docs_port}\b", line):
                assert "docs-serve" in line or "DOCS_PORT" in line, (path.name, line)


QUICK_START_PAGES = [ROOT / "README.md", ROOT / "docs" / "getting-started.md"]
REDIRECTION = re.compile(r"(?<![0-9&<>])>{1,2}\s*(\"[^\"]*\"|'[^']*'|[^\s;|&)]+)")


@pytest.mark.parametrize("page", QUICK_START_PAGES, ids=lambda page: page.name)
def test_the_quick_start_writes_no_file_into_the_repository(page):
    """Its commands run in the checkout (`.venv/bin/bpm`): a file it writes must go
    elsewhere (a temporary folder), never be left in the repository's working tree."""
    shell = re.findall(r"^```(?:bash|sh)\n(.*?)^```", page.read_text(), re.MULTILINE | re.DOTALL)
    targets = [target.strip("\"'") for body in shell for target in REDIRECTION.findall(body)]

    assert targets, "the quick start writes the plan it attaches"
    for target in targets:
        assert target.startswith(("$", "/")), f"{page.name} writes {target} into the checkout"


def test_the_guides_front_page_names_every_ci_phase_in_order():
    script = (ROOT / ".ci" / "run").read_text()
    phases = re.findall(r"^(?:phase|background) ([\w-]+) ", script, re.MULTILINE)
    index = (ROOT / "docs" / "index.md").read_text()
    paragraph = index[index.index("CI (`.ci/run`)") :].split("\n\n")[0]
    named = [phase for phase in re.findall(r"`([\w-]+)`", paragraph) if phase in phases]

    assert named == phases


@pytest.mark.parametrize("channel", ["Slack", "email", "JIRA", "form", "single sign-on"])
def test_the_guides_introduction_names_each_way_to_review(channel):
    introduction = (ROOT / "docs" / "index.md").read_text().split("\n## ")[0]

    assert channel in introduction
