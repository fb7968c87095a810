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
