"""The agent's happy path through the API: post, poll, reviewer releases, agent sees it."""

from breakpoints.models import Breakpoint


def test_agent_posts_reviewer_releases_agent_sees_decision(agent_client, reviewer_client):
    created = agent_client.post(
        "/api/breakpoints",
        {"payload": {"question": "Approve?", "title": "Plan Review"}, "tags": ["design"]},
        format="json",
    )
    assert created.status_code == 201
    breakpoint_id = created.json()["breakpointId"]
    assert created.json()["status"] == "waiting"
    assert created.json()["key"] == "plan-review"

    released = reviewer_client.post(
        f"/api/breakpoints/{breakpoint_id}/feedback",
        {"comment": "Looks good", "release": True},
        format="json",
    )
    assert released.status_code == 201

    polled = agent_client.get(f"/api/breakpoints/{breakpoint_id}/status")
    assert polled.status_code == 200
    body = polled.json()
    assert body["status"] == "released"
    assert body["result"]["approved"] is True
    assert body["result"]["feedback"] == "Looks good"
    assert body["result"]["respondedBy"] == "alice"
    assert Breakpoint.objects.get(pk=breakpoint_id).released_at is not None
