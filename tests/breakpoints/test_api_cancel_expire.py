"""POST /cancel (its agent or an admin) and POST /expire (admins): results and refusals."""

import pytest

from audit.models import Event
from breakpoints.models import Breakpoint
from breakpoints.services import breakpoint_cancel, breakpoint_expire, feedback_add
from core.actors import Actor
from tests.support.api import assert_error


def cancel(client, bp_id, body=None, slash=""):
    return client.post(f"/api/breakpoints/{bp_id}/cancel{slash}", body or {}, format="json")


def expire(client, bp_id, slash=""):
    return client.post(f"/api/breakpoints/{bp_id}/expire{slash}", format="json")


def release(bp, reviewer):
    feedback_add(breakpoint_id=bp.pk, actor=Actor.for_user(reviewer), comment="ok", release=True)


# --- cancel ---------------------------------------------------------------------------------


def test_agent_cancels_its_waiting_breakpoint(agent_client, make_breakpoint):
    bp = make_breakpoint()

    response = cancel(agent_client, bp.pk, {"reason": "Plan changed"})

    assert response.status_code == 200
    assert response.json() == {"status": "cancelled"}
    stored = Breakpoint.objects.get(pk=bp.pk)
    assert stored.status == "cancelled"
    assert stored.cancelled_at is not None
    assert stored.result["approved"] is False
    assert stored.result["feedback"] == "Plan changed"
    event = Event.objects.get(breakpoint_id=bp.pk, type="cancelled")
    assert event.actor == "agent:agent-a"
    assert event.metadata["statusFrom"] == "waiting"
    assert event.metadata["reason"] == "Plan changed"


def test_cancel_without_reason_says_who_cancelled(agent_client, make_breakpoint):
    bp = make_breakpoint()

    cancel(agent_client, bp.pk, slash="/")

    body = agent_client.get(f"/api/breakpoints/{bp.pk}").json()
    assert body["status"] == "cancelled"
    assert body["cancelledAt"] is not None
    assert body["result"]["approved"] is False
    assert body["result"]["feedback"] == "Cancelled by agent:agent-a."


def test_cancelling_twice_answers_200_and_records_one_event(agent_client, make_breakpoint):
    bp = make_breakpoint()
    cancel(agent_client, bp.pk)
    first_cancelled_at = Breakpoint.objects.get(pk=bp.pk).cancelled_at

    again = cancel(agent_client, bp.pk)

    assert again.status_code == 200
    assert again.json() == {"status": "cancelled"}
    assert Event.objects.filter(breakpoint_id=bp.pk, type="cancelled").count() == 1
    assert Breakpoint.objects.get(pk=bp.pk).cancelled_at == first_cancelled_at


def test_cancelling_a_released_breakpoint_is_409_with_current_status(
    agent_client, reviewer, make_breakpoint
):
    bp = make_breakpoint()
    release(bp, reviewer)

    error = assert_error(cancel(agent_client, bp.pk), 409, "invalid_state")

    assert error["details"]["currentStatus"] == "released"
    assert Breakpoint.objects.get(pk=bp.pk).status == "released"
    assert not Event.objects.filter(breakpoint_id=bp.pk, type="cancelled").exists()


def test_cancelling_an_expired_breakpoint_is_409(agent_client, admin_user, make_breakpoint):
    bp = make_breakpoint()
    breakpoint_expire(breakpoint_id=bp.pk, actor=Actor.for_user(admin_user))

    error = assert_error(cancel(agent_client, bp.pk), 409, "invalid_state")

    assert error["details"]["currentStatus"] == "expired"


def test_agent_b_cannot_cancel_agent_a_breakpoint(other_agent_client, make_breakpoint):
    bp = make_breakpoint(agent_id="agent-a")

    assert_error(cancel(other_agent_client, bp.pk), 404, "not_found")
    assert Breakpoint.objects.get(pk=bp.pk).status == "waiting"


def test_reviewer_cannot_cancel(reviewer_client, make_breakpoint):
    bp = make_breakpoint()

    assert_error(cancel(reviewer_client, bp.pk), 403, "permission_denied")
    assert Breakpoint.objects.get(pk=bp.pk).status == "waiting"


def test_user_without_role_cannot_cancel(nobody_client, make_breakpoint):
    bp = make_breakpoint()

    assert_error(cancel(nobody_client, bp.pk), 403, "permission_denied")
    assert Breakpoint.objects.get(pk=bp.pk).status == "waiting"


def test_admin_can_cancel_any_agents_breakpoint(admin_client, make_breakpoint):
    bp = make_breakpoint(agent_id="agent-z")

    response = cancel(admin_client, bp.pk, {"reason": "Stale"})

    assert response.json() == {"status": "cancelled"}
    assert Event.objects.get(breakpoint_id=bp.pk, type="cancelled").actor == "root-admin"


def test_cancel_unknown_breakpoint_is_404(agent_client):
    assert_error(cancel(agent_client, "bp_nope"), 404, "not_found")


def test_cancel_with_a_non_string_reason_is_400(agent_client, make_breakpoint):
    bp = make_breakpoint()

    assert_error(cancel(agent_client, bp.pk, {"reason": 42}), 400, "validation_error")
    assert Breakpoint.objects.get(pk=bp.pk).status == "waiting"


# --- expire ---------------------------------------------------------------------------------


def test_admin_expires_a_waiting_breakpoint(admin_client, agent_client, make_breakpoint):
    bp = make_breakpoint()

    response = expire(admin_client, bp.pk)

    assert response.status_code == 200
    assert response.json() == {"status": "expired"}
    body = agent_client.get(f"/api/breakpoints/{bp.pk}").json()
    assert body["status"] == "expired"
    assert body["expiredAt"] is not None
    assert body["result"]["approved"] is False
    assert body["result"]["feedback"] == "Expired by root-admin."
    event = Event.objects.get(breakpoint_id=bp.pk, type="expired")
    assert event.actor == "root-admin"


def test_expire_works_with_a_trailing_slash(admin_client, make_breakpoint):
    bp = make_breakpoint()

    assert expire(admin_client, bp.pk, slash="/").json() == {"status": "expired"}


@pytest.mark.parametrize("final", ["released", "cancelled", "expired"])
def test_expiring_a_finished_breakpoint_is_409(
    admin_client, admin_user, reviewer, make_breakpoint, final
):
    bp = make_breakpoint()
    if final == "released":
        release(bp, reviewer)
    elif final == "cancelled":
        breakpoint_cancel(breakpoint_id=bp.pk, actor=Actor.for_agent("agent-a"))
    else:
        breakpoint_expire(breakpoint_id=bp.pk, actor=Actor.for_user(admin_user))

    error = assert_error(expire(admin_client, bp.pk), 409, "invalid_state")

    assert error["details"]["currentStatus"] == final
    assert Event.objects.filter(breakpoint_id=bp.pk, type="expired").count() == (
        1 if final == "expired" else 0
    )


def test_agent_cannot_expire_even_its_own_breakpoint(agent_client, make_breakpoint):
    bp = make_breakpoint()

    assert_error(expire(agent_client, bp.pk), 403, "permission_denied")
    assert Breakpoint.objects.get(pk=bp.pk).status == "waiting"


def test_reviewer_cannot_expire(reviewer_client, make_breakpoint):
    bp = make_breakpoint()

    assert_error(expire(reviewer_client, bp.pk), 403, "permission_denied")
    assert Breakpoint.objects.get(pk=bp.pk).status == "waiting"


def test_user_without_role_cannot_expire(nobody_client, make_breakpoint):
    bp = make_breakpoint()

    assert_error(expire(nobody_client, bp.pk), 403, "permission_denied")


def test_expire_unknown_breakpoint_is_404(admin_client):
    assert_error(expire(admin_client, "bp_nope"), 404, "not_found")


def test_expire_without_credentials_is_401(client, make_breakpoint):
    bp = make_breakpoint()

    response = client.post(f"/api/breakpoints/{bp.pk}/expire")

    assert_error(response, 401, "not_authenticated")
    assert Breakpoint.objects.get(pk=bp.pk).status == "waiting"
