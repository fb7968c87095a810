"""TTL (expire on read, the sweep, overlapping sweeps) and retention (purge)."""

import sys
import threading
import time
from datetime import datetime, timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection, connections
from django.utils import timezone

from audit.models import Event
from breakpoints import tasks, webhooks
from breakpoints.actors import Actor
from breakpoints.models import Breakpoint, Webhook, WebhookDelivery
from breakpoints.services import (
    breakpoint_cancel,
    breakpoint_create,
    breakpoint_expire,
    breakpoint_expire_if_due,
    breakpoints_expire_due,
    breakpoints_purge,
    feedback_add,
)
from reviews.models import Feedback


def parse_time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def expired_events(bp_id: str) -> list[Event]:
    return list(Event.objects.filter(breakpoint_id=bp_id, type="expired"))


def run(*args) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def backdate_expiry(*bp_ids: str, seconds: float = 1) -> None:
    Breakpoint.objects.filter(pk__in=bp_ids).update(
        expires_at=timezone.now() - timedelta(seconds=seconds)
    )


# --- TTL through the API ---------------------------------------------------------------


def test_ttl_of_2_seconds_reads_expired_through_the_api_right_after_expiry(agent_client):
    created = agent_client.post(
        "/api/breakpoints",
        {"payload": {"question": "Quick?"}, "ttlSeconds": 2},
        format="json",
    )
    assert created.status_code == 201, created.content
    body = created.json()
    bp_id = body["breakpointId"]
    assert body["ttlSeconds"] == 2
    expires_at = parse_time(body["expiresAt"])
    assert 1.5 <= (expires_at - parse_time(body["createdAt"])).total_seconds() <= 2.5
    assert agent_client.get(f"/api/breakpoints/{bp_id}/status").json()["status"] == "waiting"

    # Poll as an agent would; nothing else (no sweep) runs in this process.
    observed = None
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        polled = agent_client.get(f"/api/breakpoints/{bp_id}/status").json()
        if polled["status"] != "waiting":
            observed = (timezone.now(), polled)
            break
        time.sleep(0.1)

    assert observed is not None, "never left waiting"
    seen_at, polled = observed
    assert polled["status"] == "expired"
    assert seen_at >= expires_at
    assert (seen_at - expires_at).total_seconds() < 2
    assert polled["result"]["approved"] is False
    assert polled["result"]["feedback"] == "Expired: no decision within 2 seconds."
    full = agent_client.get(f"/api/breakpoints/{bp_id}").json()
    assert full["status"] == "expired"
    assert parse_time(full["expiredAt"]) >= expires_at
    [event] = expired_events(bp_id)
    assert event.actor == "system:ttl"
    # Reading again changes nothing.
    agent_client.get(f"/api/breakpoints/{bp_id}")
    assert len(expired_events(bp_id)) == 1


def test_full_read_of_an_overdue_breakpoint_expires_it(agent_client, make_breakpoint):
    bp = make_breakpoint(ttl_seconds=60)
    backdate_expiry(bp.pk)

    body = agent_client.get(f"/api/breakpoints/{bp.pk}").json()

    assert body["status"] == "expired"
    assert body["result"]["approved"] is False
    assert Breakpoint.objects.get(pk=bp.pk).status == "expired"
    assert len(expired_events(bp.pk)) == 1


def test_breakpoint_without_ttl_never_expires_on_read(agent_client, make_breakpoint):
    bp = make_breakpoint()
    assert bp.expires_at is None

    assert agent_client.get(f"/api/breakpoints/{bp.pk}/status").json()["status"] == "waiting"
    assert breakpoints_expire_due(now=timezone.now() + timedelta(days=3650)) == 0
    assert Breakpoint.objects.get(pk=bp.pk).status == "waiting"


# --- the sweep -----------------------------------------------------------------------------


def test_sweep_expires_only_untouched_overdue_waiting_breakpoints(make_breakpoint, reviewer):
    overdue = [make_breakpoint(ttl_seconds=2) for _ in range(3)]
    later = make_breakpoint(ttl_seconds=3600)
    no_ttl = make_breakpoint()
    released = make_breakpoint(ttl_seconds=2)
    feedback_add(
        breakpoint_id=released.pk, actor=Actor.for_user(reviewer), comment="ok", release=True
    )
    cancelled = make_breakpoint(ttl_seconds=2)
    breakpoint_cancel(breakpoint_id=cancelled.pk, actor=Actor.for_agent("agent-a"))

    count = breakpoints_expire_due(now=timezone.now() + timedelta(seconds=3))

    assert count == 3
    statuses = dict(Breakpoint.objects.values_list("pk", "status"))
    assert {statuses[bp.pk] for bp in overdue} == {"expired"}
    assert statuses[later.pk] == "waiting"
    assert statuses[no_ttl.pk] == "waiting"
    assert statuses[released.pk] == "released"
    assert statuses[cancelled.pk] == "cancelled"
    for bp in overdue:
        stored = Breakpoint.objects.get(pk=bp.pk)
        assert stored.expired_at is not None
        assert stored.result == {
            "approved": False,
            "feedback": "Expired: no decision within 2 seconds.",
            "respondedBy": "system:ttl",
        }
        [event] = expired_events(bp.pk)
        assert event.actor == "system:ttl"
        assert event.metadata["statusFrom"] == "waiting"
        assert event.metadata["statusTo"] == "expired"
    assert expired_events(released.pk) == []
    # A second sweep has nothing left to do.
    assert breakpoints_expire_due(now=timezone.now() + timedelta(seconds=3)) == 0
    assert Event.objects.filter(type="expired").count() == 3


def test_sweep_uses_the_real_clock_by_default(make_breakpoint):
    due = make_breakpoint(ttl_seconds=30)
    not_yet = make_breakpoint(ttl_seconds=30)
    backdate_expiry(due.pk)

    assert breakpoints_expire_due() == 1

    assert Breakpoint.objects.get(pk=due.pk).status == "expired"
    assert Breakpoint.objects.get(pk=not_yet.pk).status == "waiting"


def test_sweep_works_through_more_than_one_batch(make_breakpoint):
    bps = [make_breakpoint(ttl_seconds=1) for _ in range(7)]

    count = breakpoints_expire_due(now=timezone.now() + timedelta(seconds=2), batch_size=2)

    assert count == 7
    assert set(
        Breakpoint.objects.filter(pk__in=[b.pk for b in bps]).values_list("status", flat=True)
    ) == {"expired"}
    assert Event.objects.filter(type="expired").count() == 7


def test_expire_breakpoints_command_and_task_run_the_sweep(make_breakpoint):
    first, second = make_breakpoint(ttl_seconds=30), make_breakpoint(ttl_seconds=30)
    backdate_expiry(first.pk)

    assert run("expire_breakpoints").strip() == "Expired 1 breakpoint(s)."
    assert Breakpoint.objects.get(pk=first.pk).status == "expired"

    backdate_expiry(second.pk)
    assert tasks.expire_due_breakpoints() == 1  # the beat task's body, run in-process
    assert Breakpoint.objects.get(pk=second.pk).status == "expired"
    assert run("expire_breakpoints").strip() == "Expired 0 breakpoint(s)."


def test_expire_if_due_leaves_a_not_yet_due_or_finished_breakpoint_alone(
    make_breakpoint, admin_user
):
    waiting = make_breakpoint(ttl_seconds=60)
    breakpoint_expire_if_due(waiting.pk)
    assert Breakpoint.objects.get(pk=waiting.pk).status == "waiting"

    finished = make_breakpoint(ttl_seconds=60)
    breakpoint_expire(breakpoint_id=finished.pk, actor=Actor.for_user(admin_user))
    backdate_expiry(finished.pk)
    breakpoint_expire_if_due(finished.pk)
    assert [e.actor for e in expired_events(finished.pk)] == ["root-admin"]


# --- overlapping sweeps (real row locks: PostgreSQL) -------------------------------------


def _in_thread(results: dict, name: str, barrier: threading.Barrier, work) -> threading.Thread:
    def target():
        try:
            barrier.wait(timeout=10)
            results[name] = work()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            results[name] = exc
        finally:
            connections.close_all()  # this thread's own connection

    return threading.Thread(target=target, name=name)


@pytest.mark.django_db(transaction=True)
def test_overlapping_sweeps_expire_each_breakpoint_exactly_once():
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL row locks (SELECT ... FOR UPDATE SKIP LOCKED)")
    agent = Actor.for_agent("agent-a")
    ids = [
        breakpoint_create(actor=agent, payload={"question": f"q{i}"}, ttl_seconds=60)[0].pk
        for i in range(80)
    ]
    backdate_expiry(*ids)
    reader_expired = []

    def read_all():
        # An agent polling meanwhile expires on read, racing the sweeps.
        for bp_id in reversed(ids):
            breakpoint_expire_if_due(bp_id)
            reader_expired.append(bp_id)
        return len(reader_expired)

    results: dict = {}
    barrier = threading.Barrier(3)
    threads = [
        _in_thread(results, "sweep-1", barrier, lambda: breakpoints_expire_due(batch_size=5)),
        _in_thread(results, "sweep-2", barrier, lambda: breakpoints_expire_due(batch_size=5)),
        _in_thread(results, "reader", barrier, read_all),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
        assert not thread.is_alive(), f"{thread.name} hung"

    for name, value in results.items():
        assert not isinstance(value, BaseException), f"{name} raised {value!r}"
    assert results["sweep-1"] + results["sweep-2"] <= len(ids)
    assert set(Breakpoint.objects.filter(pk__in=ids).values_list("status", flat=True)) == {
        "expired"
    }
    per_breakpoint = dict.fromkeys(ids, 0)
    for bp_id in Event.objects.filter(type="expired").values_list("breakpoint_id", flat=True):
        per_breakpoint[bp_id] += 1
    assert set(per_breakpoint.values()) == {1}, "some breakpoint expired twice or not at all"


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_sweeps_share_the_work_without_overlap():
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL row locks (SELECT ... FOR UPDATE SKIP LOCKED)")
    agent = Actor.for_agent("agent-a")
    ids = [
        breakpoint_create(actor=agent, payload={"question": f"q{i}"}, ttl_seconds=60)[0].pk
        for i in range(120)
    ]
    backdate_expiry(*ids)

    results: dict = {}
    barrier = threading.Barrier(2)
    threads = [
        _in_thread(results, name, barrier, lambda: breakpoints_expire_due(batch_size=7))
        for name in ("sweep-1", "sweep-2")
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
        assert not thread.is_alive(), f"{thread.name} hung"

    assert all(isinstance(v, int) for v in results.values()), results
    # Every breakpoint counted by exactly one sweep, one event each.
    assert results["sweep-1"] + results["sweep-2"] == len(ids)
    assert Event.objects.filter(type="expired").count() == len(ids)
    assert Event.objects.filter(type="expired").values("breakpoint_id").distinct().count() == len(
        ids
    )


# --- retention -------------------------------------------------------------------------------


@pytest.fixture
def history(make_breakpoint, reviewer, admin_user):
    """Breakpoints in every state, some finished long ago, each with feedback/events/deliveries."""
    webhook = webhooks.webhook_add(url="https://example.com/hook")  # public: no allowance needed
    reviewer_actor = Actor.for_user(reviewer)

    def released():
        bp = make_breakpoint()
        feedback_add(breakpoint_id=bp.pk, actor=reviewer_actor, comment="hmm")
        feedback_add(breakpoint_id=bp.pk, actor=reviewer_actor, comment="ok", release=True)
        return bp

    def expired():
        bp = make_breakpoint(ttl_seconds=60)
        feedback_add(breakpoint_id=bp.pk, actor=reviewer_actor, comment="looking")
        breakpoint_expire(breakpoint_id=bp.pk, actor=Actor.for_user(admin_user))
        return bp

    def cancelled():
        bp = make_breakpoint()
        breakpoint_cancel(breakpoint_id=bp.pk, actor=Actor.for_agent("agent-a"))
        return bp

    def waiting():
        bp = make_breakpoint()
        feedback_add(breakpoint_id=bp.pk, actor=reviewer_actor, comment="still thinking")
        return bp

    rows = {
        "old_released": (released(), 30),
        "old_expired": (expired(), 30),
        "old_cancelled": (cancelled(), 30),
        "boundary_released": (released(), 6),
        "old_waiting": (waiting(), 30),
        "recent_released": (released(), 0),
        "recent_waiting": (waiting(), 0),
    }
    now = timezone.now()
    for bp, days in rows.values():
        if days:
            Breakpoint.objects.filter(pk=bp.pk).update(
                created_at=now - timedelta(days=days, hours=1),
                updated_at=now - timedelta(days=days),
            )
    by_name = {name: bp.pk for name, (bp, _) in rows.items()}
    for bp_id in by_name.values():  # every row has something attached
        assert Event.objects.filter(breakpoint_id=bp_id).exists()
        assert WebhookDelivery.objects.filter(breakpoint_id=bp_id).exists()
    return by_name, webhook


def assert_gone(bp_id: str) -> None:
    assert not Breakpoint.objects.filter(pk=bp_id).exists()
    assert not Feedback.objects.filter(breakpoint_id=bp_id).exists()
    assert not Event.objects.filter(breakpoint_id=bp_id).exists()
    assert not WebhookDelivery.objects.filter(breakpoint_id=bp_id).exists()


def assert_kept(bp_id: str, counts: dict) -> None:
    assert Breakpoint.objects.filter(pk=bp_id).exists()
    assert Feedback.objects.filter(breakpoint_id=bp_id).count() == counts["feedback"]
    assert Event.objects.filter(breakpoint_id=bp_id).count() == counts["events"]
    assert WebhookDelivery.objects.filter(breakpoint_id=bp_id).count() == counts["deliveries"]


def attached_counts(bp_ids) -> dict:
    return {
        bp_id: {
            "feedback": Feedback.objects.filter(breakpoint_id=bp_id).count(),
            "events": Event.objects.filter(breakpoint_id=bp_id).count(),
            "deliveries": WebhookDelivery.objects.filter(breakpoint_id=bp_id).count(),
        }
        for bp_id in bp_ids
    }


def test_purge_command_deletes_only_finished_breakpoints_older_than_the_cutoff(history):
    ids, webhook = history
    doomed = [ids["old_released"], ids["old_expired"], ids["old_cancelled"]]
    survivors = [
        ids["boundary_released"],
        ids["old_waiting"],
        ids["recent_released"],
        ids["recent_waiting"],
    ]
    before = attached_counts(survivors)
    assert Feedback.objects.filter(breakpoint_id=ids["old_released"]).count() == 2

    output = run("purge_breakpoints", "--older-than", "7")

    assert output.strip() == "Purged 3 breakpoint(s)."
    for bp_id in doomed:
        assert_gone(bp_id)
    for bp_id in survivors:
        assert_kept(bp_id, before[bp_id])
    assert Webhook.objects.filter(pk=webhook.pk).exists()  # subscriptions are not history
    assert Breakpoint.objects.get(pk=ids["old_waiting"]).status == "waiting"
    # Nothing left to purge at that age.
    assert run("purge_breakpoints", "--older-than", "7").strip() == "Purged 0 breakpoint(s)."


def test_purge_with_zero_days_takes_every_finished_breakpoint_but_no_waiting_one(history):
    ids, _ = history

    assert breakpoints_purge(older_than_days=0) == 5

    assert set(Breakpoint.objects.values_list("pk", flat=True)) == {
        ids["old_waiting"],
        ids["recent_waiting"],
    }


def test_purge_task_uses_the_retention_setting(history, settings):
    ids, _ = history
    settings.BPM_RETENTION_DAYS = 5

    assert tasks.purge_finished_breakpoints() == 4  # the three old ones and the 6-day one

    remaining = set(Breakpoint.objects.values_list("pk", flat=True))
    assert remaining == {ids["old_waiting"], ids["recent_released"], ids["recent_waiting"]}
    assert_gone(ids["boundary_released"])


def test_purge_works_through_batches(make_breakpoint, monkeypatch):
    # Patch the constant where breakpoints_purge reads it (the module that defines it).
    monkeypatch.setattr(sys.modules[breakpoints_purge.__module__], "PURGE_BATCH_SIZE", 2)
    bps = [make_breakpoint() for _ in range(5)]
    for bp in bps:
        breakpoint_cancel(breakpoint_id=bp.pk, actor=Actor.for_agent("agent-a"))
    Breakpoint.objects.update(updated_at=timezone.now() - timedelta(days=10))
    keeper = make_breakpoint()

    assert breakpoints_purge(older_than_days=1) == 5

    assert list(Breakpoint.objects.values_list("pk", flat=True)) == [keeper.pk]
    assert not Event.objects.exclude(breakpoint_id=keeper.pk).exists()


@pytest.mark.django_db
def test_purge_command_refuses_bad_input():
    with pytest.raises(CommandError):
        run("purge_breakpoints", "--older-than", "-1")
    with pytest.raises(CommandError):
        run("purge_breakpoints")
