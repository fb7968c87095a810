"""The review page says where a decision came from ("decided … by alice via Slack"), and
each feedback entry where it was given (api, console, slack, email, jira; nothing for
old rows), from the feedback the page loads anyway: no query per entry."""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from breakpoints.models import Feedback
from breakpoints.selectors import decision_channels
from breakpoints.services import breakpoint_cancel, feedback_add
from channels.email import EMAIL
from channels.email.messages import outcome_context
from channels.jira import JIRA
from channels.slack import SLACK
from core.actors import Actor
from core.choices import Via
from tests.support.console import action_url, review_url
from tests.support.factories import ReviewerFactory
from tests.support.receipts import unsealed

FINISH = re.compile(r'<span class="bpm-head__finish">(.*?)</span>\s*</div>', re.S)
CHIP = re.compile(r'<span class="bpm-chip bpm-via">via ([^<]*)</span>')


def finish_line(response) -> str:
    """The header's "decided … by … via …", tags stripped."""
    match = FINISH.search(response.content.decode())
    assert match, "no finish line"
    return " ".join(re.sub(r"<[^>]+>", "", match.group(1)).split())


def chips(response) -> list[str]:
    return CHIP.findall(response.content.decode())


@pytest.fixture
def alice(db):
    return ReviewerFactory(username="alice")


def decide(bp, user, via: str, **fields):
    fields.setdefault("approved", True)
    return feedback_add(
        breakpoint_id=bp.pk, actor=Actor.for_user(user), comment="", release=True, via=via, **fields
    )


@pytest.mark.parametrize(
    ("via", "said"),
    [
        (SLACK, "via Slack"),
        (EMAIL, "via email"),
        (JIRA, "via JIRA"),
        (Via.API, "via the API"),
        (Via.CONSOLE, "via the console"),
    ],
)
def test_a_decision_says_its_channel(reviewer_browser, make_breakpoint, alice, via, said):
    bp = make_breakpoint()
    decide(bp, alice, via)

    response = reviewer_browser.get(review_url(bp.pk))

    line = finish_line(response)
    assert line.startswith("decided ") and line.endswith(f"by alice {said}"), line
    assert chips(response) == [said.removeprefix("via ")]


def test_a_console_release_is_via_the_console(reviewer_browser, make_breakpoint):
    bp = make_breakpoint()
    data = {"decision": "approve", "comment": "Fine"}
    reviewer_browser.post(action_url("release", bp.pk), data)
    reviewer_browser.post(action_url("release", bp.pk), {**data, "confirm": "yes"})

    response = reviewer_browser.get(review_url(bp.pk))

    assert Feedback.objects.get(breakpoint=bp).via == "console"
    assert finish_line(response).endswith("by rita via the console")


def test_an_api_release_is_via_the_api(reviewer_browser, make_breakpoint, client_for, alice):
    bp = make_breakpoint()
    client_for(alice).post(
        f"/api/breakpoints/{bp.pk}/feedback",
        {"comment": "ok", "release": True, "approved": False},
        format="json",
    )

    assert finish_line(reviewer_browser.get(review_url(bp.pk))).endswith("by alice via the API")


def test_each_entry_shows_its_own_channel_and_only_the_decision_counts(
    reviewer_browser, make_breakpoint, alice
):
    bp = make_breakpoint()
    feedback_add(breakpoint_id=bp.pk, actor=Actor.for_user(alice), comment="Looking", via=JIRA)
    decide(bp, alice, SLACK, approved=False)

    response = reviewer_browser.get(review_url(bp.pk))

    assert chips(response) == ["JIRA", "Slack"]  # the thread, oldest first
    assert finish_line(response).endswith("by alice via Slack")  # the comment is not the decision


def test_old_rows_without_a_channel_show_none(reviewer_browser, make_breakpoint, alice):
    bp = make_breakpoint()
    decide(bp, alice, SLACK)
    Feedback.objects.filter(breakpoint=bp).update(via="")

    response = reviewer_browser.get(review_url(bp.pk))

    assert finish_line(response).endswith("by alice")
    assert chips(response) == []
    assert "via" not in finish_line(response)


def test_seats_voting_through_two_channels_say_both(
    reviewer_browser, make_breakpoint, three_experts
):
    bp = make_breakpoint(
        payload={
            "question": "Deploy?",
            "expert": ["tech-lead", "ops-lead"],
            "strategy": "collect-all",
        }  # fmt: skip
    )
    decide(bp, three_experts["tech-lead"], Via.CONSOLE)
    decide(bp, three_experts["ops-lead"], SLACK)

    response = reviewer_browser.get(review_url(bp.pk))

    assert finish_line(response).endswith("by tina, oscar via the console and Slack")
    assert chips(response) == ["the console", "Slack"]


def test_the_page_the_mail_and_the_receipt_agree_on_where_it_came_from(
    reviewer_browser, make_breakpoint, three_experts
):
    """One answer (breakpoints.selectors.decision_channels): the review page and the outcome
    mail name every voting channel; the receipt names the deciding one, the last of them."""
    payload = {"question": "Go?", "expert": ["tech-lead", "ops-lead"], "strategy": "collect-all"}
    bp = make_breakpoint(payload=payload)
    decide(bp, three_experts["tech-lead"], Via.CONSOLE)
    _, decided = decide(bp, three_experts["ops-lead"], SLACK)

    mail = outcome_context({"breakpointId": bp.pk, "status": "released", "result": decided.result})

    assert finish_line(reviewer_browser.get(review_url(bp.pk))).endswith(
        "via the console and Slack"
    )
    assert "by tina, oscar via the console and Slack" in mail["summary"]
    channels = decision_channels(Feedback.objects.filter(breakpoint=bp))
    assert channels == [Via.CONSOLE, SLACK]
    unsealed(decided.result, via=channels[-1])


def test_an_auto_approval_or_a_cancel_has_no_channel(reviewer_browser, make_breakpoint):
    bp = make_breakpoint()
    breakpoint_cancel(breakpoint_id=bp.pk, actor=Actor.for_agent("agent-a"), reason="moot")

    line = finish_line(reviewer_browser.get(review_url(bp.pk)))

    assert line.startswith("cancelled") and "via" not in line


def test_the_channels_cost_no_query_per_entry(reviewer_browser, make_breakpoint, alice):
    bp = make_breakpoint()
    feedback_add(breakpoint_id=bp.pk, actor=Actor.for_user(alice), comment="one", via=EMAIL)
    decide(bp, alice, SLACK)
    with CaptureQueriesContext(connection) as few:
        reviewer_browser.get(review_url(bp.pk))
    other = make_breakpoint()
    for n, via in enumerate([EMAIL, JIRA, Via.API, Via.CONSOLE] * 5):
        feedback_add(breakpoint_id=other.pk, actor=Actor.for_user(alice), comment=f"n{n}", via=via)
    decide(other, alice, SLACK)

    with CaptureQueriesContext(connection) as many:
        response = reviewer_browser.get(review_url(other.pk))

    assert len(chips(response)) == 21
    assert len(many) == len(few)
