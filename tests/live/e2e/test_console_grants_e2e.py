"""Grants through a reviewer's real session: "Approve, and allow this for the next 2
calls" on the review page approves the agent's next two breakpoints of that key at
creation and not the third; Revoke on the grants page stops a grant at once."""

import pytest
from playwright.sync_api import expect

from breakpoints.models import Breakpoint
from grants.models import Grant
from tests.live.e2e.conftest import needs_chromium
from tests.support.api import Agent
from tests.support.grants import granted

pytestmark = [pytest.mark.e2e, needs_chromium, pytest.mark.django_db(transaction=True)]

KEY = "fs.write-file"


def _write(agent: Agent, path: str, key: str = KEY) -> str:
    return agent.post(
        runId="session-1",
        payload={"question": f"Write {path}?", "breakpointId": key, "title": "Write a file"},
    )


def test_a_grant_for_the_next_two_calls_approves_two_and_the_third_waits(
    live_server, agent, e2e_reviewer, new_page, login, screenshot
):
    first = _write(agent, "a.txt")
    page = login(new_page(), e2e_reviewer)
    page.click("text=Write a.txt?")
    grant_box = page.locator("#bpm-grant")
    expect(grant_box).to_contain_text("for the rest of this run")
    grant_box.locator("input[name=grant][value=calls]").check()
    page.fill("input[name=grant_uses]", "2")
    page.check("input[name=decision][value=approve]")
    screenshot(page, "console-grant-offer")
    page.click("text=Review and release")

    preview = page.locator("#bpm-grant-preview")
    expect(preview).to_contain_text(f"agent agent-7 with the key {KEY} in any run")
    expect(preview).to_contain_text("the next 2 of them")
    expect(preview).to_contain_text("never applies under four eyes")
    assert agent.status(first)["status"] == "waiting"  # nothing written before confirming
    assert not Grant.objects.exists()
    screenshot(page, "console-grant-confirm")
    page.click("text=Send approval and give the grant")
    expect(page.locator(".messagelist")).to_contain_text("was approved. Grant grant-")

    grant = Grant.objects.get()
    assert agent.status(first)["result"]["approved"] is True
    second, third, fourth = (_write(agent, name) for name in ("b.txt", "c.txt", "d.txt"))
    for approved in (second, third):
        status = agent.status(approved)
        assert status["status"] == "released" and status["result"]["approved"] is True
        assert status["result"]["respondedBy"] == f"grant:{grant.pk}"
    assert agent.status(fourth)["status"] == "waiting"

    # The grants page lists it, used up: nothing left to revoke.
    page.goto(f"{live_server.url}/admin/grants/grant/?state=ended")
    row = page.locator("#result_list tbody tr")
    expect(row).to_have_count(1)
    expect(row).to_contain_text("0 of 2")
    expect(row.locator(".bpm-revoke")).to_have_count(0)


def test_revoking_from_the_grants_page_stops_the_grant(
    live_server, agent, e2e_reviewer, new_page, login, screenshot
):
    given_on = _write(agent, "a.txt", key="deploy.api")
    grant = granted(e2e_reviewer, Breakpoint.objects.get(pk=given_on), uses=5)
    covered = _write(agent, "b.txt", key="deploy.api")
    assert agent.status(covered)["status"] == "released"  # live until revoked

    page = login(new_page(), e2e_reviewer)
    page.goto(f"{live_server.url}/admin/grants/grant/")
    row = page.locator("#result_list tbody tr")
    expect(row).to_have_count(1)
    expect(row).to_contain_text("4 of 5")
    expect(row).to_contain_text("deploy.api")
    expect(row.locator(f"a[href$='{given_on}/change/']")).to_have_count(1)
    screenshot(page, "console-grants")
    row.locator(".bpm-revoke").click()
    expect(page.locator("#bpm-grant-revoke")).to_contain_text("4 more of them")
    assert Grant.objects.get().revoked_at is None  # the confirmation revokes nothing
    page.click("#bpm-revoke-form button[name=confirm]")
    expect(page.locator(".messagelist")).to_contain_text(f"Revoked grant {grant.pk}")
    expect(page.locator("#result_list tbody tr")).to_have_count(0)

    after = _write(agent, "c.txt", key="deploy.api")
    assert agent.status(after)["status"] == "waiting"
