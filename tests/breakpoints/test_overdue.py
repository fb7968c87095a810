"""Past its expiresAt a breakpoint is expired for every caller, before the sweep runs."""

from datetime import timedelta

from django.utils import timezone

from audit.models import Event
from breakpoints.models import Breakpoint
from breakpoints.services import release_preview
from core.actors import Actor


def _make_overdue(make_breakpoint, **fields):
    bp = make_breakpoint(ttl_seconds=60, **fields)
    Breakpoint.objects.filter(pk=bp.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    return bp


def test_release_after_expires_at_is_refused_as_expired(make_breakpoint, reviewer_client):
    bp = _make_overdue(make_breakpoint)
    response = reviewer_client.post(
        f"/api/breakpoints/{bp.pk}/feedback", {"comment": "late", "release": True}, format="json"
    )
    assert response.status_code == 409
    assert response.json()["error"]["details"]["currentStatus"] == "expired"
    stored = Breakpoint.objects.get(pk=bp.pk)
    assert stored.status == "expired"
    assert stored.feedback.count() == 0


def test_cancel_after_expires_at_is_refused_as_expired(make_breakpoint, agent_client):
    bp = _make_overdue(make_breakpoint)
    response = agent_client.post(f"/api/breakpoints/{bp.pk}/cancel", {}, format="json")
    assert response.status_code == 409
    assert response.json()["error"]["details"]["currentStatus"] == "expired"
    assert Breakpoint.objects.get(pk=bp.pk).status == "expired"


def test_list_shows_an_overdue_breakpoint_as_expired(make_breakpoint, reviewer_client):
    overdue = _make_overdue(make_breakpoint)
    fresh = make_breakpoint(ttl_seconds=3600)
    listed = {
        row["breakpointId"]: row["status"]
        for row in reviewer_client.get("/api/breakpoints").json()["results"]
    }
    assert listed == {overdue.pk: "expired", fresh.pk: "waiting"}
    assert Event.objects.filter(breakpoint_id=overdue.pk, type="expired").count() == 1


def test_a_search_shows_an_overdue_breakpoint_as_expired(make_breakpoint, reviewer_client):
    overdue = _make_overdue(make_breakpoint, payload={"title": "Rotate keys"})
    fresh = make_breakpoint(ttl_seconds=3600, payload={"title": "Rotate certificates"})
    answer = reviewer_client.get("/api/breakpoints", {"search": "rotate"}).json()

    assert [(row["breakpointId"], row["status"]) for row in answer["results"]] == [
        (fresh.pk, "waiting"),
        (overdue.pk, "expired"),
    ]
    assert Event.objects.filter(breakpoint_id=overdue.pk, type="expired").count() == 1


def test_waiting_filter_leaves_out_overdue_breakpoints(make_breakpoint, reviewer_client):
    overdue = _make_overdue(make_breakpoint)
    fresh = make_breakpoint()
    ids = [
        row["breakpointId"]
        for row in reviewer_client.get("/api/breakpoints", {"status": "waiting"}).json()["results"]
    ]
    assert ids == [fresh.pk]
    assert overdue.pk not in ids


def test_release_preview_shows_the_result_without_writing(make_breakpoint, reviewer):
    bp = make_breakpoint(payload={"question": "Ship?", "options": ["now", "later"]})
    outcome = release_preview(
        bp=bp, actor=Actor.for_user(reviewer), approved=False, comment="not yet", option="later"
    )
    assert outcome.decision is False
    assert outcome.result["approved"] is False
    assert outcome.result["feedback"] == "not yet"
    assert outcome.result["option"] == "later"
    assert outcome.result["respondedBy"] == reviewer.username
    stored = Breakpoint.objects.get(pk=bp.pk)
    assert stored.status == "waiting" and stored.votes == [] and stored.feedback.count() == 0
