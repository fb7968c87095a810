"""POST /api/breakpoints/{id}/feedback: comments, release, options and who may give them."""

import pytest

from audit.models import Event
from breakpoints.models import Breakpoint, Feedback
from breakpoints.services import breakpoint_cancel, breakpoint_expire
from core.actors import Actor
from tests.support.api import assert_error


def url(bp_id: str, slash: str = "") -> str:
    return f"/api/breakpoints/{bp_id}/feedback{slash}"


def give(client, bp_id, body, slash=""):
    return client.post(url(bp_id, slash), body, format="json")


# --- comments ----------------------------------------------------------------------------


def test_reviewer_comment_is_201_and_keeps_the_breakpoint_waiting(reviewer_client, make_breakpoint):
    bp = make_breakpoint()

    response = give(reviewer_client, bp.pk, {"comment": "Please add tests"})

    assert response.status_code == 201
    body = response.json()
    assert body["status"] == "waiting"
    assert body["result"] is None
    assert body["feedback"]["author"] == "alice"
    assert body["feedback"]["comment"] == "Please add tests"
    assert body["feedback"]["id"]
    assert body["feedback"]["createdAt"]
    assert Breakpoint.objects.get(pk=bp.pk).status == "waiting"
    stored = Feedback.objects.get(breakpoint_id=bp.pk)
    assert (stored.comment, stored.releases, stored.approved) == ("Please add tests", False, None)
    assert list(Event.objects.filter(breakpoint_id=bp.pk).values_list("type", "actor")) == [
        ("created", "agent:agent-a"),
        ("feedback", "alice"),
    ]


def test_feedback_path_works_with_a_trailing_slash(reviewer_client, make_breakpoint):
    bp = make_breakpoint()

    assert give(reviewer_client, bp.pk, {"comment": "ok"}, slash="/").status_code == 201


def test_comment_shows_up_in_the_agents_view(reviewer_client, agent_client, make_breakpoint):
    bp = make_breakpoint()
    give(reviewer_client, bp.pk, {"comment": "One"})
    give(reviewer_client, bp.pk, {"comment": "Two"})

    body = agent_client.get(f"/api/breakpoints/{bp.pk}").json()

    assert [f["comment"] for f in body["feedback"]] == ["One", "Two"]


@pytest.mark.parametrize("comment", ["", "   "])
def test_empty_comment_without_release_is_400_and_writes_nothing(
    reviewer_client, make_breakpoint, comment
):
    bp = make_breakpoint()

    error = assert_error(
        give(reviewer_client, bp.pk, {"comment": comment}), 400, "validation_error"
    )

    assert "comment" in error["details"]
    assert Feedback.objects.count() == 0
    assert Event.objects.filter(type="feedback").count() == 0


def test_missing_comment_without_release_is_400(reviewer_client, make_breakpoint):
    bp = make_breakpoint()

    assert_error(give(reviewer_client, bp.pk, {}), 400, "validation_error")
    assert Feedback.objects.count() == 0


@pytest.mark.parametrize(
    "body",
    [{"comment": 5}, {"comment": "x", "release": "yes"}, {"comment": "x", "approved": 1}],
    ids=["comment number", "release string", "approved int"],
)
def test_mistyped_fields_are_400(reviewer_client, make_breakpoint, body):
    bp = make_breakpoint()

    assert_error(give(reviewer_client, bp.pk, body), 400, "validation_error")
    assert Feedback.objects.count() == 0


# --- release -------------------------------------------------------------------------------


def test_release_with_comment_sets_the_full_result(reviewer_client, agent_client, make_breakpoint):
    bp = make_breakpoint()

    response = give(reviewer_client, bp.pk, {"comment": "Ship it", "release": True})

    assert response.status_code == 201
    body = response.json()
    assert body["status"] == "released"
    assert body["result"]["approved"] is True
    assert body["result"]["response"] == "Ship it"
    assert body["result"]["feedback"] == "Ship it"
    assert body["result"]["respondedBy"] == "alice"
    assert body["result"]["allResponses"][0]["respondedBy"] == "alice"
    assert "option" not in body["result"]
    stored = Breakpoint.objects.get(pk=bp.pk)
    assert stored.status == "released"
    assert stored.released_at is not None
    assert agent_client.get(f"/api/breakpoints/{bp.pk}/status").json()["result"] == body["result"]


def test_release_writes_feedback_and_released_events(reviewer_client, make_breakpoint):
    bp = make_breakpoint()

    give(reviewer_client, bp.pk, {"comment": "Fine", "release": True})

    events = list(Event.objects.filter(breakpoint_id=bp.pk).values_list("type", "actor"))
    assert events == [("created", "agent:agent-a"), ("feedback", "alice"), ("released", "alice")]
    feedback = Feedback.objects.get(breakpoint_id=bp.pk)
    assert (feedback.releases, feedback.approved) == (True, True)


def test_release_with_empty_comment_is_allowed(reviewer_client, make_breakpoint):
    bp = make_breakpoint()

    response = give(reviewer_client, bp.pk, {"comment": "", "release": True})

    assert response.status_code == 201
    assert response.json()["status"] == "released"


def test_release_without_comment_field_is_allowed(reviewer_client, make_breakpoint):
    bp = make_breakpoint()

    assert give(reviewer_client, bp.pk, {"release": True}).json()["status"] == "released"


def test_release_with_approved_false_is_a_rejection(reviewer_client, make_breakpoint):
    bp = make_breakpoint()

    body = give(
        reviewer_client, bp.pk, {"comment": "No", "release": True, "approved": False}
    ).json()

    assert body["status"] == "released"
    assert body["result"]["approved"] is False
    assert body["result"]["allResponses"][0]["approved"] is False
    assert Feedback.objects.get(breakpoint_id=bp.pk).approved is False


def test_release_of_a_released_breakpoint_is_409_with_current_status(
    reviewer_client, make_breakpoint
):
    bp = make_breakpoint()
    give(reviewer_client, bp.pk, {"comment": "first", "release": True})

    error = assert_error(
        give(reviewer_client, bp.pk, {"comment": "second", "release": True}), 409, "invalid_state"
    )

    assert error["details"]["currentStatus"] == "released"
    assert Feedback.objects.filter(breakpoint_id=bp.pk).count() == 1
    assert Event.objects.filter(breakpoint_id=bp.pk, type="released").count() == 1
    assert Breakpoint.objects.get(pk=bp.pk).result["feedback"] == "first"


@pytest.mark.parametrize("final", ["cancelled", "expired"])
def test_release_of_a_finished_breakpoint_is_409(
    reviewer_client, admin_user, make_breakpoint, final
):
    bp = make_breakpoint()
    if final == "cancelled":
        breakpoint_cancel(breakpoint_id=bp.pk, actor=Actor.for_agent("agent-a"))
    else:
        breakpoint_expire(breakpoint_id=bp.pk, actor=Actor.for_user(admin_user))

    error = assert_error(
        give(reviewer_client, bp.pk, {"comment": "late", "release": True}), 409, "invalid_state"
    )

    assert error["details"]["currentStatus"] == final
    assert Breakpoint.objects.get(pk=bp.pk).status == final
    assert Feedback.objects.count() == 0


def test_admin_can_release(admin_client, make_breakpoint):
    bp = make_breakpoint()

    body = give(admin_client, bp.pk, {"comment": "ok", "release": True}).json()

    assert body["status"] == "released"
    assert body["result"]["respondedBy"] == "root-admin"


# --- options ---------------------------------------------------------------------------------


def test_release_with_an_option_from_payload_options(reviewer_client, make_breakpoint):
    bp = make_breakpoint(payload={"title": "Pick", "options": ["ship", "hold"]})

    body = give(reviewer_client, bp.pk, {"comment": "go", "release": True, "option": "hold"}).json()

    assert body["result"]["option"] == "hold"
    assert body["result"]["allResponses"][0]["option"] == "hold"
    assert Feedback.objects.get(breakpoint_id=bp.pk).option == "hold"


def test_option_not_in_payload_options_is_400_and_writes_nothing(reviewer_client, make_breakpoint):
    bp = make_breakpoint(payload={"title": "Pick", "options": ["ship", "hold"]})

    error = assert_error(
        give(reviewer_client, bp.pk, {"comment": "go", "release": True, "option": "burn"}),
        400,
        "validation_error",
    )

    assert "option" in error["details"]
    assert Breakpoint.objects.get(pk=bp.pk).status == "waiting"
    assert Feedback.objects.count() == 0
    assert Event.objects.filter(breakpoint_id=bp.pk).count() == 1


def test_option_is_free_when_payload_has_no_options(reviewer_client, make_breakpoint):
    bp = make_breakpoint()

    body = give(
        reviewer_client, bp.pk, {"comment": "go", "release": True, "option": "anything"}
    ).json()

    assert body["result"]["option"] == "anything"


# --- options that carry their verdict (issue 9, defect 12) ------------------------------------

VERDICT_OPTIONS = [{"label": "Deploy", "approved": True}, {"label": "Hold", "approved": False}]


def test_an_option_with_approved_false_releases_with_approved_false(
    reviewer_client, make_breakpoint
):
    bp = make_breakpoint(payload={"title": "Pick", "options": VERDICT_OPTIONS})

    body = give(reviewer_client, bp.pk, {"comment": "", "release": True, "option": "Hold"}).json()

    assert body["status"] == "released"
    assert (body["result"]["approved"], body["result"]["option"]) == (False, "Hold")
    assert body["result"]["allResponses"][0]["approved"] is False
    stored = Feedback.objects.get(breakpoint_id=bp.pk)
    assert (stored.approved, stored.option) == (False, "Hold")
    released = Event.objects.get(breakpoint_id=bp.pk, type="released")
    assert released.metadata["approved"] is False


def test_an_option_with_approved_true_releases_approved_and_agreeing_approved_is_fine(
    reviewer_client, make_breakpoint
):
    bp = make_breakpoint(payload={"title": "Pick", "options": VERDICT_OPTIONS})
    body = give(
        reviewer_client,
        bp.pk,
        {"comment": "", "release": True, "option": "Hold", "approved": False},
    ).json()
    assert body["result"]["approved"] is False

    bp = make_breakpoint(payload={"title": "Pick", "options": VERDICT_OPTIONS})
    body = give(reviewer_client, bp.pk, {"release": True, "option": "Deploy"}).json()
    assert body["result"]["approved"] is True


@pytest.mark.parametrize(("option", "approved"), [("Hold", True), ("Deploy", False)])
def test_approved_contradicting_the_options_verdict_is_400_and_writes_nothing(
    reviewer_client, make_breakpoint, option, approved
):
    bp = make_breakpoint(payload={"title": "Pick", "options": VERDICT_OPTIONS})

    error = assert_error(
        give(
            reviewer_client,
            bp.pk,
            {"comment": "x", "release": True, "option": option, "approved": approved},
        ),
        400,
        "validation_error",
    )

    assert {"approved", "option"} <= set(error["details"])
    assert "approved" in error["message"] and f"option “{option}”" in error["message"]
    assert Breakpoint.objects.get(pk=bp.pk).status == "waiting"
    assert Feedback.objects.count() == 0
    assert Event.objects.filter(breakpoint_id=bp.pk).count() == 1


@pytest.mark.parametrize(
    ("body", "approved"),
    [
        ({"option": "hold"}, True),  # approve stays the default
        ({"option": "hold", "approved": False}, False),
        ({"option": "ship", "approved": True}, True),
    ],
)
def test_a_string_option_leaves_approved_to_the_reviewer(
    reviewer_client, make_breakpoint, body, approved
):
    bp = make_breakpoint(payload={"title": "Pick", "options": ["ship", "hold"]})

    result = give(reviewer_client, bp.pk, {"release": True, **body}).json()["result"]

    assert (result["approved"], result["option"]) == (approved, body["option"])


def test_approved_null_is_refused(reviewer_client, make_breakpoint):
    bp = make_breakpoint()

    error = assert_error(
        give(reviewer_client, bp.pk, {"release": True, "approved": None}), 400, "validation_error"
    )

    assert "approved" in error["details"]
    assert Breakpoint.objects.get(pk=bp.pk).status == "waiting"


# --- who may give feedback ---------------------------------------------------------------------


def test_agent_cannot_give_feedback_on_its_own_breakpoint(agent_client, make_breakpoint):
    bp = make_breakpoint()

    assert_error(
        give(agent_client, bp.pk, {"comment": "self", "release": True}), 403, "permission_denied"
    )
    assert Breakpoint.objects.get(pk=bp.pk).status == "waiting"
    assert Feedback.objects.count() == 0


def test_user_without_role_cannot_give_feedback(nobody_client, make_breakpoint):
    bp = make_breakpoint()

    assert_error(give(nobody_client, bp.pk, {"comment": "hi"}), 403, "permission_denied")
    assert Feedback.objects.count() == 0


def test_feedback_without_credentials_is_401(client, make_breakpoint):
    bp = make_breakpoint()

    response = client.post(url(bp.pk), {"comment": "hi"}, content_type="application/json")

    assert_error(response, 401, "not_authenticated")


def test_feedback_on_an_unknown_breakpoint_is_404(reviewer_client):
    assert_error(give(reviewer_client, "bp_nope", {"comment": "hi"}), 404, "not_found")
    assert Feedback.objects.count() == 0
