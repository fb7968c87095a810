"""POST /api/breakpoints/decisions: many decisions at once, each as a single one."""

import pytest

from audit.models import Event
from breakpoints.models import Breakpoint, Feedback
from breakpoints.services import breakpoint_cancel
from core.actors import Actor
from core.limits import MAX_BATCH_DECISIONS
from tests.support.api import assert_error
from tests.support.records import refusals

URL = "/api/breakpoints/decisions"

FOUR_EYES = {"question": "Deploy?", "title": "Deploy", "preventSelfReview": True}
WITH_OPTIONS = {"question": "Which?", "title": "Pick", "options": ["blue", "green"]}


def decide(client, items, slash=""):
    return client.post(URL + slash, {"items": items}, format="json")


def item(bp_id: str, approved: bool = True, **fields) -> dict:
    return {"breakpointId": bp_id, "approved": approved, **fields}


def statuses(response) -> list[int]:
    assert response.status_code == 200, response.content
    return [result["status"] for result in response.json()["results"]]


def nothing_decided(*bps) -> None:
    for bp in bps:
        assert Breakpoint.objects.get(pk=bp.pk).status == "waiting"
    assert not Feedback.objects.exists()
    assert not Event.objects.filter(type__in=["feedback", "released", "refused"]).exists()


def test_mixed_items_are_each_decided_or_refused_in_order(
    reviewer_client, reviewer, make_breakpoint
):
    """One approved, one refused under four eyes (alice requested it), one decided already,
    one unknown, one with an option the breakpoint does not offer: each answered as its
    single decision would be, the refused ones left as they were."""
    approved = make_breakpoint()
    own = make_breakpoint(requested_by="alice", payload=FOUR_EYES)
    cancelled = make_breakpoint()
    breakpoint_cancel(breakpoint_id=cancelled.pk, actor=Actor.for_agent("agent-a"))
    picky = make_breakpoint(payload=WITH_OPTIONS)

    response = decide(
        reviewer_client,
        [
            item(approved.pk, comment="Ship it"),
            item(own.pk),
            item(cancelled.pk),
            item("bp-unknown"),
            item(picky.pk, option="red"),
        ],
    )

    assert statuses(response) == [201, 403, 409, 404, 400]
    results = response.json()["results"]
    assert [r["breakpointId"] for r in results] == [
        approved.pk,
        own.pk,
        cancelled.pk,
        "bp-unknown",
        picky.pk,
    ]
    assert results[0]["breakpoint"] == {"id": approved.pk, "status": "released"}
    assert "error" not in results[0]
    assert [r["error"]["code"] for r in results[1:]] == [
        "permission_denied",
        "invalid_state",
        "not_found",
        "validation_error",
    ]
    assert all(set(r["error"]) == {"code", "message", "details"} for r in results[1:])
    assert results[1]["error"]["details"]["rule"] == "preventSelfReview"
    assert results[2]["error"]["details"]["currentStatus"] == "cancelled"
    assert "option" in results[4]["error"]["details"]
    assert all("breakpoint" not in r for r in results[1:])

    released = Breakpoint.objects.get(pk=approved.pk)
    assert released.status == "released"
    assert released.result["approved"] is True
    assert released.result["respondedBy"] == "alice"
    assert released.result["feedback"] == "Ship it"
    assert Breakpoint.objects.get(pk=own.pk).status == "waiting"
    assert Breakpoint.objects.get(pk=picky.pk).status == "waiting"
    assert Feedback.objects.filter(breakpoint_id=picky.pk).count() == 0


def test_each_refusal_is_recorded_once(reviewer_client, reviewer, make_breakpoint):
    """The permission and state refusals are on the record once each, as feedback_add
    records them (via api); refused input (a bad option) and an unknown id are not."""
    own = make_breakpoint(requested_by="alice", payload=FOUR_EYES)
    cancelled = make_breakpoint()
    breakpoint_cancel(breakpoint_id=cancelled.pk, actor=Actor.for_agent("agent-a"))
    picky = make_breakpoint(payload=WITH_OPTIONS)

    decide(
        reviewer_client,
        [item(own.pk), item(cancelled.pk), item("bp-unknown"), item(picky.pk, option="red")],
    )

    assert Event.objects.filter(type="refused").count() == 2
    (four_eyes,) = refusals(own)
    assert four_eyes.actor == "api:alice"
    assert four_eyes.metadata["via"] == "api"
    assert four_eyes.metadata["reason"] == "permission_denied"
    (late,) = refusals(cancelled)
    assert late.metadata["reason"] == "invalid_state"
    assert refusals(picky) == []


def test_a_rejection_carries_its_comment(reviewer_client, make_breakpoint):
    bp = make_breakpoint()

    response = decide(reviewer_client, [item(bp.pk, approved=False, comment="Not today")])

    assert statuses(response) == [201]
    stored = Breakpoint.objects.get(pk=bp.pk)
    assert (stored.status, stored.result["approved"]) == ("released", False)
    assert stored.result["feedback"] == "Not today"


def test_a_breakpoint_named_twice_is_decided_once(reviewer_client, make_breakpoint):
    bp = make_breakpoint()

    response = decide(reviewer_client, [item(bp.pk), item(bp.pk, approved=False)])

    assert statuses(response) == [201, 409]
    assert Breakpoint.objects.get(pk=bp.pk).result["approved"] is True
    assert Event.objects.filter(breakpoint_id=bp.pk, type="released").count() == 1


def test_path_works_with_a_trailing_slash(reviewer_client, make_breakpoint):
    bp = make_breakpoint()

    assert statuses(decide(reviewer_client, [item(bp.pk)], slash="/")) == [201]


def test_values_with_a_rejection_are_refused_for_that_item_only(reviewer_client, make_breakpoint):
    form = {"question": "Scale?", "form": {"type": "object"}, "proposal": {"replicas": 2}}
    with_form = make_breakpoint(payload=form)
    plain = make_breakpoint()

    response = decide(
        reviewer_client,
        [item(with_form.pk, approved=False, values={"replicas": 3}), item(plain.pk)],
    )

    assert statuses(response) == [400, 201]
    assert Breakpoint.objects.get(pk=with_form.pk).status == "waiting"


def test_a_hundred_items_are_taken(reviewer_client, make_breakpoint):
    """The limit itself: the first decides it, the other 99 are refused as decided."""
    bp = make_breakpoint()

    response = decide(reviewer_client, [item(bp.pk)] * MAX_BATCH_DECISIONS)

    assert statuses(response) == [201] + [409] * (MAX_BATCH_DECISIONS - 1)


def test_more_than_a_hundred_items_are_400_and_nothing_is_decided(reviewer_client, make_breakpoint):
    bp = make_breakpoint()

    response = decide(reviewer_client, [item(bp.pk)] * (MAX_BATCH_DECISIONS + 1))

    assert "items" in assert_error(response, 400)["details"]
    nothing_decided(bp)


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"items": []},
        {"items": "bp-1"},
        {"items": {"breakpointId": "X", "approved": True}},
        {"items": ["X"]},
        {"items": [{"approved": True}]},
        {"items": [{"breakpointId": "X"}]},
        {"items": [{"breakpointId": "X", "approved": "yes"}]},
        {"items": [{"breakpointId": 5, "approved": True}]},
        {"items": [{"breakpointId": "X", "approved": True, "release": False}]},
        {"items": [{"breakpointId": "X", "approved": True, "comment": 7}]},
        {"items": [{"breakpointId": "X", "approved": True, "values": [1]}]},
        {"items": [{"breakpointId": "X", "approved": True}], "comment": "all"},
        [{"breakpointId": "X", "approved": True}],
    ],
    ids=[
        "no items",
        "empty list",
        "items a string",
        "items an object",
        "an item a string",
        "no breakpointId",
        "no approved",
        "approved a string",
        "breakpointId a number",
        "an unknown key",
        "comment a number",
        "values a list",
        "an unknown top-level key",
        "a bare list",
    ],
)
def test_malformed_bodies_are_400_and_nothing_is_decided(reviewer_client, make_breakpoint, body):
    """A malformed item refuses the whole batch (X stands for a waiting breakpoint's id):
    the good items beside it are not decided either."""
    bp = make_breakpoint()
    good = item(bp.pk)

    def fill(value):
        if isinstance(value, dict):
            return {k: bp.pk if v == "X" else fill(v) for k, v in value.items()}
        if isinstance(value, list):
            return [fill(v) for v in value]
        return value

    body = fill(body)
    if isinstance(body, dict) and isinstance(body.get("items"), list) and body["items"]:
        body["items"] = [good, *body["items"]]

    assert_error(reviewer_client.post(URL, body, format="json"), 400)
    nothing_decided(bp)


def test_an_impossible_id_is_not_found(reviewer_client, make_breakpoint):
    bp = make_breakpoint()

    response = decide(reviewer_client, [item("bp-" + "0" * 300), item(bp.pk)])

    assert statuses(response) == [404, 201]


def test_agents_are_403_and_nothing_is_decided(agent_client, make_breakpoint):
    bp = make_breakpoint()

    assert_error(decide(agent_client, [item(bp.pk)]), 403, "permission_denied")
    nothing_decided(bp)


def test_a_person_without_a_role_is_403_recorded_on_each_breakpoint_once(
    nobody_client, make_breakpoint
):
    """The service refuses the whole batch to a person who is not a reviewer, and records
    the refusal on each breakpoint named (once, however often it is named), as a single
    decision records it."""
    first, second = make_breakpoint(), make_breakpoint()

    response = decide(nobody_client, [item(first.pk), item(second.pk), item(first.pk)])

    assert_error(response, 403, "permission_denied")
    assert Breakpoint.objects.filter(status="waiting").count() == 2
    assert not Feedback.objects.exists()
    assert [len(refusals(bp)) for bp in (first, second)] == [1, 1]
    assert refusals(first)[0].actor == "api:nobody"


def test_unauthenticated_is_401(client, make_breakpoint):
    bp = make_breakpoint()

    response = client.post(URL, {"items": [item(bp.pk)]}, content_type="application/json")

    assert_error(response, 401, "not_authenticated")
