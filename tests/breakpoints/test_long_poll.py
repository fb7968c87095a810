"""GET /api/breakpoints/{id}/status?wait=N holds the answer until the status changes."""

import threading
import time

import pytest
from django.db import connection

from breakpoints.services import feedback_add
from core.actors import Actor


@pytest.mark.parametrize("wait", ["abc", "61", "-1", "1.5"])
def test_wait_outside_0_to_60_seconds_is_a_validation_error(agent_client, make_breakpoint, wait):
    bp = make_breakpoint()
    response = agent_client.get(f"/api/breakpoints/{bp.pk}/status", {"wait": wait})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "validation_error"
    assert "wait" in response.json()["error"]["details"]


def test_wait_on_an_unchanged_breakpoint_answers_waiting_after_the_wait(
    agent_client, make_breakpoint
):
    bp = make_breakpoint()
    response = agent_client.get(f"/api/breakpoints/{bp.pk}/status", {"wait": 1})
    assert response.status_code == 200
    assert response.json()["status"] == "waiting"
    assert response.json()["result"] is None


def test_wait_on_another_agents_breakpoint_is_not_found(other_agent_client, make_breakpoint):
    bp = make_breakpoint()
    response = other_agent_client.get(f"/api/breakpoints/{bp.pk}/status", {"wait": 1})
    assert response.status_code == 404


@pytest.mark.django_db(transaction=True)
def test_waiting_poll_returns_the_release_made_meanwhile(agent_client, make_breakpoint, reviewer):
    bp = make_breakpoint()

    def release_soon():
        try:
            time.sleep(0.3)
            feedback_add(
                breakpoint_id=bp.pk,
                actor=Actor.for_user(reviewer),
                comment="ship it",
                release=True,
            )
        finally:
            connection.close()

    releaser = threading.Thread(target=release_soon)
    releaser.start()
    response = agent_client.get(f"/api/breakpoints/{bp.pk}/status", {"wait": 20})
    releaser.join()
    assert response.status_code == 200
    assert response.json()["status"] == "released"
    assert response.json()["result"]["feedback"] == "ship it"


def test_waiting_poll_sees_the_ttl_expire(agent_client, make_breakpoint):
    bp = make_breakpoint(ttl_seconds=1)
    response = agent_client.get(f"/api/breakpoints/{bp.pk}/status", {"wait": 10})
    assert response.status_code == 200
    assert response.json()["status"] == "expired"
    assert response.json()["result"]["approved"] is False
