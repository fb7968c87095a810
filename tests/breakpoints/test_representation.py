"""breakpoints.representation.contract writes exactly what the API answers, and webhooks send it.

Each test reads a breakpoint over HTTP and compares the JSON, key for key and in order,
with breakpoint_json of the row read back from the database, and with what DRF's own
fields declared on BreakpointSerializer and FeedbackSerializer write for that row (the
serializers' output before they delegated to breakpoints.representation.contract): DRF is the
reference for every value's format, times in UTC as the contract says.
"""

import json
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework import serializers

from breakpoints.api.serializers import BreakpointSerializer, FeedbackSerializer
from breakpoints.models import Breakpoint
from breakpoints.representation.contract import (
    ATTRIBUTES,
    breakpoint_json,
    breakpoint_row_json,
    breakpoints_json,
)
from breakpoints.selectors import breakpoint_page_list, listed_rows
from breakpoints.services import breakpoint_cancel, breakpoints_expire_due, feedback_add
from core.actors import Actor
from notifications import services as webhooks
from notifications.models import Delivery
from tests.support.factories import BreakpointFactory

ROUTED = ["tech-lead", "ops-lead", "reviewer-bob", "owner", "nobody-at-all"]


def api_detail(client, bp_id: str) -> dict:
    response = client.get(f"/api/breakpoints/{bp_id}")
    assert response.status_code == 200, response.content
    return response.json()


def sent(data: dict) -> dict:
    """What a client receives: strict JSON (no default=str), parsed back."""
    return json.loads(json.dumps(data))


def declared_fields_json(bp: Breakpoint, seats: dict | None = None) -> dict:
    """What the serializers' declared DRF fields write (their base to_representation)."""
    data = serializers.Serializer.to_representation(
        BreakpointSerializer(context={"seats": seats}), bp
    )
    data["feedback"] = [
        serializers.Serializer.to_representation(FeedbackSerializer(), feedback)
        for feedback in bp.feedback.all()
    ]
    return dict(data)


def assert_same(bp_id: str, api: dict, seats: dict | None = None) -> None:
    data = breakpoint_json(stored(bp_id), seats)
    reference = declared_fields_json(stored(bp_id), seats)
    assert list(data) == list(reference) == list(api)  # the contract's field order
    assert [list(f) for f in data["feedback"]] == [list(f) for f in reference["feedback"]]
    assert sent(data) == sent(reference) == api


def stored(bp_id: str) -> Breakpoint:
    return Breakpoint.objects.get(pk=bp_id)


def routed(make_breakpoint, strategy: str = "collect-all", **fields) -> Breakpoint:
    payload = {"question": "Deploy?", "title": "Deploy", "expert": ROUTED, "strategy": strategy}
    return make_breakpoint(payload=payload, **fields)


@pytest.fixture
def seats(expert_member, settings):
    """Groups tech-lead and ops-lead with a member each, user reviewer-bob, owner olivia."""
    settings.BPM_PROJECT_OWNERS = ["olivia"]
    expert_member("olivia")
    return {
        "tech-lead": expert_member("tina", "tech-lead"),
        "ops-lead": expert_member("oscar", "ops-lead"),
        "reviewer-bob": expert_member("reviewer-bob"),
    }


def test_a_waiting_breakpoint_created_over_the_api(agent_client, reviewer_client):
    body = {
        "agentId": "agent-a",
        "runId": "run-7",
        "title": "Schema change",
        "payload": {"question": "Add the column?", "breakpointId": "db.add-column", "x": [1]},
        "tags": ["db", "risky"],
    }
    created = agent_client.post("/api/breakpoints", body, format="json")
    assert created.status_code == 201, created.content
    bp_id = created.json()["breakpointId"]

    api = api_detail(reviewer_client, bp_id)

    assert_same(bp_id, api)
    # The create answer is the representation, plus its warnings (never stored).
    *representation, warnings = created.json().items()
    assert sent(breakpoint_json(stored(bp_id))) == dict(representation)
    assert warnings == ("warnings", [])
    assert api["status"] == "waiting"
    assert api["runId"] == "run-7"
    assert api["autoApproval"]["recommended"] is False
    assert api["createdAt"].endswith("Z")
    assert api["feedback"] == api["votes"] == api["experts"] == []
    assert api["expiresAt"] is api["ttlSeconds"] is None


def test_a_breakpoint_with_a_ttl(make_breakpoint, reviewer_client):
    bp = make_breakpoint(ttl_seconds=900, run_id=None)

    api = api_detail(reviewer_client, bp.pk)

    assert_same(bp.pk, api)
    assert api["ttlSeconds"] == 900
    assert api["expiresAt"].endswith("Z")
    assert api["runId"] is None


def test_a_routed_breakpoint_lists_its_seats_resolved(seats, make_breakpoint, reviewer_client):
    bp = routed(make_breakpoint)

    api = api_detail(reviewer_client, bp.pk)

    assert_same(bp.pk, api)
    # seats that do not cover every name are ignored: resolved afresh, same answer
    assert_same(bp.pk, api, seats={})
    assert api["experts"] == [
        {"name": "tech-lead", "resolved": True, "kind": "group"},
        {"name": "ops-lead", "resolved": True, "kind": "group"},
        {"name": "reviewer-bob", "resolved": True, "kind": "user"},
        {"name": "owner", "resolved": True, "kind": "owner"},
        {"name": "nobody-at-all", "resolved": False, "kind": None},
    ]


def test_a_released_breakpoint_with_feedback_and_votes(
    seats, make_breakpoint, client_for, admin_user, reviewer_client
):
    bp = routed(make_breakpoint, strategy="quorum")
    feedback_add(breakpoint_id=bp.pk, actor=Actor.for_user(seats["ops-lead"]), comment="hmm")
    for who, user in [("tina", seats["tech-lead"]), ("an admin", admin_user)]:
        response = client_for(user).post(
            f"/api/breakpoints/{bp.pk}/feedback",
            {"comment": f"fine by {who}", "release": True, "approved": True},
            format="json",
        )
        assert response.status_code == 201, response.content
    feedback_add(breakpoint_id=bp.pk, actor=Actor.for_user(seats["tech-lead"]), comment="ok")
    response = client_for(seats["ops-lead"]).post(
        f"/api/breakpoints/{bp.pk}/feedback",
        {"comment": "go", "release": True, "approved": True},
        format="json",
    )
    assert response.status_code == 201, response.content

    api = api_detail(reviewer_client, bp.pk)

    assert_same(bp.pk, api)
    assert api["status"] == "released"
    assert api["releasedAt"] is not None
    assert [vote["seat"] for vote in api["votes"]] == ["tech-lead", "nobody-at-all", "ops-lead"]
    assert api["result"]["approved"] is True
    assert [f["comment"] for f in api["feedback"]] == [
        "hmm",
        "fine by tina",
        "fine by an admin",
        "ok",
        "go",
    ]
    assert all(isinstance(f["id"], str) for f in api["feedback"])


def test_an_expired_and_a_cancelled_breakpoint(make_breakpoint, reviewer, reviewer_client):
    expired = make_breakpoint(ttl_seconds=60)
    feedback_add(breakpoint_id=expired.pk, actor=Actor.for_user(reviewer), comment="later")
    Breakpoint.objects.filter(pk=expired.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert breakpoints_expire_due() == 1
    cancelled = make_breakpoint()
    breakpoint_cancel(breakpoint_id=cancelled.pk, actor=Actor.for_agent("agent-a"), reason="no")

    for bp, status, moment in [
        (expired, "expired", "expiredAt"),
        (cancelled, "cancelled", "cancelledAt"),
    ]:
        api = api_detail(reviewer_client, bp.pk)
        assert_same(bp.pk, api)
        assert api["status"] == status
        assert api[moment] is not None


def test_the_list_page_is_breakpoints_json_of_its_rows(seats, make_breakpoint, reviewer_client):
    made = [routed(make_breakpoint), make_breakpoint(ttl_seconds=120), make_breakpoint()]
    feedback_add(breakpoint_id=made[1].pk, actor=Actor.for_user(seats["ops-lead"]), comment="x")

    response = reviewer_client.get("/api/breakpoints")
    assert response.status_code == 200, response.content
    page = response.json()["results"]

    rows = stored_in_order([row["breakpointId"] for row in page])
    assert [sent(data) for data in breakpoints_json(rows)] == page
    assert [list(data) for data in breakpoints_json(rows)] == [list(row) for row in page]
    for row in page:
        assert_same(row["breakpointId"], row)
    assert {row["breakpointId"] for row in page} == {bp.pk for bp in made}


def stored_in_order(ids: list[str]) -> list[Breakpoint]:
    found = Breakpoint.objects.in_bulk(ids)
    return [found[pk] for pk in ids]


def test_times_are_written_in_utc_whatever_the_time_zone(
    settings, make_breakpoint, reviewer_client
):
    settings.TIME_ZONE = "Asia/Kolkata"
    bp = make_breakpoint(ttl_seconds=300)

    api = api_detail(reviewer_client, bp.pk)

    assert_same(bp.pk, api)
    assert api["createdAt"].endswith("Z")
    assert api["expiresAt"].endswith("Z")


def test_a_webhook_sends_what_the_api_answers(make_breakpoint, reviewer, reviewer_client):
    """The outbox body's data is the API's JSON of the breakpoint as the change left it."""
    webhooks.webhook_add(url="https://example.com/hook", event_types=["feedback", "released"])
    bp = make_breakpoint(ttl_seconds=600)
    feedback_add(breakpoint_id=bp.pk, actor=Actor.for_user(reviewer), comment="first")
    feedback_add(breakpoint_id=bp.pk, actor=Actor.for_user(reviewer), comment="done", release=True)

    api = api_detail(reviewer_client, bp.pk)

    [released] = Delivery.objects.filter(breakpoint=bp, event_type="released")
    assert released.body["type"] == "breakpoint.released"
    assert released.body["data"] == api  # key order aside: PostgreSQL's jsonb sorts keys


class _RecordingRow(dict):
    """A row that records every name the representation reads."""

    def __init__(self) -> None:
        super().__init__()
        self.read: list[str] = []

    def __getitem__(self, name: str):
        self.read.append(name)
        return [] if name in ("experts", "feedback") else None


def test_a_list_page_reads_exactly_the_columns_the_representation_shows(reviewer):
    recording = _RecordingRow()
    breakpoint_row_json(recording)
    BreakpointFactory()

    rows = listed_rows(breakpoint_page_list(reviewer))

    assert set(recording.read) == {*ATTRIBUTES, "feedback"}
    assert len(recording.read) == len(ATTRIBUTES) + 1  # each read once
    assert [set(row) for row in rows] == [{*ATTRIBUTES, "feedback"}]


def test_console_url_is_the_review_page_under_the_public_url(
    agent_client, reviewer, reviewer_client, settings
):
    """consoleUrl: BPM_PUBLIC_URL (its trailing slash dropped) and the review page's path;
    the create answer, the detail and a list page carry the same, and it opens the page."""
    settings.BPM_PUBLIC_URL = "https://bpm.example.test/"
    created = agent_client.post(
        "/api/breakpoints", {"agentId": "agent-a", "payload": {"question": "Go?"}}, format="json"
    )
    assert created.status_code == 201, created.content
    bp_id = created.json()["breakpointId"]
    page = f"/admin/breakpoints/breakpoint/{bp_id}/change/"

    listed = reviewer_client.get("/api/breakpoints").json()["results"]

    assert created.json()["consoleUrl"] == f"https://bpm.example.test{page}"
    assert api_detail(reviewer_client, bp_id)["consoleUrl"] == created.json()["consoleUrl"]
    assert [row["consoleUrl"] for row in listed] == [created.json()["consoleUrl"]]
    browser = Client()
    browser.force_login(reviewer)
    assert bp_id in browser.get(page).content.decode()
