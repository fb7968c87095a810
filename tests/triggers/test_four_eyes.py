"""Four eyes holds against trigger rules (issue 47, item 6).

Root's release rule `{"selector": {"key": "{{ key }}"}}` and a signed event naming the key
of alice's four-eyes breakpoint released it as `trigger:<rule>`, no person involved. A
trigger's approval is automatic and no automatic approval applies under four eyes: the
decision service refuses it, records the refusal (a `refused` audit event, as every
channel's), and the event's outcome says so (API and console). Rejecting and cancelling
stay allowed: neither approves anything.
"""

import json
import time
import uuid

import pytest
from django.contrib.admin.utils import quote
from rest_framework.test import APIClient

from accounts.tokens import token_create_for_agent
from audit.models import Event, EventType
from breakpoints.models import Breakpoint
from core.actors import Actor
from core.choices import Status
from policies.foureyes import AUTOMATIC_APPROVAL_REFUSAL
from tests.conftest import bearer_client
from triggers import services
from triggers.models import EventStatus, ExternalEvent
from triggers.verification import sign_generic

SECRET = "four-eyes-trigger-secret-0123456789"
KEY = "trg.alice"


@pytest.fixture
def source(admin):
    return services.source_add(actor=admin, name="ops", kind="generic-hmac", secret=SECRET)


def rule(admin, name: str, action: str = "release", **params) -> None:
    services.rule_add(
        actor=admin,
        name=name,
        source="ops",
        action=action,
        params={"selector": {"key": "{{ key }}"}, **params},
    )


@pytest.fixture
def alices_agent(reviewer) -> APIClient:
    """alice's own agent: every breakpoint it creates is requested by alice."""
    return bearer_client(token_create_for_agent(agent_id="alice-agent", owner="alice")[1])


def alices_breakpoint(agent: APIClient, *, four_eyes: bool | None = True) -> str:
    payload: dict = {"breakpointId": KEY, "question": "Ship it?"}
    if four_eyes is not None:
        payload["preventSelfReview"] = four_eyes
    response = agent.post("/api/breakpoints", {"payload": payload}, format="json")
    assert response.status_code == 201, response.content
    return response.json()["breakpointId"]


def evaluated(body: dict) -> ExternalEvent:
    """Send a signed event, as alice's agent holding the source secret could, and evaluate it."""
    raw = json.dumps(body).encode()
    stamp = int(time.time())
    response = APIClient().post(
        "/api/events/ops",
        data=raw,
        content_type="application/json",
        HTTP_X_BPM_TIMESTAMP=str(stamp),
        HTTP_X_BPM_SIGNATURE=sign_generic(SECRET, raw, stamp),
        HTTP_X_BPM_EVENT_ID=str(uuid.uuid4()),
    )
    assert response.status_code == 202, response.content
    event_id = response.json()["eventId"]
    assert services.event_evaluate(event_id) == "processed"
    return ExternalEvent.objects.get(pk=event_id)


def taken(event: ExternalEvent, rule_name: str) -> dict:
    (result,) = [r for r in event.results if r["rule"] == rule_name]
    (action,) = result["actions"]
    return action


def test_a_trigger_approval_of_a_four_eyes_breakpoint_is_refused_and_recorded(
    admin, source, alices_agent
):
    rule(admin, "trg-release")
    bp_id = alices_breakpoint(alices_agent)

    event = evaluated({"key": KEY})

    bp = Breakpoint.objects.get(pk=bp_id)
    assert bp.status == Status.WAITING
    assert bp.result is None
    assert event.status == EventStatus.PROCESSED
    assert taken(event, "trg-release") == {
        "action": "release",
        "breakpointId": bp_id,
        "approved": True,
        "feedback": f"Released by trigger trg-release on event {event.pk}.",
        "outcome": "refused",
        "error": AUTOMATIC_APPROVAL_REFUSAL,
    }
    refused = Event.objects.get(breakpoint_id=bp_id, type=EventType.REFUSED)
    assert refused.actor == "trigger:trg-release"
    assert refused.metadata["via"] == "trigger"
    assert refused.metadata["reason"] == "permission_denied"
    assert refused.metadata["message"] == AUTOMATIC_APPROVAL_REFUSAL
    assert refused.metadata["eventId"] == event.pk
    assert not Event.objects.filter(breakpoint_id=bp_id, type=EventType.RELEASED).exists()


def test_the_service_wide_setting_puts_the_trigger_under_four_eyes_too(
    admin, source, alices_agent, settings
):
    settings.BPM_PREVENT_SELF_REVIEW = True
    rule(admin, "trg-release")
    bp_id = alices_breakpoint(alices_agent, four_eyes=None)

    event = evaluated({"key": KEY})

    assert Breakpoint.objects.get(pk=bp_id).status == Status.WAITING
    assert taken(event, "trg-release")["outcome"] == "refused"


def test_without_four_eyes_the_trigger_still_approves(admin, source, alices_agent):
    rule(admin, "trg-release")
    bp_id = alices_breakpoint(alices_agent, four_eyes=False)

    event = evaluated({"key": KEY})

    bp = Breakpoint.objects.get(pk=bp_id)
    assert (bp.status, bp.result["approved"]) == (Status.RELEASED, True)
    assert taken(event, "trg-release")["outcome"] == "released"


def test_a_trigger_may_still_reject_a_four_eyes_breakpoint(admin, source, alices_agent):
    rule(admin, "trg-reject", approved=False, feedback="The canary failed.")
    bp_id = alices_breakpoint(alices_agent)

    event = evaluated({"key": KEY})

    bp = Breakpoint.objects.get(pk=bp_id)
    assert (bp.status, bp.result["approved"]) == (Status.RELEASED, False)
    assert bp.result["respondedBy"] == "trigger:trg-reject"
    assert taken(event, "trg-reject")["outcome"] == "released"


def test_a_trigger_may_still_cancel_a_four_eyes_breakpoint(admin, source, alices_agent):
    rule(admin, "trg-cancel", action="cancel", reason="Superseded.")
    bp_id = alices_breakpoint(alices_agent)

    event = evaluated({"key": KEY})

    assert Breakpoint.objects.get(pk=bp_id).status == Status.CANCELLED
    assert taken(event, "trg-cancel")["outcome"] == "cancelled"


def test_a_person_other_than_alice_still_approves_it_after_the_refusal(
    admin, source, alices_agent, admin_client
):
    rule(admin, "trg-release")
    bp_id = alices_breakpoint(alices_agent)
    evaluated({"key": KEY})

    response = admin_client.post(
        f"/api/breakpoints/{bp_id}/feedback", {"comment": "", "release": True}, format="json"
    )

    assert response.status_code == 201, response.content
    assert Breakpoint.objects.get(pk=bp_id).result["approved"] is True


def test_the_console_shows_the_refusal_on_the_events_outcome(
    admin, source, alices_agent, admin_browser
):
    rule(admin, "trg-release")
    alices_breakpoint(alices_agent)
    event = evaluated({"key": KEY})

    page = admin_browser.get(
        f"/admin/triggers/externalevent/{quote(event.pk)}/change/"
    ).content.decode()

    assert "refused" in page
    assert "no automatic approval applies" in page


def test_the_refusal_lives_in_the_decision_service_for_every_caller(admin, alices_agent):
    """Not in triggers/ alone: feedback_add itself refuses a trigger's approval."""
    from breakpoints import services as bp_services
    from core.exceptions import Forbidden

    bp_id = alices_breakpoint(alices_agent)
    trigger = Actor(name="trigger:direct", user=admin.user, handle="direct")

    with pytest.raises(Forbidden, match="no automatic approval applies"):
        bp_services.feedback_add(
            breakpoint_id=bp_id, actor=trigger, comment="", release=True, via="trigger"
        )

    assert Breakpoint.objects.get(pk=bp_id).status == Status.WAITING
    assert Event.objects.filter(breakpoint_id=bp_id, type=EventType.REFUSED).count() == 1


def test_a_rule_creates_under_service_wide_four_eyes_requested_by_its_owner(
    admin, admin_user, source, settings
):
    """A breakpoint a rule creates names the rule's owner as its requester: under four eyes
    it is created (a requester is required there), and its owner may not approve it."""
    settings.BPM_PREVENT_SELF_REVIEW = True
    services.rule_add(
        actor=admin,
        name="trg-create",
        source="ops",
        action="create",
        params={"question": "Deploy {{ key }}?", "breakpointId": "deploy.it"},
    )

    event = evaluated({"key": "build-7"})

    outcome = taken(event, "trg-create")
    assert outcome["outcome"] == "created", outcome
    bp = Breakpoint.objects.get(pk=outcome["breakpointId"])
    assert bp.requested_by == admin_user.get_username()
    approve = APIClient()
    approve.force_authenticate(admin_user)
    response = approve.post(
        f"/api/breakpoints/{bp.pk}/feedback", {"comment": "", "release": True}, format="json"
    )
    assert response.status_code == 403, response.content
