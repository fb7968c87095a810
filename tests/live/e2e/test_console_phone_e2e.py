"""The console on a phone (390 x 844, touch): the queue and the review page fit the screen's
width, the decision panel comes after the question, buttons are big enough to tap, and a
reviewer approves, rejects and edits a form from there."""

import pytest
from playwright.sync_api import expect

from tests.live.e2e.conftest import needs_chromium
from tests.support.api import Agent

pytestmark = [pytest.mark.e2e, needs_chromium, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}
MIN_TAP = 44  # px: the smallest target a finger hits reliably (Apple's and WCAG's figure)
LONG_LINE = "    result = " + " + ".join(f"compute_the_value_{n}(argument)" for n in range(12))
CODE = f"def total(argument):\n{LONG_LINE}\n    return result\n"
MARKDOWN = (
    "# Plan\n\n| step | command | expected output |\n|---|---|---|\n"
    "| 1 | `kubectl rollout restart deployment/billing-api-server` | a restarted deployment |\n"
    "\nAn unbroken " + "x" * 120 + " word.\n"
)
FORM = {
    "type": "object",
    "properties": {
        "environment": {"type": "string", "title": "Environment", "enum": ["staging", "prod"]},
        "replicas": {"type": "integer", "title": "Replicas", "minimum": 1, "maximum": 10},
        "note": {"type": "string", "title": "Release note"},
    },
    "required": ["environment", "replicas"],
}
PROPOSAL = {"environment": "prod", "replicas": 3, "note": "rollout"}


@pytest.fixture
def phone(chromium):
    """A page in a phone's browser context (own cookies), closed after the test."""
    contexts = []

    def make():
        context = chromium.new_context(
            viewport=PHONE, is_mobile=True, has_touch=True, device_scale_factor=3
        )
        context.set_default_timeout(10_000)
        contexts.append(context)
        return context.new_page()

    yield make
    for context in contexts:
        context.close()


def _post_long(agent: Agent, question: str = "Roll out the billing change?") -> str:
    """A breakpoint with what widens a page: long code lines, a markdown table, long words."""
    return agent.post(
        runId="run-with-a-rather-long-identifier-2024-06-01T12:00:00Z",
        tags=["billing", "database-migration", "production"],
        payload={
            "title": "Billing rollout " + "with-a-long-unbroken-title-" * 3,
            "question": question,
            "context": {
                "files": [
                    {
                        "path": "src/billing/compute/" + "deep/" * 12 + "total.py",
                        "format": "code",
                        "language": "python",
                        "content": CODE,
                    },
                    {"path": "plan.md", "format": "markdown", "content": MARKDOWN},
                ]
            },
        },
    )


def assert_no_sideways_scroll(page) -> None:
    """Neither the document nor its body is wider than the phone's screen."""
    page.wait_for_load_state("load")  # measured with every stylesheet applied
    widths = page.evaluate(
        "() => ({doc: document.documentElement.scrollWidth, body: document.body.scrollWidth,"
        " inner: window.innerWidth})"
    )
    limit = min(widths["inner"], PHONE["width"])
    assert widths["doc"] <= limit and widths["body"] <= limit, widths


def assert_tappable(locator) -> None:
    """Each element matched is at least MIN_TAP px high."""
    locator.page.wait_for_load_state("load")
    assert locator.count(), "nothing to tap"
    for index in range(locator.count()):
        box = locator.nth(index).bounding_box()
        assert box["height"] >= MIN_TAP, (locator.nth(index).inner_text(), box)


def _open_review(page, title: str):
    page.locator(".bpm-title", has_text=title).first.tap()
    expect(page.locator("h1.bpm-ask")).to_be_visible()


def test_the_queue_fits_a_phone_and_approves_selected_rows(
    live_server, agent, e2e_reviewer, phone, login, screenshot
):
    ids = [
        _post_long(agent, question=f"Question number {n} " + "with many words " * 8)
        for n in range(3)
    ]
    page = login(phone(), e2e_reviewer)
    rows = page.locator("#result_list tbody tr")
    expect(rows).to_have_count(3)
    assert_no_sideways_scroll(page)
    screenshot(page, "phone-queue")

    # "Approve selected" from the phone: the checkbox, the action bar, its confirmation.
    rows.first.locator("input.action-select").tap()
    expect(page.locator("#bpm-actions .action-counter")).to_contain_text("1 of 3 selected")
    assert_tappable(page.locator("#bpm-actions select[name=action]"))
    assert_tappable(page.locator("#bpm-actions button[type=submit]"))
    assert_no_sideways_scroll(page)
    page.locator("#bpm-actions select[name=action]").select_option("approve_selected")
    page.locator("#bpm-actions button[type=submit]").tap()
    expect(page.locator("#bpm-batch-deciding tbody tr")).to_have_count(1)
    assert_no_sideways_scroll(page)
    assert_tappable(page.locator("#bpm-batch-form .bpm-buttons > *"))
    screenshot(page, "phone-batch-confirm")
    page.locator("#bpm-batch-form textarea[name=comment]").fill("All of them, from my phone.")
    page.locator("#bpm-batch-confirm").tap()
    expect(page.locator(".messagelist")).to_contain_text("Approved 1 breakpoint")
    assert_no_sideways_scroll(page)
    statuses = [agent.status(breakpoint_id) for breakpoint_id in ids]
    assert [s["status"] for s in statuses] == ["released", "waiting", "waiting"]
    assert statuses[0]["result"]["feedback"] == "All of them, from my phone."

    page.goto(f"{live_server.url}/admin/breakpoints/breakpoint/groups/")
    expect(page.locator("#bpm-groups .bpm-group")).to_have_count(1)
    assert_no_sideways_scroll(page)
    screenshot(page, "phone-groups")


def test_the_review_page_fits_a_phone_with_the_decision_after_the_question(
    live_server, agent, e2e_reviewer, phone, login, screenshot
):
    _post_long(agent)
    page = login(phone(), e2e_reviewer)
    _open_review(page, "Billing rollout")
    assert_no_sideways_scroll(page)
    screenshot(page, "phone-review")

    question = page.locator("h1.bpm-ask").bounding_box()
    decision = page.locator("#bpm-decide").bounding_box()
    assert decision["y"] >= question["y"] + question["height"]
    assert decision["x"] >= 0 and decision["x"] + decision["width"] <= PHONE["width"]

    # The long line of code scrolls inside its block, which stays within the screen.
    code = page.locator(".bpm-file--code .bpm-highlight pre")
    scroll = code.evaluate("el => ({inner: el.scrollWidth, outer: el.clientWidth})")
    assert scroll["inner"] > scroll["outer"], scroll
    box = page.locator(".bpm-file--code").bounding_box()
    assert box["x"] + box["width"] <= PHONE["width"]

    assert_tappable(page.locator("#bpm-decide .bpm-buttons button"))
    assert_tappable(page.locator("#bpm-decide .bpm-choice"))
    size = page.locator("textarea[name=comment]").evaluate("el => getComputedStyle(el).fontSize")
    assert float(size.removesuffix("px")) >= 16  # smaller, and iOS zooms in when it is focused


@pytest.mark.parametrize(
    ("choice", "label", "approved"),
    [
        ("approve", "Send approval", True),
        ("reject", "Send rejection", False),
    ],
)
def test_a_reviewer_decides_with_a_comment_from_a_phone(
    live_server, agent, e2e_reviewer, phone, login, screenshot, choice, label, approved
):
    breakpoint_id = _post_long(agent)
    page = login(phone(), e2e_reviewer)
    _open_review(page, "Billing rollout")
    page.locator("textarea[name=comment]").tap()
    page.keyboard.type("Checked on my phone.")
    page.locator(f"input[name=decision][value={choice}]").tap()
    page.locator("text=Review and release").tap()

    expect(page.locator("body")).to_contain_text("The agent will receive this result")
    assert_no_sideways_scroll(page)
    assert_tappable(page.locator("#bpm-confirm-form button"))
    screenshot(page, f"phone-confirm-{choice}")
    assert agent.status(breakpoint_id)["status"] == "waiting"  # nothing sent before confirming
    page.locator(f"text={label}").tap()
    expect(page.locator(".messagelist")).to_contain_text("approved" if approved else "rejected")
    assert_no_sideways_scroll(page)

    status = agent.status(breakpoint_id)
    assert status["status"] == "released"
    assert status["result"]["approved"] is approved
    assert status["result"]["feedback"] == "Checked on my phone."
    assert status["result"]["respondedBy"] == "rita"


def test_a_reviewer_edits_a_form_on_a_phone(
    live_server, agent, e2e_reviewer, phone, login, screenshot
):
    breakpoint_id = agent.post(
        payload={
            "title": "Deploy with a form",
            "question": "Deploy 2.4.1?",
            "form": FORM,
            "proposal": PROPOSAL,
        }
    )
    page = login(phone(), e2e_reviewer)
    _open_review(page, "Deploy with a form")
    assert_no_sideways_scroll(page)
    answer = page.locator("#bpm-answer")
    for name in ("environment", "replicas", "note"):
        field = answer.locator(f"[name=value__{name}]")
        assert_tappable(field)
        size = field.evaluate("el => getComputedStyle(el).fontSize")
        assert float(size.removesuffix("px")) >= 16, name
    screenshot(page, "phone-form")

    replicas = answer.locator("[name=value__replicas]")
    replicas.tap()
    replicas.fill("")
    page.keyboard.type("5")
    answer.locator("[name=value__environment]").select_option("staging")
    page.locator("input[name=decision][value=approve]").tap()
    page.locator("text=Review and release").tap()

    changes = page.locator("#bpm-answer-changes")
    expect(changes.locator("tbody tr")).to_have_count(2)
    assert_no_sideways_scroll(page)
    screenshot(page, "phone-form-confirm")
    page.locator("text=Send approval").tap()
    expect(page.locator(".messagelist")).to_contain_text("approved")

    result = agent.status(breakpoint_id)["result"]
    assert result["approved"] is True
    assert result["values"] == {"environment": "staging", "replicas": 5, "note": "rollout"}
