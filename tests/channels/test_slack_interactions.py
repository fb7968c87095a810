"""Deciding from Slack: Approve, Reject (a modal for the feedback), an option, a double click;
the agent's poll sees the reviewer, and the message shows the decision."""

import threading

import httpx
import pytest
from django.contrib.auth.models import Group

from accounts.tokens import token_create_for_agent
from audit.models import Event
from breakpoints.models import Feedback
from tests.support.slack import (
    INTERACTIONS,
    action_ids,
    announce,
    attempt,
    events,
    interact,
    only,
)

PLAN = {"title": "Deploy", "question": "Ship it?"}

pytest_plugins = ["tests.support.slack"]  # standin, people, slack_route


def click(client, standin, reply, action_id: str, user: str = "U0RITA"):
    payload = standin.click_payload(reply["channel"], reply["ts"], action_id, user)
    return interact(client, payload)


def test_approve_from_slack_releases_for_the_agent_and_updates_the_message(
    standin, slack_route, make_breakpoint, agent_client, client
):
    bp = make_breakpoint(payload=PLAN)
    reply = announce(bp)

    response = click(client, standin, reply, "bpm_approve")

    assert (response.status_code, response.content) == (200, b"")
    polled = agent_client.get(f"/api/breakpoints/{bp.pk}/status").json()
    assert polled["status"] == "released"
    assert polled["result"]["approved"] is True
    assert polled["result"]["respondedBy"] == "rita"
    feedback = Feedback.objects.get(breakpoint_id=bp.pk)
    assert (feedback.via, feedback.author_user.username, feedback.approved) == (
        "slack",
        "rita",
        True,
    )
    assert events(bp, "feedback")[0].metadata["via"] == "slack"
    assert standin.succeeded("users.info") == [{"user": "U0RITA"}]

    released = attempt(only(bp, "released"))

    assert released.status == "delivered", released.last_error
    (update,) = standin.succeeded("chat.update")
    assert (update["channel"], update["ts"]) == (reply["channel"], reply["ts"])
    assert update["blocks"][1]["text"]["text"] == ":white_check_mark: *Approved* by rita"
    assert action_ids(update["blocks"]) == []
    assert standin.ephemerals == []


def test_reject_opens_a_modal_and_its_feedback_rejects(
    standin, slack_route, make_breakpoint, client
):
    bp = make_breakpoint(payload=PLAN)
    reply = announce(bp)
    clicked = standin.click_payload(reply["channel"], reply["ts"], "bpm_reject", "U0RITA")

    assert interact(client, clicked).status_code == 200

    (opened,) = standin.succeeded("views.open")
    assert opened["trigger_id"] == clicked["trigger_id"]
    assert bp.pk in opened["view"]["private_metadata"]
    (view_id,) = standin.views
    bp.refresh_from_db()
    assert bp.status == "waiting"  # nothing decided before the feedback is sent
    (feedback_input,) = [b for b in opened["view"]["blocks"] if b["type"] == "input"]
    assert feedback_input["optional"] is True  # a rejection may come without a comment

    sent = interact(client, standin.submit_payload(view_id, "U0RITA", "Not on a Friday."))

    assert (sent.status_code, sent.content) == (200, b"")
    bp.refresh_from_db()
    assert bp.status == "released"
    assert bp.result["approved"] is False
    assert bp.result["feedback"] == "Not on a Friday."
    assert bp.result["respondedBy"] == "rita"
    assert Feedback.objects.get(breakpoint_id=bp.pk).via == "slack"
    attempt(only(bp, "released"))
    (update,) = standin.succeeded("chat.update")
    assert update["blocks"][1]["text"]["text"] == ":x: *Rejected* by rita\n> Not on a Friday."


@pytest.mark.parametrize(
    ("action_id", "option", "approved"),
    [("bpm_option_0", "Ship", True), ("bpm_option_1", "Hold", False)],
)
def test_an_option_button_releases_with_that_option(
    standin, slack_route, make_breakpoint, client, action_id, option, approved
):
    bp = make_breakpoint(
        payload={**PLAN, "options": ["Ship", {"label": "Hold", "approved": False}]}
    )
    reply = announce(bp)

    assert click(client, standin, reply, action_id).status_code == 200

    bp.refresh_from_db()
    assert bp.status == "released"
    assert (bp.result["option"], bp.result["approved"]) == (option, approved)
    attempt(only(bp, "released"))
    (update,) = standin.succeeded("chat.update")
    assert f"(option *{option}*)" in update["blocks"][1]["text"]["text"]


def test_a_double_click_decides_once(standin, slack_route, make_breakpoint, client):
    bp = make_breakpoint(payload=PLAN)
    reply = announce(bp)

    first = click(client, standin, reply, "bpm_approve")
    second = click(client, standin, reply, "bpm_approve")

    assert first.status_code == second.status_code == 200
    assert Feedback.objects.filter(breakpoint_id=bp.pk).count() == 1
    assert len(events(bp, "released")) == 1
    (refused,) = events(bp, "refused")
    assert refused.actor == "slack:U0RITA"
    assert "no longer takes feedback" in refused.metadata["message"]
    (told,) = standin.ephemerals
    assert (told["channel"], told["user"]) == (reply["channel"], "U0RITA")
    assert "released" in told["text"]
    assert len(only(bp, "released").body["data"]["result"]["allResponses"]) == 1


def test_a_vote_that_decides_nothing_yet_is_acknowledged(
    standin, slack_route, make_breakpoint, client, people
):
    people["rita"].groups.add(Group.objects.get_or_create(name="ops-lead")[0])
    bp = make_breakpoint(
        payload={**PLAN, "expert": ["tech-lead", "ops-lead"], "strategy": "collect-all"}
    )
    reply = announce(bp)

    assert click(client, standin, reply, "bpm_approve").status_code == 200

    bp.refresh_from_db()
    assert bp.status == "waiting" and len(bp.votes) == 1
    (told,) = standin.ephemerals
    assert "vote is recorded" in told["text"]
    assert click(client, standin, reply, "bpm_approve", user="U0TINA").status_code == 200
    bp.refresh_from_db()
    assert bp.status == "released"
    assert bp.result["respondedBy"] == ["rita", "tina"]


def test_the_console_link_button_changes_nothing(standin, slack_route, make_breakpoint, client):
    bp = make_breakpoint(payload=PLAN)
    reply = announce(bp)

    response = click(client, standin, reply, "bpm_console")

    assert response.status_code == 200
    assert standin.calls("users.info") == []
    bp.refresh_from_db()
    assert bp.status == "waiting"


@pytest.fixture
def over_http(transactional_db, standin, live_server):
    standin.interactions_url = live_server.url + INTERACTIONS
    return standin


def test_end_to_end_over_http_a_click_releases_for_the_polling_agent(
    over_http, slack_route, make_breakpoint, live_server
):
    """Slack's POST and the agent's poll are real HTTP to a live server."""
    standin = over_http
    bp = make_breakpoint(payload=PLAN)
    reply = announce(bp)
    token = token_create_for_agent(agent_id="agent-a")[1]

    response = standin.click(reply["channel"], reply["ts"], "bpm_approve", "U0RITA")

    assert (response.status_code, response.content) == (200, b"")
    polled = httpx.get(
        f"{live_server.url}/api/breakpoints/{bp.pk}/status",
        headers={"Authorization": f"Bearer {token}"},
    ).json()
    assert polled["status"] == "released" and polled["result"]["respondedBy"] == "rita"
    attempt(only(bp, "released"))
    assert standin.message(reply["channel"], reply["ts"])["text"].startswith("Decided: ")


# Under live_server, in-memory SQLite shares one connection between threads, so concurrent
# transactions are not isolated there.
@pytest.mark.postgres
def test_concurrent_clicks_over_http_decide_once(over_http, slack_route, make_breakpoint):
    standin = over_http
    bp = make_breakpoint(payload=PLAN)
    reply = announce(bp)
    answers: list[int] = []

    def press() -> None:
        response = standin.click(reply["channel"], reply["ts"], "bpm_approve", "U0RITA")
        answers.append(response.status_code)

    threads = [threading.Thread(target=press) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)

    assert answers == [200, 200, 200]
    bp.refresh_from_db()
    assert bp.status == "released" and bp.result["respondedBy"] == "rita"
    assert Feedback.objects.filter(breakpoint_id=bp.pk).count() == 1
    assert Event.objects.filter(breakpoint_id=bp.pk, type="released").count() == 1
    assert Event.objects.filter(breakpoint_id=bp.pk, type="refused").count() == 2
    assert len(standin.ephemerals) == 2
