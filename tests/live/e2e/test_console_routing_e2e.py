"""Browser tests for "Always approve" and routed breakpoints, checked from the agent's side."""

import pytest
from playwright.sync_api import expect

from breakpoints.services import feedback_add
from core.actors import Actor
from policies.models import AutoApprovalRule
from tests.live.e2e.conftest import needs_chromium

pytestmark = [pytest.mark.e2e, needs_chromium, pytest.mark.django_db(transaction=True)]


def test_reviewer_always_approves_and_the_next_one_needs_nobody(
    live_server, agent, e2e_reviewer, new_page, login, screenshot
):
    payload = {
        "title": "Star repository",
        "question": "Star the repository on GitHub?",
        "breakpointId": "confirm.star-repo",
        "presentAlwaysApprove": True,
    }
    breakpoint_id = agent.post(payload=payload)
    page = login(new_page(), e2e_reviewer)
    page.goto(f"{live_server.url}/admin/breakpoints/breakpoint/")
    page.click("text=Star repository")
    page.fill("textarea[name=comment]", "Routine: fine every time.")
    page.click("#bpm-always-approve")

    # The confirmation shows the result and the rule; nothing is sent yet.
    expect(page.locator("body")).to_contain_text("The agent will receive this result")
    expect(page.locator("#bpm-rule-preview")).to_contain_text("confirm.star-repo")
    preview = page.locator(".bpm-card .bpm-highlight").inner_text()
    assert '"approved": true' in preview
    assert '"feedback": "Routine: fine every time."' in preview
    assert agent.status(breakpoint_id)["status"] == "waiting"
    assert not AutoApprovalRule.objects.exists()
    screenshot(page, "console-always-approve-confirm")
    page.click("text=Confirm: approve and add the rule")

    expect(page.locator(".messagelist")).to_contain_text("now auto-approves key")
    status = agent.status(breakpoint_id)
    assert status["status"] == "released"
    assert status["result"]["approved"] is True
    assert status["result"]["respondedBy"] == "rita"
    rule = AutoApprovalRule.objects.get()
    assert (rule.pattern, rule.action, rule.created_by) == (
        "confirm.star-repo",
        "auto-approve",
        "rita",
    )

    # The agent's next breakpoint with that key is released by the rule at once.
    response = agent.http.post("/api/breakpoints", json={"payload": payload})
    assert response.status_code == 201
    assert response.json()["status"] == "released"
    assert response.json()["result"]["respondedBy"] == f"rule:{rule.pk}"


def test_quorum_review_page_shows_seats_votes_and_what_is_missing(
    live_server, agent, e2e_reviewer, new_page, login, screenshot, expert_member
):
    tina = expert_member("tina", "tech-lead")
    expert_member("oscar", "ops-lead")
    breakpoint_id = agent.post(
        payload={
            "title": "Production Deployment",
            "question": "Approve production deployment of 2.4.1?",
            "expert": ["tech-lead", "ops-lead", "security-lead"],
            "strategy": "quorum",
        }
    )
    feedback_add(
        breakpoint_id=breakpoint_id,
        actor=Actor.for_user(tina),
        comment="Rollback plan reviewed; go.",
        release=True,
        approved=True,
    )
    page = login(new_page(), e2e_reviewer)
    page.goto(f"{live_server.url}/admin/breakpoints/breakpoint/")
    row = page.locator("#result_list tbody tr", has_text="Production Deployment")
    expect(row.locator(".bpm-badge--warn")).to_have_text("unresolved expert")
    row.locator(".bpm-title").click()

    seats = page.locator("#bpm-seats")
    expect(seats).to_contain_text("quorum")
    expect(seats.locator(".bpm-seat")).to_have_count(3)
    tech = seats.locator(".bpm-seat", has_text="tech-lead")
    expect(tech.locator(".bpm-badge--approved")).to_have_text("approved")
    expect(tech).to_contain_text("Rollback plan reviewed; go.")
    security = seats.locator(".bpm-seat", has_text="security-lead")
    expect(security).to_contain_text("resolves to nobody — admins answer")
    expect(seats.locator(".bpm-seats__missing")).to_contain_text("1 more approval(s) needed")
    # rita holds no seat: she may comment, not vote, and "Always approve" is not offered.
    expect(page.locator("#bpm-always-approve")).to_have_count(0)
    screenshot(page, "console-quorum-seats")
    assert agent.status(breakpoint_id)["status"] == "waiting"
