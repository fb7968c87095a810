"""Services: allowed transitions, audit events in the same transaction, TTL expiry and the sweep."""

from datetime import timedelta

import pytest
from django.utils import timezone

from audit.models import Event
from breakpoints.models import Breakpoint, Feedback
from breakpoints.services import (
    TTL_ACTOR,
    breakpoint_cancel,
    breakpoint_create,
    breakpoint_expire,
    breakpoints_expire_due,
    feedback_add,
    transitions,
)
from core.actors import Actor
from core.choices import ALLOWED_TRANSITIONS, FINAL_STATUSES, Status
from core.exceptions import Forbidden, InvalidInput, InvalidState, NotFound
from tests.support.factories import UserFactory
from tests.support.receipts import unsealed

AGENT = Actor.for_agent("agent-a")


def events(bp) -> list[tuple[str, str]]:
    return list(Event.objects.filter(breakpoint_id=bp.pk).values_list("type", "actor"))


def move_to(final: str, bp, *, reviewer, admin) -> None:
    if final == Status.RELEASED:
        feedback_add(
            breakpoint_id=bp.pk, actor=Actor.for_user(reviewer), comment="ok", release=True
        )
    elif final == Status.CANCELLED:
        breakpoint_cancel(breakpoint_id=bp.pk, actor=AGENT)
    else:
        breakpoint_expire(breakpoint_id=bp.pk, actor=Actor.for_user(admin))


def make_overdue(bp) -> None:
    Breakpoint.objects.filter(pk=bp.pk).update(expires_at=timezone.now() - timedelta(seconds=1))


# --- the transition map ------------------------------------------------------------------------


def test_only_waiting_has_outgoing_transitions():
    assert ALLOWED_TRANSITIONS[Status.WAITING] == {
        Status.RELEASED,
        Status.EXPIRED,
        Status.CANCELLED,
    }
    for final in FINAL_STATUSES:
        assert ALLOWED_TRANSITIONS[final] == frozenset()


@pytest.mark.parametrize("final", [Status.RELEASED, Status.CANCELLED, Status.EXPIRED])
@pytest.mark.parametrize("attempt", [Status.RELEASED, Status.CANCELLED, Status.EXPIRED])
def test_nothing_leaves_a_final_state(make_breakpoint, reviewer, admin_user, final, attempt):
    bp = make_breakpoint()
    move_to(final, bp, reviewer=reviewer, admin=admin_user)
    before = Breakpoint.objects.get(pk=bp.pk)
    event_count = Event.objects.exclude(type="refused").count()

    if attempt == Status.CANCELLED and final == Status.CANCELLED:
        assert breakpoint_cancel(breakpoint_id=bp.pk, actor=AGENT).status == Status.CANCELLED
    else:
        with pytest.raises(InvalidState) as caught:
            move_to(attempt, bp, reviewer=reviewer, admin=admin_user)
        assert caught.value.current_status == final
        assert caught.value.details["currentStatus"] == final

    after = Breakpoint.objects.get(pk=bp.pk)
    assert after.status == final
    assert after.result == before.result
    assert after.updated_at == before.updated_at
    assert Event.objects.exclude(type="refused").count() == event_count
    # A person's refused attempt is on the record (the reviewer's release, the admin's
    # expiry); the agent's cancel is answered, not recorded.
    refused = [(e.actor, e.metadata["reason"]) for e in Event.objects.filter(type="refused")]
    person = {Status.RELEASED: "api:alice", Status.EXPIRED: "api:root-admin"}.get(attempt)
    if attempt == Status.CANCELLED and final == Status.CANCELLED:
        person = None
    assert refused == ([(person, "invalid_state")] if person else [])


def test_release_sets_status_timestamp_result_and_events(make_breakpoint, reviewer):
    bp = make_breakpoint()

    feedback, moved = feedback_add(
        breakpoint_id=bp.pk, actor=Actor.for_user(reviewer), comment="Go", release=True
    )

    stored = Breakpoint.objects.get(pk=bp.pk)
    assert moved.status == stored.status == Status.RELEASED
    assert stored.released_at is not None
    assert stored.expired_at is None and stored.cancelled_at is None
    assert stored.result["respondedBy"] == "alice"
    assert feedback.releases is True
    assert events(bp) == [
        ("created", "agent:agent-a"),
        ("feedback", "alice"),
        ("released", "alice"),
    ]
    released = Event.objects.get(breakpoint_id=bp.pk, type="released")
    assert released.metadata["statusFrom"] == "waiting"
    assert released.metadata["statusTo"] == "released"
    assert released.metadata["approved"] is True


def test_cancel_by_admin_records_the_admin_as_actor(make_breakpoint, admin_user):
    bp = make_breakpoint()

    breakpoint_cancel(breakpoint_id=bp.pk, actor=Actor.for_user(admin_user), reason="dup")

    stored = Breakpoint.objects.get(pk=bp.pk)
    assert stored.status == Status.CANCELLED
    assert unsealed(stored.result, via="api") == {
        "approved": False,
        "feedback": "dup",
        "respondedBy": "root-admin",
    }
    assert events(bp)[-1] == ("cancelled", "root-admin")


def test_admin_expire_records_the_admin_as_actor(make_breakpoint, admin_user):
    bp = make_breakpoint()

    breakpoint_expire(breakpoint_id=bp.pk, actor=Actor.for_user(admin_user))

    stored = Breakpoint.objects.get(pk=bp.pk)
    assert stored.status == Status.EXPIRED
    assert stored.expired_at is not None
    assert stored.result["approved"] is False
    assert stored.result["feedback"] == "Expired by root-admin."
    assert events(bp)[-1] == ("expired", "root-admin")


# --- who may call which service -----------------------------------------------------------------


def test_only_agents_create(reviewer):
    with pytest.raises(Forbidden):
        breakpoint_create(actor=Actor.for_user(reviewer), payload={})
    assert Breakpoint.objects.count() == 0


def test_agent_cannot_create_for_another_agent(db):
    with pytest.raises(Forbidden):
        breakpoint_create(actor=AGENT, agent_id="agent-b", payload={})
    assert Breakpoint.objects.count() == 0


def test_agents_and_plain_users_cannot_give_feedback(make_breakpoint):
    bp = make_breakpoint()
    plain = UserFactory(username="plain")

    for actor in (AGENT, Actor.for_user(plain), Actor.system("ttl")):
        with pytest.raises(Forbidden):
            feedback_add(breakpoint_id=bp.pk, actor=actor, comment="x", release=True)
    assert Feedback.objects.count() == 0
    assert Breakpoint.objects.get(pk=bp.pk).status == Status.WAITING


def test_reviewers_cannot_cancel_or_expire(make_breakpoint, reviewer):
    bp = make_breakpoint()

    with pytest.raises(Forbidden):
        breakpoint_cancel(breakpoint_id=bp.pk, actor=Actor.for_user(reviewer))
    with pytest.raises(Forbidden):
        breakpoint_expire(breakpoint_id=bp.pk, actor=Actor.for_user(reviewer))
    assert Breakpoint.objects.get(pk=bp.pk).status == Status.WAITING


def test_agents_cannot_expire(make_breakpoint):
    bp = make_breakpoint()

    with pytest.raises(Forbidden):
        breakpoint_expire(breakpoint_id=bp.pk, actor=AGENT)
    assert Breakpoint.objects.get(pk=bp.pk).status == Status.WAITING


def test_another_agent_cannot_cancel_and_is_told_not_found(make_breakpoint):
    bp = make_breakpoint(agent_id="agent-a")

    with pytest.raises(NotFound):
        breakpoint_cancel(breakpoint_id=bp.pk, actor=Actor.for_agent("agent-b"))
    assert Breakpoint.objects.get(pk=bp.pk).status == Status.WAITING


def test_system_actor_may_expire(make_breakpoint):
    bp = make_breakpoint()

    assert breakpoint_expire(breakpoint_id=bp.pk, actor=TTL_ACTOR).status == Status.EXPIRED
    assert events(bp)[-1] == ("expired", "system:ttl")


# --- the audit event is written in the same transaction -------------------------------------------


def _fail_on(monkeypatch, event_type: str) -> None:
    """Make the audit write of `event_type` fail, to prove the change rolls back with it."""
    real = transitions.events_write

    def failing(events):
        if any(event.type == event_type for event in events):
            raise RuntimeError("audit store unavailable")
        return real(events)

    monkeypatch.setattr(transitions, "events_write", failing)


def test_create_rolls_back_when_its_event_cannot_be_written(db, monkeypatch):
    _fail_on(monkeypatch, "created")

    with pytest.raises(RuntimeError):
        breakpoint_create(actor=AGENT, payload={"title": "x"})

    assert Breakpoint.objects.count() == 0


def test_release_rolls_back_feedback_and_status_when_its_event_fails(
    make_breakpoint, reviewer, monkeypatch
):
    bp = make_breakpoint()
    _fail_on(monkeypatch, "released")

    with pytest.raises(RuntimeError):
        feedback_add(breakpoint_id=bp.pk, actor=Actor.for_user(reviewer), comment="x", release=True)

    stored = Breakpoint.objects.get(pk=bp.pk)
    assert stored.status == Status.WAITING
    assert stored.result is None and stored.released_at is None
    assert Feedback.objects.count() == 0
    assert events(bp) == [("created", "agent:agent-a")]


def test_cancel_rolls_back_when_its_event_fails(make_breakpoint, monkeypatch):
    bp = make_breakpoint()
    _fail_on(monkeypatch, "cancelled")

    with pytest.raises(RuntimeError):
        breakpoint_cancel(breakpoint_id=bp.pk, actor=AGENT)

    assert Breakpoint.objects.get(pk=bp.pk).status == Status.WAITING
    assert events(bp) == [("created", "agent:agent-a")]


def test_feedback_validation_error_writes_nothing(make_breakpoint, reviewer):
    bp = make_breakpoint(payload={"title": "t", "options": ["a", "b"]})

    with pytest.raises(InvalidInput):
        feedback_add(
            breakpoint_id=bp.pk,
            actor=Actor.for_user(reviewer),
            comment="x",
            option="c",
            release=True,
        )

    assert Feedback.objects.count() == 0
    assert events(bp) == [("created", "agent:agent-a")]


# --- TTL: expired on read -----------------------------------------------------------------------


def test_ttl_sets_expires_at_from_creation(make_breakpoint):
    bp = make_breakpoint(ttl_seconds=60)

    assert bp.ttl_seconds == 60
    assert abs((bp.expires_at - bp.created_at) - timedelta(seconds=60)) < timedelta(seconds=2)


def test_overdue_breakpoint_reads_as_expired_on_detail(agent_client, make_breakpoint):
    bp = make_breakpoint(ttl_seconds=60)
    make_overdue(bp)

    body = agent_client.get(f"/api/breakpoints/{bp.pk}").json()

    assert body["status"] == "expired"
    assert body["expiredAt"] is not None
    assert body["result"]["approved"] is False
    assert body["result"]["feedback"] == "Expired: no decision within 60 seconds."
    assert body["result"]["respondedBy"] == "system:ttl"
    assert Breakpoint.objects.get(pk=bp.pk).status == Status.EXPIRED
    assert events(bp)[-1] == ("expired", "system:ttl")


def test_overdue_breakpoint_reads_as_expired_on_status_poll(agent_client, make_breakpoint):
    bp = make_breakpoint(ttl_seconds=60)
    make_overdue(bp)

    body = agent_client.get(f"/api/breakpoints/{bp.pk}/status").json()

    assert body["status"] == "expired"
    assert body["result"]["approved"] is False
    assert "60 seconds" in body["result"]["feedback"]
    assert Breakpoint.objects.get(pk=bp.pk).status == Status.EXPIRED


def test_repeated_reads_of_an_overdue_breakpoint_expire_it_once(agent_client, make_breakpoint):
    bp = make_breakpoint(ttl_seconds=60)
    make_overdue(bp)

    for suffix in ("", "/status", "", "/status"):
        assert agent_client.get(f"/api/breakpoints/{bp.pk}{suffix}").json()["status"] == "expired"

    assert Event.objects.filter(breakpoint_id=bp.pk, type="expired").count() == 1


def test_breakpoint_not_yet_due_stays_waiting_on_read(agent_client, make_breakpoint):
    bp = make_breakpoint(ttl_seconds=3600)

    assert agent_client.get(f"/api/breakpoints/{bp.pk}/status").json()["status"] == "waiting"
    assert not Event.objects.filter(type="expired").exists()


def test_another_agent_reading_an_overdue_breakpoint_gets_404_and_changes_nothing(
    other_agent_client, make_breakpoint
):
    bp = make_breakpoint(agent_id="agent-a", ttl_seconds=60)
    make_overdue(bp)

    assert other_agent_client.get(f"/api/breakpoints/{bp.pk}/status").status_code == 404
    assert Breakpoint.objects.get(pk=bp.pk).status == Status.WAITING


# --- TTL: the sweep -------------------------------------------------------------------------------


def test_sweep_expires_each_due_breakpoint_once_with_one_event(make_breakpoint, reviewer):
    due = [make_breakpoint(ttl_seconds=60) for _ in range(3)]
    for bp in due:
        make_overdue(bp)
    not_due = make_breakpoint(ttl_seconds=3600)
    no_ttl = make_breakpoint()
    released = make_breakpoint(ttl_seconds=60)
    feedback_add(
        breakpoint_id=released.pk, actor=Actor.for_user(reviewer), comment="ok", release=True
    )
    make_overdue(released)

    assert breakpoints_expire_due() == 3
    assert breakpoints_expire_due() == 0

    for bp in due:
        stored = Breakpoint.objects.get(pk=bp.pk)
        assert stored.status == Status.EXPIRED
        assert stored.result["feedback"] == "Expired: no decision within 60 seconds."
        expired_events = Event.objects.filter(breakpoint_id=bp.pk, type="expired")
        assert list(expired_events.values_list("actor", flat=True)) == ["system:ttl"]
    assert Breakpoint.objects.get(pk=not_due.pk).status == Status.WAITING
    assert Breakpoint.objects.get(pk=no_ttl.pk).status == Status.WAITING
    assert Breakpoint.objects.get(pk=released.pk).status == Status.RELEASED
    assert Event.objects.filter(type="expired").count() == 3


def test_sweep_works_through_more_than_one_batch(make_breakpoint):
    due = [make_breakpoint(ttl_seconds=60) for _ in range(5)]
    for bp in due:
        make_overdue(bp)

    assert breakpoints_expire_due(batch_size=2) == 5
    assert Breakpoint.objects.filter(status=Status.EXPIRED).count() == 5
    assert Event.objects.filter(type="expired").count() == 5


def test_sweep_uses_the_given_now(make_breakpoint):
    bp = make_breakpoint(ttl_seconds=60)

    assert breakpoints_expire_due(now=timezone.now()) == 0
    assert breakpoints_expire_due(now=timezone.now() + timedelta(seconds=61)) == 1
    assert Breakpoint.objects.get(pk=bp.pk).status == Status.EXPIRED


def test_swept_breakpoint_cannot_be_released_afterwards(make_breakpoint, reviewer):
    bp = make_breakpoint(ttl_seconds=60)
    make_overdue(bp)
    breakpoints_expire_due()

    with pytest.raises(InvalidState) as caught:
        feedback_add(breakpoint_id=bp.pk, actor=Actor.for_user(reviewer), comment="x", release=True)

    assert caught.value.current_status == Status.EXPIRED
