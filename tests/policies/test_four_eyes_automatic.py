"""Four eyes that nothing automatic walks around (issue 30): a breakpoint under four eyes
(its payload's preventSelfReview, a route's default, or BPM_PREVENT_SELF_REVIEW) is
decided by a person other than its requester, always. No auto-approve rule (an admin's, or
one made by "Always approve"), no autoApproveAfterN streak and no onTimeout: approve
releases it; its autoApproval verdict says why."""

from datetime import timedelta

import pytest
from django.utils import timezone

from accounts.tokens import token_create_for_agent
from breakpoints.models import Breakpoint
from breakpoints.services import breakpoints_expire_due, feedback_add
from core.actors import Actor
from policies import autoapproval
from policies.foureyes import FOUR_EYES_REASON
from policies.models import AutoApprovalRule
from tests.conftest import bearer_client
from tests.support.api import assert_error
from tests.support.console import action_url, session_client
from tests.support.factories import AdminFactory, ReviewerFactory

URL = "/api/breakpoints"
ROUTES = "/api/routes"
EMAIL = [{"kind": "email", "to": ["ops@example.com"]}]


def _agent_for(owner: str | None, agent_id: str) -> object:
    return bearer_client(token_create_for_agent(agent_id=agent_id, owner=owner)[1])


def _assert_waiting_under_four_eyes(response) -> dict:
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["status"] == "waiting"
    assert body["result"] is None
    assert body["autoApproval"]["recommended"] is False
    assert body["autoApproval"]["reason"] == FOUR_EYES_REASON
    return body


def test_a_rule_made_by_always_approve_does_not_release_its_authors_four_eyes_breakpoint(
    make_breakpoint, db
):
    alice = ReviewerFactory(username="alice")
    others = make_breakpoint(agent_id="agent-b", payload={"breakpointId": "deploy.prod"})
    browser = session_client(alice)
    browser.post(action_url("always_approve", others.pk), {"comment": "", "confirm": "yes"})
    assert AutoApprovalRule.objects.get().created_by == "alice"  # the rule exists, by alice

    agent_alice = _agent_for("alice", "agent-alice")
    payload = {"breakpointId": "deploy.prod", "preventSelfReview": True, "question": "Ship?"}
    body = _assert_waiting_under_four_eyes(
        agent_alice.post(URL, {"requestedBy": "alice", "payload": payload}, format="json")
    )
    assert body["requestedBy"] == "alice"
    # The same rule still releases the key where four eyes is not asked for.
    plain = agent_alice.post(URL, {"payload": {"breakpointId": "deploy.prod"}}, format="json")
    assert plain.json()["status"] == "released"


def test_an_admins_own_rule_does_not_release_her_own_four_eyes_breakpoint(client_for):
    admin = client_for(AdminFactory(username="carol"))
    assert admin.post("/api/rules", {"pattern": "carol.*"}, format="json").status_code == 201

    payload = {"breakpointId": "carol.deploy", "preventSelfReview": True}
    response = _agent_for("carol", "agent-carol").post(URL, {"payload": payload}, format="json")
    _assert_waiting_under_four_eyes(response)
    bp = Breakpoint.objects.get(pk=response.json()["breakpointId"])
    assert bp.requested_by == "carol"
    assert not bp.events.filter(type="auto_approved").exists()


def test_an_approval_streak_does_not_release_a_four_eyes_breakpoint(make_breakpoint, db):
    bob = ReviewerFactory(username="bob")
    ReviewerFactory(username="alice")
    agent_alice = _agent_for("alice", "agent-alice")
    first = agent_alice.post(URL, {"payload": {"breakpointId": "nightly.release"}}, format="json")
    feedback_add(
        breakpoint_id=first.json()["breakpointId"],
        actor=Actor.for_user(bob),
        comment="ok",
        release=True,
    )

    ask = {"breakpointId": "nightly.release", "autoApproveAfterN": 1, "question": "New content"}
    guarded = agent_alice.post(URL, {"payload": {**ask, "preventSelfReview": True}}, format="json")
    body = _assert_waiting_under_four_eyes(guarded)
    assert body["autoApproval"]["consecutiveApprovals"] == 1  # the streak is there, unused
    # Without four eyes the same streak releases it (the threshold is met).
    unguarded = agent_alice.post(URL, {"payload": ask}, format="json").json()
    assert unguarded["status"] == "released"
    assert unguarded["result"]["respondedBy"] == "auto:after-1"


def test_the_services_setting_puts_every_breakpoint_under_four_eyes(db, settings):
    autoapproval.rule_create(actor=Actor.system("test"), pattern="deploy.*")
    settings.BPM_PREVENT_SELF_REVIEW = True
    agent = _agent_for("dana", "agent-d")  # four eyes needs a requester: the owner
    response = agent.post(URL, {"payload": {"breakpointId": "deploy.web"}}, format="json")
    _assert_waiting_under_four_eyes(response)
    verdict = autoapproval.evaluate(key="deploy.web")  # admins asking about a key: the same
    assert (verdict.recommended, verdict.reason) == (False, FOUR_EYES_REASON)


def test_a_routes_four_eyes_default_outranks_an_auto_approve_rule(admin_client):
    autoapproval.rule_create(actor=Actor.system("test"), pattern="deploy.*")
    route = {
        "name": "prod",
        "pattern": "*(tags contains 'prod')",
        "channels": EMAIL,
        "defaults": {"preventSelfReview": True},
    }
    assert admin_client.post(ROUTES, route, format="json").status_code == 201
    body = {"payload": {"breakpointId": "deploy.web"}, "tags": ["prod"]}
    agent = _agent_for("dana", "agent-d")  # four eyes needs a requester: the owner
    _assert_waiting_under_four_eyes(agent.post(URL, body, format="json"))


# --- onTimeout: approve never meets four eyes --------------------------------------------


@pytest.mark.parametrize(
    "payload",
    [
        {"preventSelfReview": True, "onTimeout": "approve"},
        {"preventSelfReview": True, "onTimeout": "approve", "breakpointId": "x.y"},
    ],
)
def test_on_timeout_approve_is_refused_at_creation_under_four_eyes(agent_client, payload):
    response = agent_client.post(URL, {"payload": payload, "ttlSeconds": 60}, format="json")
    error = assert_error(response, 400)
    assert "four eyes" in error["details"]["payload.onTimeout"][0]
    assert not Breakpoint.objects.exists()


def test_on_timeout_approve_is_refused_under_the_services_setting(db, settings):
    settings.BPM_PREVENT_SELF_REVIEW = True
    agent = _agent_for("dana", "agent-d")  # four eyes needs a requester: the owner
    response = agent.post(URL, {"payload": {"onTimeout": "approve"}}, format="json")
    assert "payload.onTimeout" in assert_error(response, 400)["details"]
    # Other timeout policies are fine under four eyes.
    fine = agent.post(URL, {"payload": {"onTimeout": "reject"}}, format="json")
    assert fine.status_code == 201


def test_a_routes_approve_default_meeting_a_payloads_four_eyes_is_refused_naming_the_route(
    agent_client, admin_client
):
    route = {"name": "ci", "pattern": "ci.*", "channels": EMAIL, "defaults": {}}
    route["defaults"] = {"onTimeout": "approve"}
    assert admin_client.post(ROUTES, route, format="json").status_code == 201
    payload = {"breakpointId": "ci.nightly", "preventSelfReview": True}
    error = assert_error(agent_client.post(URL, {"payload": payload}, format="json"), 400)
    assert "default of a route" in error["details"]["payload.onTimeout"][0]
    # The agent can choose another policy for its breakpoint.
    payload["onTimeout"] = "expire"
    owned = _agent_for("dana", "agent-d")  # four eyes needs a requester: the owner
    assert owned.post(URL, {"payload": payload}, format="json").status_code == 201


def test_a_route_combining_four_eyes_and_on_timeout_approve_is_refused_when_saved(
    admin_client, settings
):
    both = {"preventSelfReview": True, "onTimeout": "approve"}
    route = {"name": "prod", "pattern": "deploy.*", "channels": EMAIL, "defaults": both}
    error = assert_error(admin_client.post(ROUTES, route, format="json"), 400)
    assert "four eyes" in error["details"]["defaults.onTimeout"][0]

    route["defaults"] = {"onTimeout": "approve"}
    settings.BPM_PREVENT_SELF_REVIEW = True  # every breakpoint is under four eyes
    assert (
        "defaults.onTimeout"
        in assert_error(admin_client.post(ROUTES, route, format="json"), 400)["details"]
    )
    settings.BPM_PREVENT_SELF_REVIEW = False
    assert admin_client.post(ROUTES, route, format="json").status_code == 201


def test_a_stored_four_eyes_breakpoint_with_on_timeout_approve_expires_instead(make_breakpoint):
    """A row written before the refusal existed: the sweep expires it, saying why."""
    ReviewerFactory(username="rita")
    payload = {"preventSelfReview": True, "onTimeout": "reject"}
    bp = make_breakpoint(payload=payload, ttl_seconds=60, requested_by="rita")
    Breakpoint.objects.filter(pk=bp.pk).update(on_timeout="approve")
    breakpoints_expire_due(now=timezone.now() + timedelta(minutes=5))
    bp.refresh_from_db()
    assert bp.status == "expired"
    assert bp.result["approved"] is False
    assert FOUR_EYES_REASON in bp.result["feedback"]
