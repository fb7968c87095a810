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
from tests.breakpoints.test_commands import last_line, run
from tests.conftest import bearer_client
from tests.support.api import assert_error

URL = "/api/breakpoints"
ASK = {"question": "Deploy?", "title": "Deploy"}


def test_requested_by_is_the_bodys_else_the_tokens_owner(db):
    _, raw = token_create_for_agent(agent_id="ci", owner="dana@example.com")
    agent = bearer_client(raw)

    by_owner = agent.post(URL, {"payload": ASK}, format="json")
    named = agent.post(URL, {"payload": ASK, "requestedBy": "erik"}, format="json")

    assert by_owner.status_code == named.status_code == 201
    assert by_owner.json()["requestedBy"] == "dana@example.com"
    assert named.json()["requestedBy"] == "erik"
    assert by_owner.json()["payloadDigest"] == content_digest(
        question="Deploy?", title="Deploy", payload=ASK
    )


def test_a_token_without_an_owner_leaves_requested_by_null(agent_client):
    body = agent_client.post(URL, {"payload": ASK}, format="json").json()
    assert body["requestedBy"] is None


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
    routed = make_breakpoint(tags=["prod"], payload={**ASK, "preventSelfReview": False})
    other = make_breakpoint(tags=["dev"], payload=ASK)
    asked = make_breakpoint(tags=["dev"], payload={**ASK, "preventSelfReview": True})
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
