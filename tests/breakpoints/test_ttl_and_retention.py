"""TTL (expire on read, the batched sweep, overlapping sweeps) and retention (purge)."""

import json
import sys
import time
from collections import Counter
from contextlib import contextmanager
from datetime import datetime, timedelta
from io import StringIO

import psycopg
import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from audit.models import Event
from breakpoints import tasks, wakeups
from breakpoints.answers import results
from breakpoints.api.serializers import BreakpointSerializer
from breakpoints.models import Breakpoint, Feedback
from breakpoints.services import (
    breakpoint_cancel,
    breakpoint_create,
    breakpoint_expire,
    breakpoint_expire_if_due,
    breakpoints_expire_due,
    breakpoints_purge,
    expiry,
    feedback_add,
)
from core import receipts
from core.actors import Actor
from notifications import outbox
from notifications import services as webhooks
from notifications.models import Delivery, Webhook
from tests.support.api import parse_time
from tests.support.factories import BreakpointFactory
from tests.support.receipts import suite_jwks, unsealed
from tests.support.records import backdate_expiry
from tests.support.threads import run_together


def expired_events(bp_id: str) -> list[Event]:
    return list(Event.objects.filter(breakpoint_id=bp_id, type="expired"))


def run(*args) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


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
        assert unsealed(stored.result, via="system") == {
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

    count = breakpoints_expire_due(now=timezone.now() + timedelta(seconds=2), batch_size=3)

    assert count == 7
    assert set(
        Breakpoint.objects.filter(pk__in=[b.pk for b in bps]).values_list("status", flat=True)
    ) == {"expired"}
    assert Event.objects.filter(type="expired").count() == 7
    # One UPDATE per batch, each row its own result: every receipt names its own row.
    for stored in Breakpoint.objects.filter(pk__in=[b.pk for b in bps]):
        claims = receipts.verify(stored.result["receipt"], suite_jwks())
        assert claims["breakpointId"] == stored.pk
        assert claims["payloadDigest"] == stored.payload_digest


def test_expire_breakpoints_command_and_task_run_the_sweep(make_breakpoint):
    first, second = make_breakpoint(ttl_seconds=30), make_breakpoint(ttl_seconds=30)
    backdate_expiry(first.pk)

    assert run("expire_breakpoints").strip() == "Expired 1 breakpoint(s)."
    assert Breakpoint.objects.get(pk=first.pk).status == "expired"

    backdate_expiry(second.pk)
    assert tasks.expire_due_breakpoints() == 1  # the beat task's body, run in-process
    assert Breakpoint.objects.get(pk=second.pk).status == "expired"
    assert run("expire_breakpoints").strip() == "Expired 0 breakpoint(s)."


def test_expire_breakpoints_runs_the_sweep_once(make_breakpoint):
    due = [make_breakpoint(ttl_seconds=30), make_breakpoint(ttl_seconds=30)]
    Breakpoint.objects.filter(pk__in=[bp.pk for bp in due]).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    waiting = make_breakpoint(ttl_seconds=3600)

    out = run("expire_breakpoints")

    assert out.strip() == "Expired 2 breakpoint(s)."
    assert set(Breakpoint.objects.filter(status="expired").values_list("pk", flat=True)) == {
        bp.pk for bp in due
    }
    assert Breakpoint.objects.get(pk=waiting.pk).status == "waiting"
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


# --- the batched sweep: what each batch writes ---------------------------------------------

TTL_60 = {
    "approved": False,
    "feedback": "Expired: no decision within 60 seconds.",
    "respondedBy": "system:ttl",
}
# Fields that differ between two breakpoints created alike.
PER_ROW_FIELDS = {"breakpointId", "createdAt", "updatedAt", "expiresAt", "expiredAt", "consoleUrl"}


def later() -> datetime:
    """A sweep's `now` past every TTL here, while the real clock keeps the rows releasable."""
    return timezone.now() + timedelta(hours=2)


def subscribe(url: str, events: list[str] | None = None, *, active: bool = True) -> Webhook:
    webhook = webhooks.webhook_add(url=url, event_types=events)
    if not active:
        webhook = webhooks.webhook_update(
            webhook_id=webhook.pk, event_types=events or [], active=False
        )
    return webhook


def expired_deliveries(bp_id: str) -> list[Delivery]:
    return list(Delivery.objects.filter(breakpoint_id=bp_id, event_type="expired"))


def as_json(data) -> dict:
    return json.loads(json.dumps(data, default=str))


def alike(data: dict) -> dict:
    """A webhook body's breakpoint without what differs between two breakpoints made alike."""
    kept = {name: value for name, value in data.items() if name not in PER_ROW_FIELDS}
    kept["feedback"] = [(f["author"], f["comment"]) for f in data["feedback"]]
    kept["result"] = unsealed(data["result"])  # each receipt names its own breakpoint
    return kept


def due_breakpoints(count: int) -> list[str]:
    """Waiting breakpoints already past expiresAt, inserted in bulk (no events of their own)."""
    past = timezone.now() - timedelta(seconds=1)
    rows = BreakpointFactory.build_batch(count, ttl_seconds=60, expires_at=past)
    return [bp.pk for bp in Breakpoint.objects.bulk_create(rows)]


def record_publishes(monkeypatch) -> list[list[str]]:
    """What would be handed to the workers, per publish (no broker is reached from here)."""
    published: list[list[str]] = []

    def publish(ids: list[str]) -> int:
        published.append(list(ids))
        return len(ids)

    monkeypatch.setattr(outbox, "publish_deliveries", publish)
    return published


def test_batch_expiry_writes_the_single_paths_result_and_one_expired_event_each(make_breakpoint):
    single = make_breakpoint(ttl_seconds=60)
    backdate_expiry(single.pk)
    breakpoint_expire_if_due(single.pk)  # the single-row path (expire on read)
    [single_event] = expired_events(single.pk)
    batch = [make_breakpoint(ttl_seconds=60) for _ in range(3)]
    shorter = make_breakpoint(ttl_seconds=30)
    not_yet_due = make_breakpoint(ttl_seconds=3600)
    no_ttl = make_breakpoint()
    backdate_expiry(*(bp.pk for bp in batch), shorter.pk)

    assert breakpoints_expire_due() == 4

    assert unsealed(Breakpoint.objects.get(pk=single.pk).result) == TTL_60
    for bp in batch:
        stored = Breakpoint.objects.get(pk=bp.pk)
        assert stored.status == "expired"
        assert unsealed(stored.result) == TTL_60
        assert stored.expired_at is not None
        assert stored.updated_at == stored.expired_at
        [event] = expired_events(bp.pk)
        assert (event.actor, event.metadata) == (single_event.actor, single_event.metadata)
    assert single_event.metadata == {
        "statusFrom": "waiting",
        "statusTo": "expired",
        "reason": "Expired: no decision within 60 seconds.",
    }
    stored = Breakpoint.objects.get(pk=shorter.pk)
    assert stored.result["feedback"] == "Expired: no decision within 30 seconds."
    [event] = expired_events(shorter.pk)
    assert event.metadata["reason"] == "Expired: no decision within 30 seconds."
    for untouched in (not_yet_due, no_ttl):
        stored = Breakpoint.objects.get(pk=untouched.pk)
        assert (stored.status, stored.result, stored.expired_at) == ("waiting", None, None)
        assert stored.updated_at == untouched.updated_at
        assert expired_events(untouched.pk) == []


def test_batch_expiry_enqueues_for_each_subscribed_webhook_what_the_single_path_does(
    make_breakpoint, reviewer, expert_member, monkeypatch, django_capture_on_commit_callbacks
):
    expert_member("tina", "tech-lead")
    everything = subscribe("https://example.com/all")
    expiries = subscribe("https://example.com/expired", ["expired"])
    not_expiries = subscribe("https://example.com/created", ["created", "released"])
    paused = subscribe("https://example.com/paused", ["expired"], active=False)
    published = record_publishes(monkeypatch)
    payload = {"question": "Ship it?", "title": "Ship", "expert": ["tech-lead", "nobody"]}

    def commented():
        bp = make_breakpoint(ttl_seconds=60, payload=payload)
        feedback_add(breakpoint_id=bp.pk, actor=Actor.for_user(reviewer), comment="looking")
        return bp

    single, *batch = [commented() for _ in range(4)]
    backdate_expiry(single.pk, *(bp.pk for bp in batch))
    breakpoint_expire_if_due(single.pk)  # the single-row path
    single_bodies = {d.webhook_id: d.body for d in expired_deliveries(single.pk)}
    assert set(single_bodies) == {everything.pk, expiries.pk}

    with django_capture_on_commit_callbacks(execute=True):
        assert breakpoints_expire_due() == 3

    enqueued = []
    for bp in batch:
        deliveries = expired_deliveries(bp.pk)
        assert sorted(d.webhook_id for d in deliveries) == sorted([everything.pk, expiries.pk])
        stored = Breakpoint.objects.get(pk=bp.pk)
        for delivery in deliveries:
            assert (delivery.status, delivery.attempts) == ("pending", 0)
            assert delivery.next_attempt_at <= timezone.now()
            assert set(delivery.body) == {"type", "timestamp", "data"}
            assert delivery.body["type"] == "breakpoint.expired"
            assert delivery.body["data"] == as_json(BreakpointSerializer(stored).data)
            assert alike(delivery.body["data"]) == alike(single_bodies[delivery.webhook_id]["data"])
            enqueued.append(delivery.pk)
    data = expired_deliveries(batch[0].pk)[0].body["data"]
    assert data["experts"] == [
        {"name": "tech-lead", "resolved": True, "kind": "group"},
        {"name": "nobody", "resolved": False, "kind": None},
    ]
    assert [f["comment"] for f in data["feedback"]] == ["looking"]
    assert unsealed(data["result"]) == TTL_60
    for silent in (not_expiries, paused):
        assert not Delivery.objects.filter(webhook=silent, event_type="expired").exists()
    assert sorted(published[-1]) == sorted(enqueued)  # handed to the workers on commit


def test_a_breakpoint_released_between_selection_and_update_is_not_expired(
    make_breakpoint, reviewer, monkeypatch
):
    subscribe("https://example.com/expired", ["expired"])
    first, raced, last = [make_breakpoint(ttl_seconds=60) for _ in range(3)]
    lock_due = expiry._lock_due

    def select_then_release(**kwargs):
        due = lock_due(**kwargs)
        assert raced.pk in due
        # The release lands after the selection, in the sweep's own transaction here: where
        # rows are not locked (SQLite), only the UPDATE's status condition stops the expiry.
        feedback_add(
            breakpoint_id=raced.pk, actor=Actor.for_user(reviewer), comment="go", release=True
        )
        return due

    monkeypatch.setattr(expiry, "_lock_due", select_then_release)

    assert breakpoints_expire_due(now=later()) == 2

    stored = Breakpoint.objects.get(pk=raced.pk)
    assert (stored.status, stored.expired_at) == ("released", None)
    assert stored.result["respondedBy"] == "alice"
    assert expired_events(raced.pk) == []
    assert expired_deliveries(raced.pk) == []
    for bp in (first, last):
        assert unsealed(Breakpoint.objects.get(pk=bp.pk).result) == TTL_60
        assert len(expired_events(bp.pk)) == 1
        assert len(expired_deliveries(bp.pk)) == 1


def test_each_batch_writes_its_events_and_deliveries_and_publishes_them_once(
    make_breakpoint, monkeypatch, django_capture_on_commit_callbacks
):
    subscribe("https://example.com/expired", ["expired"])
    published = record_publishes(monkeypatch)
    bps = [make_breakpoint(ttl_seconds=60) for _ in range(7)]

    with django_capture_on_commit_callbacks(execute=True):
        assert breakpoints_expire_due(now=later(), batch_size=3) == 7

    assert [len(ids) for ids in published] == [3, 3, 1]  # one publish per batch
    deliveries = Delivery.objects.filter(event_type="expired")
    assert sorted(sum(published, [])) == sorted(deliveries.values_list("pk", flat=True))
    for bp in bps:
        assert Breakpoint.objects.get(pk=bp.pk).status == "expired"
        assert len(expired_events(bp.pk)) == 1
        assert len(expired_deliveries(bp.pk)) == 1


def test_sweep_queries_do_not_grow_with_the_rows_in_a_batch(
    make_breakpoint, reviewer, expert_member, django_assert_num_queries
):
    expert_member("tina", "tech-lead")
    subscribe("https://example.com/expired", ["expired"])
    payload = {"question": "Ship it?", "expert": ["tech-lead", "nobody"]}

    def routed_and_commented(count: int) -> None:
        for _ in range(count):
            bp = make_breakpoint(ttl_seconds=60, payload=payload)
            feedback_add(breakpoint_id=bp.pk, actor=Actor.for_user(reviewer), comment="hm")

    routed_and_commented(2)
    with CaptureQueriesContext(connection) as two_rows:
        assert breakpoints_expire_due(now=later(), batch_size=100) == 2

    routed_and_commented(30)
    with django_assert_num_queries(len(two_rows.captured_queries)):
        assert breakpoints_expire_due(now=later(), batch_size=100) == 30


@contextmanager
def announcements():
    """The breakpoint ids announced to waiters while inside: NOTIFY on PostgreSQL, else the
    process's own listeners."""
    heard: list[str] = []
    if connection.vendor != "postgresql":
        listener = heard.extend
        wakeups.add_local_listener(listener)
        try:
            yield heard
        finally:
            wakeups.remove_local_listener(listener)
        return
    settings = connection.settings_dict
    with psycopg.connect(
        dbname=settings["NAME"],
        user=settings["USER"],
        host=settings["HOST"],
        port=str(settings["PORT"] or 5432),
        password=settings["PASSWORD"] or None,
        autocommit=True,
    ) as listening:
        listening.execute(f"LISTEN {wakeups.CHANNEL}")
        yield heard
        heard.extend(n.payload for n in listening.notifies(timeout=1))


@pytest.mark.django_db(transaction=True)
def test_batch_expiry_wakes_the_waiters_of_every_breakpoint_it_expired():
    due = due_breakpoints(5)
    BreakpointFactory(ttl_seconds=60, expires_at=timezone.now() + timedelta(minutes=1))

    with announcements() as heard:
        assert breakpoints_expire_due(batch_size=2) == 5

    assert sorted(heard) == sorted(due)


# --- overlapping sweeps (real row locks: PostgreSQL) -------------------------------------


@pytest.mark.postgres  # row locks: SELECT ... FOR UPDATE SKIP LOCKED
@pytest.mark.django_db(transaction=True)
def test_overlapping_sweeps_expire_each_breakpoint_exactly_once():
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

    def sweep() -> int:
        return breakpoints_expire_due(batch_size=5)

    results = run_together({"sweep-1": sweep, "sweep-2": sweep, "reader": read_all})

    assert results["sweep-1"] + results["sweep-2"] <= len(ids)
    assert set(Breakpoint.objects.filter(pk__in=ids).values_list("status", flat=True)) == {
        "expired"
    }
    per_breakpoint = dict.fromkeys(ids, 0)
    for bp_id in Event.objects.filter(type="expired").values_list("breakpoint_id", flat=True):
        per_breakpoint[bp_id] += 1
    assert set(per_breakpoint.values()) == {1}, "some breakpoint expired twice or not at all"


@pytest.mark.postgres  # row locks: SELECT ... FOR UPDATE SKIP LOCKED
@pytest.mark.django_db(transaction=True)
def test_two_concurrent_sweeps_share_the_work_without_overlap():
    agent = Actor.for_agent("agent-a")
    ids = [
        breakpoint_create(actor=agent, payload={"question": f"q{i}"}, ttl_seconds=60)[0].pk
        for i in range(120)
    ]
    backdate_expiry(*ids)

    def sweep() -> int:
        return breakpoints_expire_due(batch_size=7)

    results = run_together({"sweep-1": sweep, "sweep-2": sweep})

    assert all(isinstance(v, int) for v in results.values()), results
    # Every breakpoint counted by exactly one sweep, one event each.
    assert results["sweep-1"] + results["sweep-2"] == len(ids)
    assert Event.objects.filter(type="expired").count() == len(ids)
    assert Event.objects.filter(type="expired").values("breakpoint_id").distinct().count() == len(
        ids
    )


@pytest.mark.postgres  # row locks: SELECT ... FOR UPDATE SKIP LOCKED
@pytest.mark.django_db(transaction=True)
def test_overlapping_batched_sweeps_write_each_event_and_delivery_once(monkeypatch):
    subscribe("https://example.com/expired", ["expired"])
    record_publishes(monkeypatch)
    ids = due_breakpoints(600)

    def sweep() -> int:
        return breakpoints_expire_due(batch_size=40)

    results = run_together({"sweep-1": sweep, "sweep-2": sweep, "sweep-3": sweep})

    assert all(isinstance(v, int) for v in results.values()), results
    assert sum(results.values()) == len(ids)
    assert set(Breakpoint.objects.values_list("status", flat=True)) == {"expired"}
    events = Counter(Event.objects.filter(type="expired").values_list("breakpoint_id", flat=True))
    deliveries = Counter(
        Delivery.objects.filter(event_type="expired").values_list("breakpoint_id", flat=True)
    )
    assert events == deliveries == dict.fromkeys(ids, 1)


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
        assert Delivery.objects.filter(breakpoint_id=bp_id).exists()
    return by_name, webhook


def assert_gone(bp_id: str) -> None:
    assert not Breakpoint.objects.filter(pk=bp_id).exists()
    assert not Feedback.objects.filter(breakpoint_id=bp_id).exists()
    assert not Event.objects.filter(breakpoint_id=bp_id).exists()
    assert not Delivery.objects.filter(breakpoint_id=bp_id).exists()


def assert_kept(bp_id: str, counts: dict) -> None:
    assert Breakpoint.objects.filter(pk=bp_id).exists()
    assert Feedback.objects.filter(breakpoint_id=bp_id).count() == counts["feedback"]
    assert Event.objects.filter(breakpoint_id=bp_id).count() == counts["events"]
    assert Delivery.objects.filter(breakpoint_id=bp_id).count() == counts["deliveries"]


def attached_counts(bp_ids) -> dict:
    return {
        bp_id: {
            "feedback": Feedback.objects.filter(breakpoint_id=bp_id).count(),
            "events": Event.objects.filter(breakpoint_id=bp_id).count(),
            "deliveries": Delivery.objects.filter(breakpoint_id=bp_id).count(),
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


@pytest.mark.parametrize("ttl, said", [(1, "1 second"), (2, "2 seconds"), (60, "60 seconds")])
def test_the_reason_of_a_timeout_counts_its_seconds_in_english(ttl, said):
    """'1 second', not '1 seconds' (issue 31): expired, or released by the timeout policy."""
    now = timezone.now()
    timed_out = results.result_timed_out(responder="system:ttl", ttl_seconds=ttl)
    rejected = results.result_timeout_policy(approved=False, ttl_seconds=ttl, at=now, votes=[])

    assert timed_out["feedback"] == f"Expired: no decision within {said}."
    assert rejected["feedback"].endswith(f"(onTimeout: reject): no decision within {said}.")
