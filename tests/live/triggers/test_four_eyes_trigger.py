"""A trigger rule does not release a four-eyes breakpoint, through the real trigger path
(issue 47, item 6).

Real processes (web, a worker, beat, Redis, PostgreSQL): root's rule
`{"selector": {"key": "{{ key }}"}}` and an event `{"key": "trg.alice"}` signed with the
source's secret (alice's own agent could hold it) released alice's four-eyes breakpoint
as `trigger:trg-release`, no person involved. Now the worker's evaluation is refused by
the decision service, the refusal is recorded, and the event's outcome says so; a rule
that rejects still does.
"""

from collections.abc import Iterator

import httpx
import pytest

from accounts.tokens import token_create_for_agent
from audit.models import Event, EventType
from breakpoints.models import Breakpoint
from core.actors import Actor
from core.choices import Status
from tests.support.events import post_signed_event
from tests.support.factories import ReviewerFactory
from tests.support.system import System
from triggers import services
from triggers.models import EventSource, EventStatus, ExternalEvent

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "four-eyes-live-secret-0123456789"


@pytest.fixture
def system(make_system) -> System:
    return make_system()


@pytest.fixture
def rules(admin_user) -> None:
    EventSource.objects.create(name="ops", kind="generic-hmac", secret=SECRET)
    admin = Actor.for_user(admin_user)
    selector = {"selector": {"key": "{{ key }}"}}
    services.rule_add(
        actor=admin, name="trg-release", action="release", event_type="approve", params=selector
    )
    services.rule_add(
        actor=admin,
        name="trg-reject",
        action="release",
        event_type="reject",
        params={**selector, "approved": False},
    )


@pytest.fixture
def alices_agent(system) -> Iterator[httpx.Client]:
    ReviewerFactory(username="alice", email="alice@example.com")
    raw = token_create_for_agent(agent_id="alice-agent", owner="alice")[1]
    with httpx.Client(
        base_url=system.base_url, headers={"Authorization": f"Bearer {raw}"}, timeout=30
    ) as client:
        yield client


def four_eyes_breakpoint(agent: httpx.Client, key: str) -> str:
    payload = {"breakpointId": key, "question": "Ship it?", "preventSelfReview": True}
    response = agent.post("/api/breakpoints", json={"payload": payload})
    assert response.status_code == 201, response.text
    return response.json()["breakpointId"]


def evaluated(system: System, event_type: str, key: str) -> ExternalEvent:
    """The event signed and sent over HTTP, once the worker evaluated it."""
    with httpx.Client(base_url=system.base_url, timeout=30) as client:
        body = {"type": event_type, "key": key}
        response = post_signed_event(client, "ops", SECRET, f"{event_type}-{key}", body)
    assert response.status_code == 202, response.text
    event_id = response.json()["eventId"]
    return system.wait_until(
        lambda: ExternalEvent.objects.filter(pk=event_id, status=EventStatus.PROCESSED).first(),
        what=f"the worker to evaluate {event_type}",
        timeout=60,
    )


def outcome(event: ExternalEvent) -> dict:
    (result,) = [r for r in event.results if r.get("matched")]
    (taken,) = result["actions"]
    return taken


def test_a_trigger_cannot_approve_a_four_eyes_breakpoint_but_may_reject_it(
    system, rules, alices_agent
):
    bp_id = four_eyes_breakpoint(alices_agent, "trg.alice")

    approving = evaluated(system, "approve", "trg.alice")

    assert Breakpoint.objects.get(pk=bp_id).status == Status.WAITING
    assert outcome(approving)["outcome"] == "refused"
    assert "no automatic approval applies" in outcome(approving)["error"]
    refused = Event.objects.get(breakpoint_id=bp_id, type=EventType.REFUSED)
    assert (refused.actor, refused.metadata["eventId"]) == ("trigger:trg-release", approving.pk)
    status = alices_agent.get(f"/api/breakpoints/{bp_id}/status").json()
    assert status["status"] == "waiting"

    rejecting = evaluated(system, "reject", "trg.alice")

    assert outcome(rejecting)["outcome"] == "released"
    bp = Breakpoint.objects.get(pk=bp_id)
    assert (bp.status, bp.result["approved"]) == (Status.RELEASED, False)
