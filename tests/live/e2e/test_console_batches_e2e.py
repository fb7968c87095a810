"""A reviewer decides several breakpoints at once in the queue, and works the grouped queue."""

import re

import pytest
from playwright.sync_api import expect

from tests.live.e2e.conftest import needs_chromium

pytestmark = [pytest.mark.e2e, needs_chromium, pytest.mark.django_db(transaction=True)]

KEY = "mcp.filesystem.write-file"


def _run_action(page, action: str) -> None:
    page.select_option("select[name=action]", action)
    page.locator("button[name=index]").first.click()


def test_reviewer_approves_several_and_is_told_which_are_refused(
    live_server, agent, e2e_reviewer, new_page, login, screenshot
):
    first = agent.post(payload={"title": "Rotate keys", "question": "Rotate the keys?"})
    second = agent.post(payload={"title": "Bump deps", "question": "Bump the deps?"})
    own = agent.post(
        requestedBy="rita",
        payload={"title": "Rita's deploy", "question": "Deploy?", "preventSelfReview": True},
    )
    page = login(new_page(), e2e_reviewer)
    rows = page.locator("#result_list tbody tr")
    expect(rows).to_have_count(3)
    for n in range(3):
        rows.nth(n).locator("input.action-select").check()
    _run_action(page, "approve_selected")

    deciding = page.locator("#bpm-batch-deciding")
    expect(deciding).to_contain_text("Will be approved (2)")
    expect(deciding).to_contain_text("Rotate keys")
    expect(deciding).to_contain_text("Bump deps")
    refused = page.locator("#bpm-batch-refused")
    expect(refused).to_contain_text("Rita's deploy")
    expect(refused).to_contain_text("You requested this breakpoint (rita)")
    assert agent.status(first)["status"] == "waiting"  # nothing decided before confirming
    screenshot(page, "console-batch-confirm")

    page.fill("textarea[name=comment]", "Both fine.")
    page.click("#bpm-batch-confirm")
    expect(page.locator(".messagelist")).to_contain_text("Approved 2 breakpoints.")
    for breakpoint_id in (first, second):
        answer = agent.status(breakpoint_id)
        assert (answer["status"], answer["result"]["approved"]) == ("released", True)
        assert answer["result"]["feedback"] == "Both fine."
    assert agent.status(own)["status"] == "waiting"


def test_a_group_opens_the_filtered_queue_where_it_is_decided_together(
    live_server, agent, e2e_reviewer, new_page, login, screenshot
):
    grouped = [
        agent.post(runId="r-42", payload={"breakpointId": KEY, "question": f"Write file {n}?"})
        for n in range(3)
    ]
    other = agent.post(runId="r-43", payload={"breakpointId": KEY, "question": "Write file?"})
    page = login(new_page(), e2e_reviewer)

    page.click("#bpm-group-toggle")
    groups = page.locator("#bpm-groups tbody tr")
    expect(groups).to_have_count(2)
    expect(groups.first).to_contain_text(f"3 × {KEY} in run r-42")
    expect(groups.nth(1)).to_contain_text(f"1 × {KEY} in run r-43")
    screenshot(page, "console-groups")

    groups.first.locator("a").click()
    page.wait_for_url(re.compile(r"run=r-42"))
    expect(page.locator("#result_list tbody tr")).to_have_count(3)
    page.check("#action-toggle")
    _run_action(page, "reject_selected")
    expect(page.locator("#bpm-batch-deciding")).to_contain_text("Will be rejected (3)")
    page.click("#bpm-batch-confirm")

    expect(page.locator(".messagelist")).to_contain_text("Rejected 3 breakpoints.")
    for breakpoint_id in grouped:
        answer = agent.status(breakpoint_id)
        assert (answer["status"], answer["result"]["approved"]) == ("released", False)
    assert agent.status(other)["status"] == "waiting"
