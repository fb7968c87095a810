"""Edit, then approve (issue 36) in a real browser: an agent asks with a form and a
proposal through the SDK and waits; a reviewer changes a field on the review page, sees the
change on the confirm step, approves; the agent's wait returns the edited values."""

import threading

import pytest
from bpm_client import Client
from playwright.sync_api import expect

from accounts.tokens import token_create_for_agent
from tests.live.e2e.conftest import needs_chromium

pytestmark = [pytest.mark.e2e, needs_chromium, pytest.mark.django_db(transaction=True)]

FORM = {
    "type": "object",
    "properties": {
        "environment": {"type": "string", "title": "Environment", "enum": ["staging", "prod"]},
        "replicas": {"type": "integer", "title": "Replicas", "minimum": 1, "maximum": 10},
        "notify": {"type": "boolean", "title": "Notify the team"},
    },
    "required": ["environment", "replicas"],
}
PROPOSAL = {"environment": "prod", "replicas": 3, "notify": True}
SAFETY_SECONDS = 60  # a bound for the agent's thread, never an assertion


def test_a_reviewer_edits_a_field_sees_it_on_the_confirm_step_and_the_agent_gets_it(
    live_server, e2e_reviewer, new_page, login, screenshot
):
    _, token = token_create_for_agent(agent_id="agent-forms")
    created, answers = threading.Event(), []
    with Client(live_server.url, token, strict=True, hold=2) as agent:

        def ask() -> None:
            answers.append(
                agent.breakpoint(
                    "Deploy 2.4.1?",
                    title="Deploy with a form",
                    form=FORM,
                    proposal=PROPOSAL,
                    timeout=SAFETY_SECONDS,
                    on_created=lambda _: created.set(),
                )
            )

        waiting = threading.Thread(target=ask)
        waiting.start()
        assert created.wait(SAFETY_SECONDS), "the agent's breakpoint was not created"

        page = login(new_page(), e2e_reviewer)
        page.click("text=Deploy with a form")
        answer = page.locator("#bpm-answer")
        expect(answer.locator("[name=value__environment]")).to_have_value("prod")
        expect(answer.locator("[name=value__replicas]")).to_have_value("3")
        expect(answer.locator("[name=value__notify]")).to_be_checked()
        answer.locator("[name=value__replicas]").fill("5")
        page.check("input[name=decision][value=approve]")
        page.click("text=Review and release")

        changes = page.locator("#bpm-answer-changes")
        expect(changes.locator("h2")).to_have_text("Your changes to the proposal")
        expect(changes.locator("tbody tr")).to_have_count(1)
        row = changes.locator("[data-bpm-change=Replicas]")
        expect(row.locator("td").nth(0)).to_have_text("3")
        expect(row.locator("td").nth(1)).to_have_text("5")
        assert not answers, "the agent got an answer before the reviewer confirmed"
        screenshot(page, "console-form-confirm")
        page.click("text=Send approval")
        expect(page.locator(".messagelist")).to_contain_text("approved")

        waiting.join(SAFETY_SECONDS)
        (result,) = answers
        assert result.approved is True and result.responded_by == "rita"
        assert result.values == {"environment": "prod", "replicas": 5, "notify": True}
        assert result.edited is True
        assert result.verified is True  # the receipt binds the edited values (valuesDigest)
        assert agent.verify(result)["valuesDigest"] == result.values_digest
