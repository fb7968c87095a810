"""The babysitter CI gate: a signed GitHub workflow_run event decides `wait-for-ci`."""

import re

import pytest
from django.contrib.admin.utils import quote
from rest_framework.test import APIClient

from audit.models import Event, EventType
from core.actors import Actor
from tests.support.github_events import deliver, run_event
from triggers import services
from triggers.models import EventStatus, ExternalEvent

pytest_plugins = ["tests.support.github_events"]  # the github source fixture


@pytest.fixture
def ci_rules(github, admin_user):
    admin = Actor.for_user(admin_user)
    selector = {"key": "wait-for-ci", "runId": "{{ workflow_run.head_sha }}"}
    services.rule_add(
        actor=admin,
        name="ci-green",
        source="github",
        action="release",
        event_type="workflow_run",
        conditions=["workflow_run.conclusion == 'success'"],
        params={"selector": selector, "feedback": "CI passed: {{ workflow_run.html_url }}"},
    )
    services.rule_add(
        actor=admin,
        name="ci-red",
        source="github",
        action="release",
        event_type="workflow_run",
        conditions=["workflow_run.conclusion == 'failure'"],
        params={
            "selector": selector,
            "approved": False,
            "feedback": "CI failed in job {{ workflow_run.name }}",
        },
    )


def wait_for_ci(agent_client, run_id: str) -> str:
    response = agent_client.post(
        "/api/breakpoints",
        {"runId": run_id, "payload": {"breakpointId": "wait-for-ci", "question": "CI green?"}},
        format="json",
    )
    assert response.status_code == 201, response.content
    return response.json()["breakpointId"]


def status_of(agent_client, breakpoint_id: str) -> dict:
    return agent_client.get(f"/api/breakpoints/{breakpoint_id}/status").json()


def test_a_green_run_approves_exactly_its_breakpoint(agent_client, ci_rules):
    mine, other = wait_for_ci(agent_client, "abc123"), wait_for_ci(agent_client, "def456")
    event = run_event(
        deliver(
            {
                "workflow_run": {
                    "head_sha": "abc123",
                    "conclusion": "success",
                    "html_url": "https://ci.example/1",
                    "name": "tests",
                }
            }
        )
    )
    answer = status_of(agent_client, mine)
    assert answer["status"] == "released"
    assert answer["result"]["approved"] is True
    assert answer["result"]["respondedBy"] == "trigger:ci-green"
    assert answer["result"]["feedback"] == "CI passed: https://ci.example/1"
    assert status_of(agent_client, other)["status"] == "waiting"
    released = Event.objects.get(breakpoint_id=mine, type=EventType.RELEASED)
    assert released.metadata["eventId"] == event.pk
    assert event.status == EventStatus.PROCESSED
    by_rule = {result["rule"]: result for result in event.results}
    assert by_rule["ci-green"]["actions"][0]["outcome"] == "released"
    assert by_rule["ci-red"]["matched"] is False


def test_a_red_run_rejects_with_the_failing_job(agent_client, ci_rules):
    mine = wait_for_ci(agent_client, "abc123")
    run_event(
        deliver({"workflow_run": {"head_sha": "abc123", "conclusion": "failure", "name": "lint"}})
    )
    result = status_of(agent_client, mine)["result"]
    assert (result["approved"], result["feedback"]) == (False, "CI failed in job lint")


def test_a_redelivery_is_stored_once_and_acts_once(agent_client, ci_rules):
    wait_for_ci(agent_client, "abc123")
    body = {"workflow_run": {"head_sha": "abc123", "conclusion": "success"}}
    first = deliver(body, delivery="d-1")
    again = deliver(body, delivery="d-1")
    assert (first.status_code, again.status_code) == (202, 200)
    assert again.json() == {"eventId": first.json()["eventId"], "duplicate": True}
    assert services.event_evaluate(first.json()["eventId"]) == "processed"
    assert services.event_evaluate(first.json()["eventId"]) == "skipped"
    assert Event.objects.filter(type=EventType.RELEASED).count() == 1


@pytest.mark.parametrize(
    "mangle",
    [
        {"secret": "not-the-secret-0123456789"},
        {"event": ""},
    ],
)
def test_a_bad_signature_or_missing_header_changes_nothing(agent_client, ci_rules, mangle):
    wait_for_ci(agent_client, "abc123")
    response = deliver({"workflow_run": {"head_sha": "abc123", "conclusion": "success"}}, **mangle)
    assert response.status_code in (400, 401)
    assert set(response.json()["error"]) == {"code", "message", "details"}
    assert not ExternalEvent.objects.exists()


def test_an_unknown_source_is_404(db):
    response = APIClient().post("/api/events/nope", data=b"{}", content_type="application/json")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_the_breakpoints_history_links_the_event_that_decided_it(
    agent_client, ci_rules, client, admin_user
):
    mine = wait_for_ci(agent_client, "abc123")
    event = run_event(deliver({"workflow_run": {"head_sha": "abc123", "conclusion": "success"}}))
    client.force_login(admin_user)

    page = client.get(f"/admin/breakpoints/breakpoint/{mine}/change/").content.decode()

    assert f'href="/admin/triggers/externalevent/{quote(event.pk)}/change/"' in page
    assert "(rule ci-green)" in page


def test_the_link_opens_an_event_whose_id_holds_what_the_admin_unescapes(
    agent_client, ci_rules, client, admin_user, monkeypatch
):
    """An event id is "evt_" and URL-safe base64, so it may hold "_2F" or "_5F": the admin
    reads those in a URL as an escaped "/" or "_" unless the link escapes the id."""
    awkward = "evt_2F_5F-x"
    monkeypatch.setattr(ExternalEvent._meta.get_field("id"), "_get_default", lambda: awkward)
    mine = wait_for_ci(agent_client, "abc123")
    event = run_event(deliver({"workflow_run": {"head_sha": "abc123", "conclusion": "success"}}))
    assert event.pk == awkward
    client.force_login(admin_user)

    page = client.get(f"/admin/breakpoints/breakpoint/{mine}/change/").content.decode()
    link = re.search(r'href="(/admin/triggers/externalevent/[^"]+/change/)"', page)

    assert link is not None
    opened = client.get(link.group(1))
    assert opened.status_code == 200  # the event's page, not a redirect: "does not exist"
    assert opened.context["original"] == event
