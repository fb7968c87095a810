"""A gated MCP call's review page in a real browser. The breakpoint is the one `bpm gateway`
opens (its own code builds it) for `write_file` on `filesystem`, created through the SDK
against the live server: the title is the headline, the instruction plain text under it,
the arguments a table in the main column; the reviewer edits the file's text and the
confirmation step shows the edit as a line diff against the arguments, before the result.
A screenshot of each step is written under /tmp (BPM_E2E_SHOTS) for a person to look at."""

import os
from pathlib import Path

import pytest
from bpm_client import Client
from bpm_client.gateway.config import Defaults, Rule
from bpm_client.gateway.decisions import breakpoint_fields
from playwright.sync_api import expect

from accounts.tokens import token_create_for_agent
from breakpoints.models import Breakpoint
from tests.live.e2e.conftest import needs_chromium
from tests.support.console import review_url

pytestmark = [pytest.mark.e2e, needs_chromium, pytest.mark.django_db(transaction=True)]

SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
    "required": ["path", "content"],
    "additionalProperties": False,
}
CONTENT = 'def greet(name):\n    return f"Hello, {name}"\n\n\nprint(greet("world"))\n'
ARGUMENTS = {"path": "/srv/app/greet.py", "content": CONTENT}
SHOTS = Path(os.environ.get("BPM_E2E_SHOTS", "/tmp/bpm-e2e-shots"))


def test_a_gated_calls_page_shows_the_call_and_the_edit_as_a_diff(
    live_server, e2e_reviewer, new_page, login
):
    question, fields = breakpoint_fields(
        server="filesystem",
        tool="write_file",
        description="Create a new file or completely overwrite an existing file.",
        schema=SCHEMA,
        arguments=ARGUMENTS,
        rule=Rule(tools=("write_file",), action="ask"),
        defaults=Defaults(),
    )
    _, token = token_create_for_agent(agent_id="gateway")
    with Client(live_server.url, token, strict=True) as agent:
        created = agent.create(question, **fields)

    page = login(new_page(), e2e_reviewer)
    page.goto(live_server.url + review_url(created.breakpoint_id))
    head = page.locator("#bpm-head")
    expect(head.locator("h1")).to_have_text("Call write_file on filesystem?")
    lede = head.locator("#bpm-lede")
    expect(lede).to_contain_text("run the tool write_file on the MCP server filesystem")
    expect(lede.locator("code").first).to_have_text("write_file")
    assert "`" not in lede.inner_text()

    table = page.locator(".bpm-main #bpm-proposal table")
    expect(table.locator("tbody tr")).to_have_count(2)
    expect(table.locator("tr[data-bpm-value=path] td")).to_have_text("/srv/app/greet.py")
    code = table.locator("tr[data-bpm-value=content] td .bpm-highlight")
    expect(code.locator(".k").first).to_have_text("def")  # highlighted as Python
    expect(code).to_contain_text('return f"Hello, {name}"')
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "gated-call-review.png"), full_page=True)

    answer = page.locator("#bpm-answer")
    expect(answer.locator("textarea[name=value__content]")).to_have_value(CONTENT)
    answer.locator("textarea[name=value__content]").fill(CONTENT.replace("Hello", "Hi"))
    page.check("input[name=decision][value=approve]")
    page.click("text=Review and release")

    changes = page.locator("#bpm-answer-changes")
    expect(changes.locator("tbody tr")).to_have_count(1)
    diff = changes.locator("[data-bpm-change=content] .bpm-highlight")
    expect(diff.locator(".gd")).to_have_text('-    return f"Hello, {name}"')
    expect(diff.locator(".gi")).to_have_text('+    return f"Hi, {name}"')
    result_top = page.locator("#bpm-result-preview").bounding_box()
    assert changes.bounding_box()["y"] < result_top["y"], "the changes come first"
    page.screenshot(path=str(SHOTS / "gated-call-confirm.png"), full_page=True)

    page.click("text=Send approval")
    expect(page.locator(".messagelist")).to_contain_text("approved")
    result = Breakpoint.objects.get(pk=created.breakpoint_id).result
    assert result["values"] == {**ARGUMENTS, "content": CONTENT.replace("Hello", "Hi")}
