"""requestedBy and preventSelfReview at creation, and the payload that never changes
(issue 22): who a breakpoint is on behalf of (the body, else the agent token's owner),
who asks for four eyes (the payload, a route's defaults; neither lifts the other), and
every write path leaving the payload, and so its digest, as the agent sent it."""

from datetime import timedelta

import pytest
from django.contrib import admin
from django.utils import timezone

from accounts.tokens import token_create_for_agent
from breakpoints.models import Breakpoint
from breakpoints.services import (
    breakpoints_escalate_due,
    breakpoints_remind_due,
    feedback_add,
)
from core.actors import Actor
from core.digests import content_digest
from policies.routes import route_add
from tests.conftest import bearer_client
from tests.support.api import assert_error
from tests.support.commands import last_line, run
from tests.support.factories import ReviewerFactory

URL = "/api/breakpoints"
ASK = {"question": "Deploy?", "title": "Deploy"}


def test_a_token_without_a_known_owner_binds_the_requester_to_that_owner(db):
    _, raw = token_create_for_agent(agent_id="ci", owner="dana@example.com")
    agent = bearer_client(raw)

    by_owner = agent.post(URL, {"payload": ASK}, format="json")
    named = agent.post(URL, {"payload": ASK, "requestedBy": "DANA@example.com"}, format="json")
    other = agent.post(URL, {"payload": ASK, "requestedBy": "erik"}, format="json")

    assert by_owner.status_code == named.status_code == 201
    assert by_owner.json()["requestedBy"] == named.json()["requestedBy"] == "dana@example.com"
    assert assert_error(other, 403, "permission_denied")["details"] == {
        "requestedBy": "dana@example.com"
    }
    assert by_owner.json()["payloadDigest"] == content_digest(
        question="Deploy?", title="Deploy", payload=ASK
    )


@pytest.mark.parametrize(
    "named",
    [None, "alice", "ALICE", " alice ", "alice@example.com", "\uff41\uff4c\uff49\uff43\uff45"],
)
def test_an_owned_token_stores_its_owner_however_the_body_names_them(db, named):
    ReviewerFactory(username="alice")  # email alice@example.com
    agent = bearer_client(token_create_for_agent(agent_id="ci", owner="Alice@Example.com")[1])
    body = {"payload": ASK} if named is None else {"payload": ASK, "requestedBy": named}
    response = agent.post(URL, body, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["requestedBy"] == "alice"  # the person, by username


@pytest.mark.parametrize(
    ("named", "status"),
    [
        ("bob", 403),  # somebody else, who exists
        ("\u0430lice", 403),  # a Cyrillic a: another name, not alice
        ("alice\u200b", 400),  # an invisible character
        ("al\u00adice", 400),  # a soft hyphen
        ("alice\u0007", 400),  # a control character
    ],
)
def test_an_owned_token_cannot_name_anyone_else(db, named, status):
    ReviewerFactory(username="alice")
    ReviewerFactory(username="bob")
    agent = bearer_client(token_create_for_agent(agent_id="ci", owner="alice")[1])
    response = agent.post(URL, {"payload": ASK, "requestedBy": named}, format="json")
    error = assert_error(
        response, status, "permission_denied" if status == 403 else "validation_error"
    )
    assert "requestedBy" in error["details"]
    assert not Breakpoint.objects.exists()


def test_a_lookalike_requester_is_the_owner_and_so_cannot_approve(db, client_for):
    alice = ReviewerFactory(username="alice")
    agent = bearer_client(token_create_for_agent(agent_id="ci", owner="alice")[1])
    payload = {**ASK, "preventSelfReview": True}
    created = agent.post(
        URL, {"payload": payload, "requestedBy": "\uff41\uff4c\uff49\uff43\uff45"}, format="json"
    )
    bp_id = created.json()["breakpointId"]
    release = {"comment": "mine", "release": True, "approved": True}
    refused = client_for(alice).post(f"{URL}/{bp_id}/feedback", release, format="json")
    assert assert_error(refused, 403, "permission_denied")["details"]["requestedBy"] == "alice"
    assert Breakpoint.objects.get(pk=bp_id).status == "waiting"


@pytest.mark.parametrize(
    ("named", "stored"), [("bob", "bob"), ("BOB", "bob"), ("Bob@Example.COM", "bob")]
)
def test_a_token_without_an_owner_may_name_a_known_person_stored_by_username(
    agent_client, named, stored
):
    ReviewerFactory(username="bob")
    response = agent_client.post(URL, {"payload": ASK, "requestedBy": named}, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["requestedBy"] == stored


@pytest.mark.parametrize("named", ["erik", "\u0430lice", "alice\u200b", "\u202ealice"])
def test_a_token_without_an_owner_cannot_name_an_unknown_or_disguised_person(agent_client, named):
    ReviewerFactory(username="alice")
    response = agent_client.post(URL, {"payload": ASK, "requestedBy": named}, format="json")
    assert "requestedBy" in assert_error(response, 400)["details"]
    assert not Breakpoint.objects.exists()


def test_a_name_two_people_share_as_email_is_ambiguous(agent_client):
    ReviewerFactory(username="ann", email="team@example.com")
    ReviewerFactory(username="ben", email="team@example.com")
    response = agent_client.post(
        URL, {"payload": ASK, "requestedBy": "team@example.com"}, format="json"
    )
    assert "requestedBy" in assert_error(response, 400)["details"]


def test_a_token_without_an_owner_leaves_requested_by_null(agent_client):
    body = agent_client.post(URL, {"payload": ASK}, format="json").json()
    assert body["requestedBy"] is None


def test_under_the_services_four_eyes_a_token_without_an_owner_must_name_the_requester(
    agent_client, settings
):
    """BPM_PREVENT_SELF_REVIEW=1: a breakpoint nobody requested would keep nobody from
    deciding it, so an ownerless token that leaves requestedBy out is refused (400)."""
    settings.BPM_PREVENT_SELF_REVIEW = True
    ReviewerFactory(username="bob")
    refused = agent_client.post(URL, {"payload": ASK}, format="json")
    named = agent_client.post(URL, {"payload": ASK, "requestedBy": "bob"}, format="json")
    assert "requestedBy" in assert_error(refused, 400)["details"]
    assert named.status_code == 201, named.content
    assert list(Breakpoint.objects.values_list("requested_by", flat=True)) == ["bob"]


def test_a_breakpoints_own_four_eyes_needs_a_requester_too(agent_client, admin_user):
    """The payload's preventSelfReview, or a matching route's default, asks the same."""
    route_add(
        actor=Actor.for_user(admin_user),
        name="prod",
        pattern="*(tags contains 'prod')",
        channels=[{"kind": "email", "to": ["ops@example.com"]}],
        defaults={"preventSelfReview": True},
    )
    asked = {"payload": {**ASK, "preventSelfReview": True}}
    routed = {"payload": ASK, "tags": ["prod"]}
    for body in (asked, routed):
        response = agent_client.post(URL, body, format="json")
        assert "requestedBy" in assert_error(response, 400)["details"]
    assert not Breakpoint.objects.exists()


def test_create_agent_token_takes_an_owner(db):
    out, _ = run("create_agent_token", "agent-9", "--owner", "dana")
    agent = bearer_client(last_line(out))
    assert agent.post(URL, {"payload": ASK}, format="json").json()["requestedBy"] == "dana"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"payload": {**ASK, "preventSelfReview": "yes"}}, "payload.preventSelfReview"),
        ({"payload": ASK, "requestedBy": 7}, "requestedBy"),
        ({"payload": ASK, "requestedBy": "x" * 255}, "requestedBy"),
    ],
)
def test_bad_requester_fields_are_refused(agent_client, body, field):
    response = agent_client.post(URL, body, format="json")
    assert field in assert_error(response, 400, "validation_error")["details"]


def test_a_routes_default_asks_for_four_eyes_and_a_payload_cannot_lift_it(
    make_breakpoint, admin_user
):
    route_add(
        actor=Actor.for_user(admin_user),
        name="prod",
        pattern="*(tags contains 'prod')",
        channels=[{"kind": "email", "to": ["ops@example.com"]}],
        defaults={"preventSelfReview": True},
    )
    ReviewerFactory(username="rita")  # four eyes needs a requester
    lifting = {**ASK, "preventSelfReview": False}
    routed = make_breakpoint(tags=["prod"], payload=lifting, requested_by="rita")
    other = make_breakpoint(tags=["dev"], payload=ASK)
    asked = make_breakpoint(
        tags=["dev"], payload={**ASK, "preventSelfReview": True}, requested_by="rita"
    )
    assert (routed.prevent_self_review, other.prevent_self_review) == (True, False)
    assert asked.prevent_self_review is True


def test_a_route_default_must_be_a_boolean(admin_user, db):
    with pytest.raises(Exception, match="defaults.preventSelfReview: Must be true or false."):
        route_add(
            actor=Actor.for_user(admin_user),
            name="bad",
            pattern="deploy*",
            channels=[{"kind": "email", "to": ["ops@example.com"]}],
            defaults={"preventSelfReview": "yes"},
        )


# --- the payload never changes after creation -----------------------------------------------


def test_every_write_path_leaves_the_payload_and_its_digest_as_sent(
    make_breakpoint, reviewer, admin_user
):
    payload = {
        **ASK,
        "context": {"files": [{"path": "plan.md", "format": "markdown", "content": "1\n"}]},
        "expert": "tech-lead",
        "remindEverySeconds": 300,
        "escalateAfterSeconds": 60,
        "escalateTo": "ops-lead",
    }
    bp = make_breakpoint(payload=payload)
    digest = bp.payload_digest
    later = timezone.now() + timedelta(hours=1)  # a reminder and the escalation are due
    breakpoints_remind_due(now=later)
    breakpoints_escalate_due(now=later)
    feedback_add(breakpoint_id=bp.pk, actor=Actor.for_user(reviewer), comment="looking")
    feedback_add(breakpoint_id=bp.pk, actor=Actor.for_user(admin_user), comment="", release=True)

    stored = Breakpoint.objects.get(pk=bp.pk)
    assert stored.escalated_at is not None  # the sweeps did write to it
    assert stored.payload == payload
    assert stored.payload_digest == digest == stored.result["payloadDigest"]
    assert digest == content_digest(question="Deploy?", title="Deploy", payload=payload)


def test_the_console_offers_no_form_that_could_edit_the_payload(admin_user, rf):
    request = rf.get("/admin/")
    request.user = admin_user
    model_admin = admin.site._registry[Breakpoint]
    assert model_admin.has_change_permission(request) is False
    assert model_admin.has_add_permission(request) is False
