"""A reviewer's real session in the console, checked from the agent's side over HTTP."""

import re

import pytest
from playwright.sync_api import expect

from tests.live.e2e.conftest import needs_chromium
from tests.support.api import Agent
from tests.support.receipts import unsealed

pytestmark = [pytest.mark.e2e, needs_chromium, pytest.mark.django_db(transaction=True)]

MARKDOWN = "# Rollout plan\n\nWe migrate **billing** in two steps.\n\n- add column\n- backfill\n"
CODE = "def backfill(db):\n    for row in db.rows():\n        row.save()\n    return True\n"


def _plan_review(agent: Agent) -> str:
    return agent.post(
        runId="run-123",
        tags=["billing", "db"],
        ttlSeconds=3600,
        payload={
            "title": "Billing migration",
            "question": "Approve the billing migration plan?",
            "context": {
                "files": [
                    {"path": "artifacts/plan.md", "format": "markdown", "content": MARKDOWN},
                    {
                        "path": "scripts/backfill.py",
                        "format": "code",
                        "language": "python",
                        "content": CODE,
                    },
                ]
            },
        },
    )


def test_reviewer_filters_reads_and_rejects_with_feedback(
    live_server, agent, e2e_reviewer, new_page, login, screenshot
):
    breakpoint_id = _plan_review(agent)
    agent.post(tags=["deploy"], payload={"title": "Deploy", "question": "Deploy 2.4.1?"})
    page = login(new_page(), e2e_reviewer)
    # Logging in lands on the waiting queue, oldest first.
    expect(page.locator("h1")).to_have_text("Queue")
    expect(page.locator("#result_list tbody tr")).to_have_count(2)
    expect(page.locator("#result_list tbody tr").first).to_contain_text("Billing migration")

    page.goto(f"{live_server.url}/admin/breakpoints/breakpoint/")
    expect(page.locator("#result_list")).to_contain_text("Deploy")
    expect(page.locator(".bpm-waiting__count")).to_have_text("2")
    page.fill("input[name=tag]", "billing")
    page.press("input[name=tag]", "Enter")
    page.wait_for_url(re.compile(r"tag=billing"))
    rows = page.locator("#result_list tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("Billing migration")
    expect(rows.first.locator(".bpm-badge--waiting")).to_be_visible()
    screenshot(page, "console-queue")

    page.click("text=Billing migration")
    expect(page.locator("h1.bpm-ask")).to_have_text("Approve the billing migration plan?")
    expect(page.locator(".bpm-markdown h1")).to_have_text("Rollout plan")
    expect(page.locator(".bpm-markdown strong")).to_have_text("billing")
    code = page.locator(".bpm-file--code .bpm-highlight")
    expect(code.locator("span.k").first).to_have_text("def")  # a highlighted keyword
    expect(code.locator("span.nf")).to_have_text("backfill")  # the function name
    screenshot(page, "console-detail")

    page.fill("textarea[name=comment]", "Split the backfill into batches.")
    page.check("input[name=decision][value=reject]")
    page.click("text=Review and release")
    expect(page.locator("body")).to_contain_text("The agent will receive this result")
    preview = page.locator(".bpm-card .bpm-highlight").inner_text()
    assert '"approved": false' in preview
    assert '"feedback": "Split the backfill into batches."' in preview
    assert agent.status(breakpoint_id)["status"] == "waiting"  # nothing sent before confirming
    screenshot(page, "console-confirm")
    page.click("text=Send rejection")

    expect(page.locator(".messagelist")).to_contain_text("was rejected")
    assert "tag=billing" in page.url  # back to the queue, filters kept
    # The queue says what was decided, not just "released".
    expect(rows.first.locator(".bpm-badge")).to_have_text("Released · rejected")
    expect(rows.first.locator(".bpm-badge--rejected")).to_be_visible()
    rows.first.locator(".bpm-title").click()
    expect(page.locator(".bpm-head .bpm-badge")).to_have_text("Released · rejected")
    expect(page.locator(".bpm-head__finish")).to_contain_text("decided")
    expect(page.locator(".bpm-head__finish")).to_contain_text("by rita")
    screenshot(page, "console-rejected-detail")
    status = agent.status(breakpoint_id)
    assert status["status"] == "released"
    assert status["result"]["approved"] is False
    assert status["result"]["feedback"] == "Split the backfill into batches."
    assert status["result"]["respondedBy"] == "rita"


def test_reviewer_chooses_one_of_the_options(live_server, agent, e2e_reviewer, new_page, login):
    breakpoint_id = agent.post(
        payload={"question": "When do we ship?", "options": ["Ship now", "Ship Monday"]}
    )
    page = login(new_page(), e2e_reviewer)
    page.goto(f"{live_server.url}/admin/breakpoints/breakpoint/")
    page.click("text=When do we ship?")
    page.check("label:has-text('Ship Monday') input")
    page.fill("textarea[name=comment]", "Not on a Friday.")
    page.check("input[name=decision][value=reject]")
    page.click("text=Review and release")
    preview = page.locator(".bpm-card .bpm-highlight").inner_text()
    assert '"option": "Ship Monday"' in preview and '"approved": false' in preview
    page.click("text=Send rejection with option “Ship Monday”")
    expect(page.locator(".messagelist")).to_contain_text("Ship Monday")

    status = agent.status(breakpoint_id)
    assert status["status"] == "released"
    assert status["result"]["option"] == "Ship Monday"
    assert status["result"]["approved"] is False


def test_an_option_that_carries_its_verdict_releases_with_it(
    live_server, agent, e2e_reviewer, new_page, login
):
    breakpoint_id = agent.post(
        payload={
            "question": "Deploy now?",
            "options": [
                {"label": "Deploy", "approved": True},
                {"label": "Hold", "approved": False},
            ],
        }
    )
    page = login(new_page(), e2e_reviewer)
    page.goto(f"{live_server.url}/admin/breakpoints/breakpoint/")
    page.click("text=Deploy now?")
    expect(page.locator("label:has-text('Hold') [data-bpm-verdict]")).to_have_text("rejects")
    page.check("label:has-text('Hold') input")
    page.click("text=Review and release")
    assert '"approved": false' in page.locator(".bpm-card .bpm-highlight").inner_text()
    page.click("text=Send rejection with option “Hold”")
    expect(page.locator(".messagelist")).to_contain_text("Hold")

    status = agent.status(breakpoint_id)
    assert (status["result"]["approved"], status["result"]["option"]) == (False, "Hold")


def test_only_admins_see_and_use_expire(
    live_server, agent, e2e_reviewer, e2e_admin, new_page, login
):
    breakpoint_id = agent.post(payload={"question": "Rotate the keys?"})
    detail = f"{live_server.url}/admin/breakpoints/breakpoint/"

    reviewer_page = login(new_page(), e2e_reviewer)
    reviewer_page.goto(detail)
    reviewer_page.click("text=Rotate the keys?")
    expect(reviewer_page.locator("h1.bpm-ask")).to_be_visible()
    expect(reviewer_page.locator("#bpm-expire")).to_have_count(0)

    admin_page = login(new_page(), e2e_admin)
    admin_page.goto(detail)
    admin_page.click("text=Rotate the keys?")
    admin_page.click("#bpm-expire")
    admin_page.fill("input[name=reason]", "Superseded")
    admin_page.click("text=Expire now")
    expect(admin_page.locator(".messagelist")).to_contain_text("Expired")
    expect(admin_page.locator(".bpm-head .bpm-badge")).to_have_text("Expired")

    status = agent.status(breakpoint_id)
    assert status["status"] == "expired"
    assert unsealed(status["result"], via="console") == {
        "approved": False,
        "feedback": "Superseded",
        "respondedBy": "adam",
    }


def test_queue_refreshes_itself_and_keeps_the_filters(
    live_server, agent, e2e_reviewer, new_page, login
):
    agent.post(tags=["billing"], payload={"question": "First billing question?"})
    page = login(new_page(), e2e_reviewer)
    page.goto(f"{live_server.url}/admin/breakpoints/breakpoint/?tag=billing")
    expect(page.locator("#result_list tbody tr")).to_have_count(1)
    url = page.url

    agent.post(tags=["billing"], payload={"question": "Second billing question?"})
    agent.post(tags=["deploy"], payload={"question": "Unrelated deploy question?"})

    # No reload: console.js polls the same URL every few seconds and swaps the rows in.
    expect(page.locator("#result_list tbody tr")).to_have_count(2, timeout=15_000)
    expect(page.locator("#result_list")).to_contain_text("Second billing question?")
    expect(page.locator("#result_list")).not_to_contain_text("Unrelated deploy")
    expect(page.locator(".bpm-waiting__count")).to_have_text("3")
    assert page.url == url


def test_review_page_notices_a_release_made_elsewhere(
    live_server, agent, e2e_reviewer, new_page, login
):
    """Another reviewer decides while this page is open: a notice, and no second release."""
    from breakpoints.services import feedback_add
    from core.actors import Actor
    from tests.support.factories import ReviewerFactory

    breakpoint_id = agent.post(payload={"question": "Merge the hotfix?"})
    page = login(new_page(), e2e_reviewer)
    page.goto(f"{live_server.url}/admin/breakpoints/breakpoint/")
    page.click("text=Merge the hotfix?")
    expect(page.locator("#bpm-stale")).to_be_hidden()

    bob = ReviewerFactory(username="bob")
    feedback_add(
        breakpoint_id=breakpoint_id, actor=Actor.for_user(bob), comment="Merged", release=True
    )

    expect(page.locator("#bpm-stale")).to_be_visible(timeout=15_000)
    expect(page.locator("#bpm-stale")).to_contain_text("released")
    expect(page.locator("text=Review and release")).to_be_disabled()
    expect(page.locator(".bpm-head .bpm-badge")).to_have_text("Released · approved")
    expect(page.locator(".bpm-head__finish")).to_contain_text("by bob")
    assert agent.status(breakpoint_id)["result"]["respondedBy"] == "bob"
