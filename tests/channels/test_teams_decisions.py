"""Deciding from Teams: Approve, Reject with a comment, an option, each through the one door
(feedback_add): the person is found by the roster's email, a refusal is told on the card
and recorded, and the card is replaced by the decided one however the decision was taken."""

import pytest

from audit.models import Event
from breakpoints.models import Feedback
from breakpoints.services import feedback_add
from core.actors import Actor
from tests.support.teams import (
    CONVERSATION,
    MEMBERS,
    all_text,
    announce,
    attempt,
    events,
    only,
    post_activity,
    press,
)

pytest_plugins = ["tests.support.teams"]  # standin, people, teams_route

PLAN = {"title": "Deploy", "question": "Ship it?"}
RITA_OID = MEMBERS[0].object_id


@pytest.fixture
def posted(standin, teams_route, make_breakpoint, people):
    bp = make_breakpoint(payload=PLAN)
    return bp, announce(bp)


def answer_card(response) -> dict:
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["statusCode"], body["type"]) == (200, "application/vnd.microsoft.card.adaptive")
    return body["value"]


def verbs(card: dict) -> list[str]:
    return [action.get("verb") for action in card.get("actions", []) if "verb" in action]


def test_the_card_is_posted_to_the_routed_conversation(standin, posted):
    bp, reply = posted
    assert reply["conversation"] == CONVERSATION and reply["serviceUrl"] == standin.service_url
    card = standin.card(CONVERSATION, reply["activity"])
    assert verbs(card) == ["approve", "reject"]
    assert "Ship it?" in all_text(card)
    assert only(bp).destination() == f"teams: {CONVERSATION}"


def test_approve_releases_through_the_door_and_answers_the_decided_card(
    standin, posted, client, agent_client
):
    bp, reply = posted

    card = answer_card(press(client, standin, reply, "29:rita", "approve"))

    polled = agent_client.get(f"/api/breakpoints/{bp.pk}/status").json()
    assert (polled["status"], polled["result"]["approved"]) == ("released", True)
    assert polled["result"]["respondedBy"] == "rita"
    feedback = Feedback.objects.get(breakpoint_id=bp.pk)
    assert (feedback.via, feedback.author_user.username) == ("teams", "rita")
    assert verbs(card) == []
    assert "Approved" in all_text(card) and " by rita" in all_text(card)
    members = [c for c in standin.calls if "/members/" in c[1]]
    assert [(m[0], m[2]) for m in members] == [("GET", 200)]


def test_reject_with_a_comment_gives_the_agent_the_comment(standin, posted, client, agent_client):
    bp, reply = posted

    card = answer_card(
        press(client, standin, reply, "29:rita", "reject", comment="Not on a Friday.")
    )

    result = agent_client.get(f"/api/breakpoints/{bp.pk}/status").json()["result"]
    assert (result["approved"], result["feedback"]) == (False, "Not on a Friday.")
    assert "Rejected" in all_text(card) and "Not on a Friday." in all_text(card)


def test_an_option_decides_with_its_own_verdict(
    standin, teams_route, make_breakpoint, client, people
):
    options = [{"label": "Ship"}, {"label": "Hold", "approved": False}]
    bp = make_breakpoint(payload={**PLAN, "options": options})
    reply = announce(bp)

    answer_card(press(client, standin, reply, "29:rita", "option", option="1"))

    bp.refresh_from_db()
    assert (bp.status, bp.result["approved"], bp.result["option"]) == ("released", False, "Hold")


def test_an_option_not_chosen_is_told_and_decides_nothing(
    standin, teams_route, make_breakpoint, client, people
):
    bp = make_breakpoint(payload={**PLAN, "options": [{"label": "Ship"}]})
    reply = announce(bp)

    card = answer_card(press(client, standin, reply, "29:rita", "option", option="7"))

    bp.refresh_from_db()
    assert bp.status == "waiting"
    assert "Choose one of this breakpoint's options first." in all_text(card)
    assert verbs(card) == ["approve", "reject", "option"]


# --- refusals: told on the card, recorded ---------------------------------------------------


def assert_refused(bp, card: dict, who: str, *words: str) -> Event:
    bp.refresh_from_db()
    assert bp.status == "waiting"
    assert not Feedback.objects.filter(breakpoint_id=bp.pk).exists()
    (refused,) = events(bp, "refused")
    assert refused.actor == f"teams:{who}"
    assert refused.metadata["via"] == "teams"
    for word in words:
        assert word in all_text(card) and word in refused.metadata["message"]
    assert verbs(card) == ["approve", "reject"]  # still decidable by someone else
    return refused


@pytest.mark.parametrize(
    ("user", "words"),
    [
        ("29:ghost", ["No single active", "ghost@example.com"]),
        ("29:nomail", ["shows no email"]),
        ("29:nora", ["Only reviewers and admins"]),
    ],
    ids=["unknown-email", "no-email", "not-a-reviewer"],
)
def test_who_may_not_decide_is_told_and_recorded(standin, posted, client, user, words):
    bp, reply = posted

    card = answer_card(press(client, standin, reply, user, "approve"))

    member = next(m for m in MEMBERS if m.user_id == user)
    refused = assert_refused(bp, card, member.object_id, *words)
    assert refused.metadata["action"] == "approve"


def test_a_user_the_roster_does_not_know_is_refused_and_recorded(standin, posted, client):
    bp, reply = posted
    activity_user = "29:stranger"

    card = answer_card(press(client, standin, reply, activity_user, "approve"))

    bp.refresh_from_db()
    assert bp.status == "waiting"
    (refused,) = events(bp, "refused")
    assert refused.metadata["teams_user"] == activity_user
    assert "Teams did not say who you are" in refused.metadata["message"]
    assert "Teams did not say who you are" in all_text(card)


def test_an_object_id_the_roster_contradicts_is_refused(standin, posted, client):
    bp, reply = posted
    activity = standin.invoke(reply["conversation"], reply["activity"], "29:rita", "approve")
    activity["from"]["aadObjectId"] = MEMBERS[1].object_id  # nora's id on rita's press

    card = answer_card(post_activity(client, activity, standin.token()))

    assert_refused(bp, card, MEMBERS[1].object_id, "does not know you")


def test_a_user_of_another_tenant_is_refused_and_recorded(standin, posted, client):
    bp, reply = posted
    activity = standin.invoke(reply["conversation"], reply["activity"], "29:rita", "approve")
    activity["channelData"]["tenant"]["id"] = "99999999-9999-4999-8999-999999999999"

    card = answer_card(post_activity(client, activity, standin.token()))

    assert_refused(bp, card, RITA_OID, "not of the organization")
    assert not [c for c in standin.calls if "/members/" in c[1]]


def test_self_review_is_refused_by_the_service_and_recorded(
    standin, teams_route, make_breakpoint, client, people
):
    bp = make_breakpoint(payload={**PLAN, "preventSelfReview": True}, requested_by="rita")
    reply = announce(bp)

    card = answer_card(press(client, standin, reply, "29:rita", "approve"))

    refused = assert_refused(bp, card, RITA_OID, "another reviewer must decide it")
    assert refused.metadata["reason"] == "permission_denied"
    assert refused.metadata["action"] == "approve"

    card = answer_card(press(client, standin, reply, "29:tina", "approve"))
    bp.refresh_from_db()
    assert (bp.status, bp.result["respondedBy"]) == ("released", "tina")


def test_a_seat_is_needed_on_a_routed_breakpoint(
    standin, teams_route, make_breakpoint, client, people
):
    bp = make_breakpoint(payload={**PLAN, "expert": "tech-lead"})
    reply = announce(bp)

    card = answer_card(press(client, standin, reply, "29:rita", "approve"))

    assert_refused(bp, card, RITA_OID, "Only members of tech-lead")
    answer_card(press(client, standin, reply, "29:tina", "approve"))
    bp.refresh_from_db()
    assert bp.status == "released"


def test_a_decided_breakpoint_refuses_a_second_press_and_shows_the_decision(
    standin, posted, client
):
    bp, reply = posted
    answer_card(press(client, standin, reply, "29:rita", "approve"))

    card = answer_card(press(client, standin, reply, "29:tina", "reject", comment="too late"))

    bp.refresh_from_db()
    assert (bp.status, bp.result["approved"]) == ("released", True)
    assert verbs(card) == [] and "Approved" in all_text(card)
    assert Feedback.objects.filter(breakpoint_id=bp.pk).count() == 1


def test_a_press_on_a_breakpoint_that_is_gone_is_told(standin, posted, client):
    bp, reply = posted
    bp.delete()
    card = answer_card(press(client, standin, reply, "29:rita", "approve"))
    assert "does not exist" in all_text(card)


# --- the card updated in place -----------------------------------------------------------------


def test_a_decision_in_the_console_replaces_the_card(standin, posted, people):
    bp, reply = posted
    feedback_add(
        breakpoint_id=bp.pk,
        actor=Actor.for_user(people["tina"]),
        comment="From the console.",
        release=True,
        approved=False,
        via="console",
    )

    sent = attempt(only(bp, "released"))

    assert sent.status == "delivered", sent.last_error
    assert sent.reply == {**reply, "updated": True}
    puts = [c for c in standin.calls if c[0] == "PUT"]
    assert [p[2] for p in puts] == [200]
    card = standin.card(CONVERSATION, reply["activity"])
    assert verbs(card) == []
    assert "Rejected" in all_text(card) and " by tina" in all_text(card)
    assert "From the console." in all_text(card)


def test_an_outcome_before_the_card_is_posted_waits_for_it(
    standin, teams_route, make_breakpoint, people
):
    bp = make_breakpoint(payload=PLAN)
    feedback_add(
        breakpoint_id=bp.pk,
        actor=Actor.for_user(people["rita"]),
        comment="",
        release=True,
        approved=True,
    )

    early = attempt(only(bp, "released"))

    assert (early.status, early.last_error) == ("pending", "the card to update is not posted yet")
    announce(bp)
    assert attempt(only(bp, "released")).status == "delivered"


def test_a_card_gone_from_teams_gets_a_new_decided_message(standin, posted, people):
    bp, reply = posted
    with standin._lock:
        standin.activities.pop((CONVERSATION, reply["activity"]))
    feedback_add(
        breakpoint_id=bp.pk, actor=Actor.for_user(people["rita"]), comment="", release=True
    )

    sent = attempt(only(bp, "released"))

    assert sent.status == "delivered", sent.last_error
    assert sent.reply["activity"] != reply["activity"]
    assert verbs(standin.card(CONVERSATION, sent.reply["activity"])) == []


@pytest.mark.parametrize(("status", "retried"), [(500, True), (429, True), (403, False)])
def test_connector_failures_are_retried_or_not(
    standin, teams_route, make_breakpoint, people, status, retried
):
    bp = make_breakpoint(payload=PLAN)
    standin.fail_next(status=status)

    sent = attempt(only(bp))

    assert sent.status == ("pending" if retried else "failed")
    assert f"HTTP {status}" in sent.last_error
    if retried:
        assert attempt(sent).status == "delivered"


def test_a_wrong_secret_fails_without_retrying(standin, teams_route, make_breakpoint, settings):
    settings.TEAMS_APP_PASSWORD = "not-the-secret"
    bp = make_breakpoint(payload=PLAN)

    sent = attempt(only(bp))

    assert sent.status == "failed"
    assert "token endpoint: HTTP 401" in sent.last_error
    assert "not-the-secret" not in sent.last_error


def test_the_bot_token_is_asked_for_once_and_reused(standin, teams_route, make_breakpoint):
    for _ in range(3):
        announce(make_breakpoint(payload=PLAN))
    assert len(standin.tokens_issued) == 1
    assert len(standin.posted(CONVERSATION)) == 3
