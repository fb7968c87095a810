"""The Teams channel through the real processes: the worker posts the card to the Bot
Framework stand-in (its token endpoint, its connector), the stand-in signs button presses
with its own published key and posts them to the web server, which checks them against
the stand-in's OpenID metadata and keys, asks its roster who pressed, decides through the
one door and answers the refreshed card; the worker replaces the card after a decision
taken anywhere."""

from collections.abc import Iterator

import httpx
import pytest

from audit.models import Event
from breakpoints.models import Breakpoint, Feedback
from core.actors import Actor
from policies.routes import route_add
from tests.standins.teams import Member, TeamsStandIn
from tests.support.console import action_url, session_client
from tests.support.factories import AdminFactory, ReviewerFactory

pytestmark = pytest.mark.django_db(transaction=True)

CONVERSATION = "19:live-review@thread.tacv2"
RITA = Member("29:rita", "rita@example.com", "bbbbbbbb-0000-4000-8000-000000000001")
GHOST = Member("29:ghost", "ghost@example.com", "bbbbbbbb-0000-4000-8000-000000000002")
PLAN = {"title": "Deploy", "question": "Ship it?"}


@pytest.fixture
def teams() -> Iterator[TeamsStandIn]:
    standin = TeamsStandIn(
        app_id="00000000-0000-4000-8000-0000000live1",
        app_password="live-teams-secret",
        tenant="22222222-2222-4222-8222-222222222222",
        members=[RITA, GHOST],
    ).start()
    yield standin
    standin.stop()


@pytest.fixture
def system(make_system, teams, request):
    # Beat only for a test that writes deliveries in this process (its broker is not the
    # system's): the outbox sweep hands them to the worker.
    beat = request.node.get_closest_marker("sweeps") is not None
    system = make_system(env=teams.settings(), beat=beat)
    teams.messaging_url = f"{system.base_url}/integrations/teams/messages"
    return system


@pytest.fixture
def people(transactional_db) -> dict:
    route_add(
        actor=Actor.for_user(AdminFactory(username="root")),
        name="teams",
        pattern="*",
        channels=[{"kind": "teams", "conversation": CONVERSATION}],
    )
    return {"rita": ReviewerFactory(username="rita", email=RITA.email)}


def verbs(card: dict) -> list[str]:
    return [action["verb"] for action in card.get("actions", []) if "verb" in action]


def posted_card(system, teams: TeamsStandIn, agent_http: httpx.Client, **body) -> tuple[str, str]:
    """A breakpoint the agent asked for, and the activity of its card: (id, activity id)."""
    created = agent_http.post("/api/breakpoints", json={"payload": PLAN, **body})
    assert created.status_code == 201, created.text
    posted = system.wait_until(lambda: teams.posted(CONVERSATION), what="the card in Teams")
    (activity_id, _) = posted[-1]
    return created.json()["breakpointId"], activity_id


def wait_decided_card(system, teams: TeamsStandIn, activity_id: str) -> dict:
    def replaced():
        card = teams.card(CONVERSATION, activity_id)
        return card if not verbs(card) else None

    return system.wait_until(replaced, what="the card replaced by the decided one")


def test_approve_from_teams_releases_and_the_card_is_replaced(system, teams, people, agent_http):
    bp_id, activity_id = posted_card(system, teams, agent_http)

    answer = teams.press(CONVERSATION, activity_id, RITA.user_id, "approve")

    assert answer.status_code == 200, answer.text
    assert answer.json()["type"] == "application/vnd.microsoft.card.adaptive"
    assert verbs(answer.json()["value"]) == []
    status = agent_http.get(f"/api/breakpoints/{bp_id}/status").json()
    assert (status["status"], status["result"]["respondedBy"]) == ("released", "rita")
    assert Feedback.objects.get(breakpoint_id=bp_id).via == "teams"
    card = wait_decided_card(system, teams, activity_id)
    assert "Approved" in str(card)


def test_reject_with_a_comment_reaches_the_agent(system, teams, people, agent_http):
    bp_id, activity_id = posted_card(system, teams, agent_http)

    answer = teams.press(
        CONVERSATION, activity_id, RITA.user_id, "reject", comment="Wait for the freeze."
    )

    assert answer.status_code == 200, answer.text
    result = agent_http.get(f"/api/breakpoints/{bp_id}/status").json()["result"]
    assert (result["approved"], result["feedback"]) == (False, "Wait for the freeze.")
    assert "Wait for the freeze." in str(wait_decided_card(system, teams, activity_id))


@pytest.mark.parametrize("forged", ["other-key", "expired"])
def test_a_forged_or_expired_token_is_refused(system, teams, people, agent_http, forged):
    bp_id, activity_id = posted_card(system, teams, agent_http)

    answer = teams.press(CONVERSATION, activity_id, RITA.user_id, "approve", forged=forged)

    assert answer.status_code == 401
    assert answer.json()["error"]["code"] == "not_authenticated"
    assert Breakpoint.objects.get(pk=bp_id).status == "waiting"
    assert not Event.objects.filter(breakpoint_id=bp_id, type="refused").exists()


def test_an_unknown_teams_user_is_refused_and_recorded(system, teams, people, agent_http):
    bp_id, activity_id = posted_card(system, teams, agent_http)

    answer = teams.press(CONVERSATION, activity_id, GHOST.user_id, "approve")

    assert answer.status_code == 200, answer.text
    assert "No single active" in str(answer.json()["value"])
    assert Breakpoint.objects.get(pk=bp_id).status == "waiting"
    (refused,) = Event.objects.filter(breakpoint_id=bp_id, type="refused")
    assert refused.actor == f"teams:{GHOST.object_id}"
    assert refused.metadata["via"] == "teams" and "ghost@example.com" in refused.metadata["message"]


def test_self_review_is_refused_and_recorded(system, teams, people, agent_http):
    bp_id, activity_id = posted_card(
        system,
        teams,
        agent_http,
        requestedBy="rita",
        payload={**PLAN, "preventSelfReview": True},
    )

    answer = teams.press(CONVERSATION, activity_id, RITA.user_id, "approve")

    assert answer.status_code == 200, answer.text
    assert "another reviewer must decide it" in str(answer.json()["value"])
    assert Breakpoint.objects.get(pk=bp_id).status == "waiting"
    (refused,) = Event.objects.filter(breakpoint_id=bp_id, type="refused")
    assert (refused.actor, refused.metadata["reason"]) == (
        f"teams:{RITA.object_id}",
        "permission_denied",
    )


def test_a_decision_taken_through_the_api_replaces_the_card(
    system, teams, people, agent_http, reviewer_http
):
    bp_id, activity_id = posted_card(system, teams, agent_http)

    released = reviewer_http.post(
        f"/api/breakpoints/{bp_id}/feedback",
        json={"comment": "Decided elsewhere.", "release": True, "approved": False},
    )

    assert released.status_code == 201, released.text
    card = wait_decided_card(system, teams, activity_id)
    assert "Rejected" in str(card) and "alice" in str(card) and "Decided elsewhere." in str(card)


@pytest.mark.sweeps
def test_a_decision_in_the_console_replaces_the_card(system, teams, people, agent_http, settings):
    bp_id, activity_id = posted_card(system, teams, agent_http)
    # The console here is this process's: it writes the outcome's deliveries, so it has
    # the system's Teams settings; the worker sends them.
    for name, value in teams.settings().items():
        setattr(settings, name, value)
    console = session_client(people["rita"])
    form = {"decision": "reject", "comment": "Not this week."}

    confirm = console.post(action_url("release", bp_id), form)
    released = console.post(action_url("release", bp_id), {**form, "confirm": "yes"})

    assert confirm.status_code == 200 and b'name="confirm" value="yes"' in confirm.content
    assert released.status_code == 302
    card = wait_decided_card(system, teams, activity_id)
    assert "Rejected" in str(card) and "rita" in str(card) and "Not this week." in str(card)
