"""Races on real row locks (PostgreSQL): one release wins, idempotent retries make one row."""

from collections import Counter
from datetime import timedelta

import pytest
from django.utils import timezone

from accounts.tokens import token_create_for_user
from audit.models import Event
from breakpoints.models import Breakpoint, Feedback
from breakpoints.services import breakpoints_expire_due
from tests.conftest import bearer_client
from tests.support.factories import ReviewerFactory
from tests.support.threads import run_indexed

THREADS = 8

# PostgreSQL row locks and concurrent connections.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]


def reviewer_clients(count: int) -> list:
    return [
        bearer_client(token_create_for_user(user=ReviewerFactory(username=f"rev{i}"))[1])
        for i in range(count)
    ]


def test_eight_simultaneous_releases_give_exactly_one_winner(make_breakpoint):
    bp = make_breakpoint()
    clients = reviewer_clients(THREADS)

    def release(i: int):
        response = clients[i].post(
            f"/api/breakpoints/{bp.pk}/feedback",
            {"comment": f"from rev{i}", "release": True},
            format="json",
        )
        return response.status_code, response.json()

    results = run_indexed(THREADS, release)

    statuses = Counter(status for status, _ in results)
    assert statuses == {201: 1, 409: THREADS - 1}, results
    for status, body in results:
        if status == 409:
            assert body["error"]["code"] == "invalid_state"
            assert body["error"]["details"]["currentStatus"] == "released"
    winner = next(body for status, body in results if status == 201)
    stored = Breakpoint.objects.get(pk=bp.pk)
    assert stored.status == "released"
    assert stored.result["respondedBy"] == winner["result"]["respondedBy"]
    assert Event.objects.filter(breakpoint_id=bp.pk, type="released").count() == 1
    assert Feedback.objects.filter(breakpoint_id=bp.pk).count() == 1


def test_simultaneous_release_and_cancel_have_one_winner(make_breakpoint, agent_token):
    bp = make_breakpoint()
    reviewers = reviewer_clients(THREADS // 2)
    agents = [bearer_client(agent_token) for _ in range(THREADS // 2)]

    def act(i: int):
        if i % 2:
            client = reviewers[i // 2]
            response = client.post(
                f"/api/breakpoints/{bp.pk}/feedback", {"release": True}, format="json"
            )
            return "release", response.status_code
        response = agents[i // 2].post(f"/api/breakpoints/{bp.pk}/cancel", format="json")
        return "cancel", response.status_code

    results = run_indexed(THREADS, act)

    stored = Breakpoint.objects.get(pk=bp.pk)
    assert stored.status in {"released", "cancelled"}
    final_events = Event.objects.filter(breakpoint_id=bp.pk, type__in=["released", "cancelled"])
    assert list(final_events.values_list("type", flat=True)) == [stored.status]
    if stored.status == "released":
        # One release won; every other release and every cancel was refused.
        assert sorted(results) == sorted(
            [("release", 201)] + [("release", 409)] * 3 + [("cancel", 409)] * 4
        )
    else:
        # A cancel won; other cancels repeat it (200), every release was refused.
        assert sorted(results) == sorted([("cancel", 200)] * 4 + [("release", 409)] * 4)


def test_concurrent_retries_with_one_idempotency_key_create_one_breakpoint(agent_token, db):
    clients = [bearer_client(agent_token) for _ in range(THREADS)]
    body = {"payload": {"question": "Deploy?"}, "tags": ["ops"]}

    def create(i: int):
        response = clients[i].post(
            "/api/breakpoints", body, format="json", HTTP_IDEMPOTENCY_KEY="retry-42"
        )
        return response.status_code, response.json().get("breakpointId")

    results = run_indexed(THREADS, create)

    assert Breakpoint.objects.count() == 1
    only = Breakpoint.objects.get()
    assert Counter(status for status, _ in results) == {201: 1, 200: THREADS - 1}, results
    assert {bp_id for _, bp_id in results} == {only.pk}
    assert Event.objects.filter(type="created").count() == 1


def test_overlapping_sweeps_expire_each_breakpoint_once(make_breakpoint):
    due = [make_breakpoint(ttl_seconds=60) for _ in range(20)]
    Breakpoint.objects.filter(pk__in=[bp.pk for bp in due]).update(
        expires_at=timezone.now() - timedelta(seconds=5)
    )

    counts = run_indexed(4, lambda i: breakpoints_expire_due(batch_size=3))

    assert not any(isinstance(c, Exception) for c in counts), counts
    assert sum(counts) == 20
    assert Breakpoint.objects.filter(status="expired").count() == 20
    expired = Counter(Event.objects.filter(type="expired").values_list("breakpoint_id", flat=True))
    assert set(expired.values()) == {1}
    assert len(expired) == 20
