"""GET /api/breakpoints/status?id=…: many breakpoints in one request (DRF path), and pollAfterMs."""

import threading
import time

import pytest
from django.db import connection

from breakpoints.services import breakpoint_cancel, feedback_add
from breakpoints.waiting import bodies
from breakpoints.waiting.bodies import PollRate, poll_after_ms
from core.actors import Actor

MANY = "/api/breakpoints/status"


def test_many_answers_each_in_the_order_asked(agent_client, make_breakpoint):
    first, second = make_breakpoint(), make_breakpoint()
    breakpoint_cancel(breakpoint_id=second.pk, actor=Actor.for_agent("agent-a"))

    response = agent_client.get(f"{MANY}?id={second.pk}&id={first.pk}")

    assert response.status_code == 200
    results = response.json()["results"]
    assert [r["breakpointId"] for r in results] == [second.pk, first.pk]
    assert [r["status"] for r in results] == ["cancelled", "waiting"]
    assert results[0]["pollAfterMs"] is None
    assert results[1]["pollAfterMs"] == 1000


def test_many_reports_another_agents_breakpoint_as_not_found(agent_client, make_breakpoint):
    theirs = make_breakpoint(agent_id="agent-b")

    response = agent_client.get(f"{MANY}?id={theirs.pk}&id=bp-does-not-exist")

    assert [r["error"]["code"] for r in response.json()["results"]] == ["not_found"] * 2
    assert "status" not in response.json()["results"][0]


def test_many_with_a_trailing_slash_is_the_same_endpoint(agent_client, make_breakpoint):
    bp = make_breakpoint()

    response = agent_client.get(f"{MANY}/?id={bp.pk}")

    assert response.json()["results"][0]["status"] == "waiting"


@pytest.mark.parametrize(
    "query", ["", "id=", "id=bp-1&id=bp-1", "&".join(f"id=bp-{n}" for n in range(101))]
)
def test_many_refuses_missing_repeated_or_too_many_ids(agent_client, query):
    response = agent_client.get(f"{MANY}?{query}")

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "validation_error"
    assert "id" in response.json()["error"]["details"]


def test_many_needs_authentication(client, make_breakpoint):
    bp = make_breakpoint()

    assert client.get(f"{MANY}?id={bp.pk}").status_code == 401


@pytest.mark.django_db(transaction=True)
def test_many_wait_returns_as_soon_as_one_is_decided(agent_client, make_breakpoint, reviewer):
    first, second = make_breakpoint(), make_breakpoint()

    def release_second() -> None:
        try:
            time.sleep(0.3)
            feedback_add(
                breakpoint_id=second.pk, actor=Actor.for_user(reviewer), comment="ok", release=True
            )
        finally:
            connection.close()

    releaser = threading.Thread(target=release_second)
    releaser.start()
    response = agent_client.get(f"{MANY}?id={first.pk}&id={second.pk}&wait=20")
    releaser.join()

    assert [r["status"] for r in response.json()["results"]] == ["waiting", "released"]


def test_the_poll_hint_grows_with_the_poll_rate(monkeypatch):
    rate = PollRate()
    monkeypatch.setattr(bodies, "poll_rate", rate)
    quiet = poll_after_ms("waiting")

    for _ in range(bodies.COMFORTABLE_POLLS_PER_SECOND * 5):
        rate.hit()

    busy = poll_after_ms("waiting")
    assert quiet == bodies.BASE_POLL_AFTER_MS
    assert busy is not None and busy >= 2 * quiet
    assert busy <= bodies.MAX_POLL_AFTER_MS
    assert poll_after_ms("released") is None
