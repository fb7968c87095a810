"""While a breakpoint waits: escalation (escalateAfterSeconds + escalateTo) and reminders
(remindEverySeconds), by beat's nudge sweep, once per breakpoint even when sweeps overlap
(PostgreSQL)."""

from collections import Counter
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.utils import timezone

from audit.models import Event
from breakpoints import tasks
from breakpoints.models import Breakpoint
from breakpoints.services import (
    breakpoint_cancel,
    breakpoint_create,
    breakpoints_escalate_due,
    breakpoints_expire_due,
    breakpoints_remind_due,
    feedback_add,
)
from core.actors import Actor
from core.limits import MAX_REMINDERS
from core.timestamps import timestamp
from notifications import outbox
from notifications import services as webhooks
from notifications.models import Delivery, Webhook
from tests.support.records import deliveries_of, events_of, history
from tests.support.threads import run_together

URL = "/api/breakpoints"
EVERY = 300  # remindEverySeconds: the smallest allowed


def escalating(after: int = 120, to: str = "ops-lead", **extra) -> dict:
    return {
        "question": "Ship it?",
        "title": "Ship",
        "escalateAfterSeconds": after,
        "escalateTo": to,
        **extra,
    }


def reminding(every: int = EVERY, **extra) -> dict:
    return {"question": "Ship it?", "title": "Ship", "remindEverySeconds": every, **extra}


def backdate(*bp_ids: str, field: str, seconds: float = 1) -> None:
    Breakpoint.objects.filter(pk__in=bp_ids).update(
        **{field: timezone.now() - timedelta(seconds=seconds)}
    )


def subscribe(url: str, events: list[str]) -> Webhook:
    return webhooks.webhook_add(url=url, event_types=events)


def release(bp_id: str, user) -> None:
    feedback_add(breakpoint_id=bp_id, actor=Actor.for_user(user), comment="ok", release=True)


# --- escalation after escalateAfterSeconds -------------------------------------------------


def test_escalation_waits_for_its_time_then_routes_to_escalate_to_once(
    make_breakpoint, expert_member
):
    expert_member("tina", "tech-lead")
    expert_member("oscar", "ops-lead")
    hook = subscribe("https://example.com/escalated", ["escalated"])
    bp = make_breakpoint(ttl_seconds=3600, payload=escalating(expert="tech-lead"))
    assert bp.escalate_at - bp.created_at == pytest.approx(
        timedelta(seconds=120), abs=timedelta(seconds=1)
    )

    assert breakpoints_escalate_due() == 0  # the real clock: not yet
    assert breakpoints_escalate_due(now=bp.escalate_at - timedelta(seconds=1)) == 0
    assert history(bp.pk) == []
    assert Breakpoint.objects.get(pk=bp.pk).experts == ["tech-lead"]

    assert breakpoints_escalate_due(now=bp.escalate_at) == 1
    assert breakpoints_escalate_due(now=bp.escalate_at + timedelta(seconds=60)) == 0  # once

    stored = Breakpoint.objects.get(pk=bp.pk)
    assert stored.status == "waiting"
    assert stored.experts == ["tech-lead", "ops-lead"]
    assert stored.escalated_at is not None
    assert stored.expires_at == bp.expires_at  # escalateAfterSeconds gives no extra time
    assert history(bp.pk) == ["escalated"]
    [event] = events_of(bp.pk, "escalated")
    assert event.actor == "system:escalation"
    assert event.metadata == {
        "escalateTo": "ops-lead",
        "experts": ["tech-lead", "ops-lead"],
        "expiresAt": timestamp(bp.expires_at),
    }
    [delivery] = deliveries_of(bp.pk, "escalated")
    assert delivery.webhook_id == hook.pk
    assert delivery.body["type"] == "breakpoint.escalated"
    assert delivery.body["data"]["status"] == "waiting"
    assert delivery.body["data"]["experts"] == [
        {"name": "tech-lead", "resolved": True, "kind": "group"},
        {"name": "ops-lead", "resolved": True, "kind": "group"},
    ]


def test_the_escalated_expert_may_release_only_after_the_escalation(
    make_breakpoint, expert_member, agent_client, client_for
):
    oscar = client_for(expert_member("oscar", "ops-lead"))
    bp = make_breakpoint(payload=escalating(expert="tech-lead"))

    def client_release(client, bp_id: str):
        return client.post(
            f"{URL}/{bp_id}/feedback", {"comment": "", "release": True}, format="json"
        )

    forbidden = client_release(oscar, bp.pk)
    assert forbidden.status_code == 403, forbidden.content
    backdate(bp.pk, field="escalate_at")

    assert tasks.nudge_waiting_breakpoints() == 1  # the beat task's body, run in-process

    response = client_release(oscar, bp.pk)
    assert response.status_code in (200, 201), response.content
    polled = agent_client.get(f"{URL}/{bp.pk}/status").json()
    assert polled["status"] == "released"
    assert polled["result"]["respondedBy"] == "oscar"
    assert history(bp.pk) == ["refused", "escalated", "feedback", "released"]  # 1st on record


def test_a_breakpoint_decided_cancelled_or_overdue_is_not_escalated(make_breakpoint, reviewer):
    released = make_breakpoint(payload=escalating())
    release(released.pk, reviewer)
    cancelled = make_breakpoint(payload=escalating())
    breakpoint_cancel(breakpoint_id=cancelled.pk, actor=Actor.for_agent("agent-a"))
    overdue = make_breakpoint(ttl_seconds=3600, payload=escalating())
    backdate(overdue.pk, field="expires_at")
    untouched = [released, cancelled, overdue]
    backdate(*(bp.pk for bp in untouched), field="escalate_at", seconds=10)

    assert breakpoints_escalate_due() == 0

    for bp in untouched:
        stored = Breakpoint.objects.get(pk=bp.pk)
        assert (stored.experts, stored.escalated_at) == ([], None)
        assert events_of(bp.pk, "escalated") == []
    # The overdue one simply expires (onTimeout: expire), never escalated.
    assert breakpoints_expire_due() == 1
    assert history(overdue.pk) == ["expired"]


def test_only_due_breakpoints_are_escalated_and_the_rest_later(make_breakpoint):
    due = make_breakpoint(payload=escalating(after=60))
    later = make_breakpoint(payload=escalating(after=3600))
    never = make_breakpoint(payload={"question": "Ship it?"})
    assert never.escalate_at is None

    now = timezone.now() + timedelta(seconds=61)
    assert breakpoints_escalate_due(now=now) == 1

    assert [history(bp.pk) for bp in (due, later, never)] == [["escalated"], [], []]
    assert breakpoints_escalate_due(now=now + timedelta(hours=1)) == 1
    assert [history(bp.pk) for bp in (due, later, never)] == [["escalated"], ["escalated"], []]
    assert breakpoints_escalate_due(now=now + timedelta(days=400)) == 0


def test_escalating_to_an_expert_already_routed_adds_no_second_seat(make_breakpoint):
    bp = make_breakpoint(payload=escalating(expert=["ops-lead", "tech-lead"]))
    backdate(bp.pk, field="escalate_at")

    assert breakpoints_escalate_due() == 1

    stored = Breakpoint.objects.get(pk=bp.pk)
    assert stored.experts == ["ops-lead", "tech-lead"]
    assert stored.escalated_at is not None
    assert history(bp.pk) == ["escalated"]
    assert breakpoints_escalate_due() == 0


def test_escalate_to_names_the_expert_as_payload_expert_does(agent_client, expert_member):
    # BUG: payload.expert names are stripped (routing.expert_names) but escalateTo is
    # added to the experts as sent (services/nudges.py, escalate_locked), so " ops-lead "
    # becomes a seat that resolves to nobody instead of the ops-lead group. Either
    # refusing it (400) or stripping it would be right; routing to nobody is not.
    expert_member("oscar", "ops-lead")
    payload = escalating(to=" ops-lead ", expert="tech-lead")

    response = agent_client.post(URL, {"payload": payload}, format="json")

    if response.status_code == 400:
        assert "payload.escalateTo" in response.json()["error"]["details"]
        return
    assert response.status_code == 201, response.content
    bp_id = response.json()["breakpointId"]
    backdate(bp_id, field="escalate_at")
    assert breakpoints_escalate_due() == 1
    assert Breakpoint.objects.get(pk=bp_id).experts == ["tech-lead", "ops-lead"]
    seats = agent_client.get(f"{URL}/{bp_id}").json()["experts"]
    assert {"name": "ops-lead", "resolved": True, "kind": "group"} in seats


# --- reminders -------------------------------------------------------------------------


def test_reminders_come_once_per_period_while_it_waits(make_breakpoint):
    hook = subscribe("https://example.com/reminder", ["reminder"])
    bp = make_breakpoint(payload=reminding())
    first = bp.remind_at
    assert first - bp.created_at == pytest.approx(
        timedelta(seconds=EVERY), abs=timedelta(seconds=1)
    )

    assert breakpoints_remind_due() == 0  # the real clock: not yet
    assert breakpoints_remind_due(now=first - timedelta(seconds=1)) == 0
    assert breakpoints_remind_due(now=first) == 1
    assert breakpoints_remind_due(now=first) == 0  # once per period
    assert breakpoints_remind_due(now=first + timedelta(seconds=EVERY - 1)) == 0

    stored = Breakpoint.objects.get(pk=bp.pk)
    assert (stored.reminders_sent, stored.remind_at) == (1, first + timedelta(seconds=EVERY))
    assert stored.status == "waiting"
    [event] = events_of(bp.pk, "reminder")
    assert event.actor == "system:reminders"
    assert event.metadata == {"reminder": 1, "of": MAX_REMINDERS}
    [delivery] = deliveries_of(bp.pk, "reminder")
    assert delivery.webhook_id == hook.pk
    assert delivery.body["type"] == "breakpoint.reminder"
    assert delivery.body["data"]["status"] == "waiting"

    assert breakpoints_remind_due(now=first + timedelta(seconds=EVERY)) == 1
    assert [e.metadata["reminder"] for e in events_of(bp.pk, "reminder")] == [1, 2]
    assert len(deliveries_of(bp.pk, "reminder")) == 2


def test_a_late_sweep_sends_one_reminder_not_the_backlog(make_breakpoint):
    bp = make_breakpoint(payload=reminding(every=600))
    late = bp.remind_at + timedelta(hours=3)  # 18 periods missed

    assert breakpoints_remind_due(now=late) == 1

    stored = Breakpoint.objects.get(pk=bp.pk)
    assert (stored.reminders_sent, stored.remind_at) == (1, late + timedelta(seconds=600))
    assert len(events_of(bp.pk, "reminder")) == 1


def test_reminders_stop_after_the_tenth(make_breakpoint):
    bp = make_breakpoint(payload=reminding())
    now = bp.remind_at

    sent = []
    for _ in range(MAX_REMINDERS + 5):
        sent.append(breakpoints_remind_due(now=now))
        now += timedelta(seconds=EVERY)

    assert sent == [1] * MAX_REMINDERS + [0] * 5
    stored = Breakpoint.objects.get(pk=bp.pk)
    assert (stored.reminders_sent, stored.remind_at) == (MAX_REMINDERS, None)
    assert [e.metadata for e in events_of(bp.pk, "reminder")] == [
        {"reminder": n, "of": MAX_REMINDERS} for n in range(1, MAX_REMINDERS + 1)
    ]
    assert stored.status == "waiting"


def test_reminders_stop_once_it_is_decided_or_cancelled(make_breakpoint, reviewer):
    released = make_breakpoint(payload=reminding())
    cancelled = make_breakpoint(payload=reminding())
    now = released.remind_at + timedelta(seconds=1)
    assert breakpoints_remind_due(now=now) == 2

    release(released.pk, reviewer)
    breakpoint_cancel(breakpoint_id=cancelled.pk, actor=Actor.for_agent("agent-a"))

    for step in range(1, 4):
        assert breakpoints_remind_due(now=now + timedelta(seconds=EVERY * step)) == 0
    assert history(released.pk) == ["reminder", "feedback", "released"]
    assert history(cancelled.pk) == ["reminder", "cancelled"]


def test_no_reminder_for_a_breakpoint_already_overdue(make_breakpoint):
    # Due for a reminder at the sweep's time, but already past its expiresAt.
    by_the_sweeps_clock = make_breakpoint(ttl_seconds=EVERY + 60, payload=reminding())
    assert breakpoints_remind_due(now=by_the_sweeps_clock.expires_at) == 0
    # The same with the real clock: both times already passed.
    by_the_real_clock = make_breakpoint(ttl_seconds=3600, payload=reminding())
    backdate(by_the_real_clock.pk, field="remind_at", seconds=60)
    backdate(by_the_real_clock.pk, field="expires_at")

    assert breakpoints_remind_due() == 0

    assert breakpoints_expire_due() == 1  # the real clock: only the second is overdue
    for bp in (by_the_sweeps_clock, by_the_real_clock):
        assert Breakpoint.objects.get(pk=bp.pk).reminders_sent == 0
        assert events_of(bp.pk, "reminder") == []
    assert history(by_the_real_clock.pk) == ["expired"]


def test_reminders_also_while_an_expiring_breakpoint_still_has_time(make_breakpoint):
    bp = make_breakpoint(ttl_seconds=3 * EVERY + 60, payload=reminding())
    now = bp.remind_at

    sent = []
    for _ in range(5):
        sent.append(breakpoints_remind_due(now=now))
        now += timedelta(seconds=EVERY)

    assert sent == [1, 1, 1, 0, 0]  # at 300, 600, 900 s; at 1200 s it is overdue (960 s)
    assert Breakpoint.objects.get(pk=bp.pk).reminders_sent == 3


def test_the_beat_task_escalates_and_reminds_what_is_due(make_breakpoint):
    both = make_breakpoint(payload={**escalating(), "remindEverySeconds": EVERY})
    reminded_only = make_breakpoint(payload=reminding())
    not_due = make_breakpoint(payload={**escalating(), "remindEverySeconds": EVERY})
    backdate(both.pk, field="escalate_at")
    backdate(both.pk, reminded_only.pk, field="remind_at")

    assert tasks.nudge_waiting_breakpoints() == 3

    assert history(both.pk) == ["escalated", "reminder"]
    assert history(reminded_only.pk) == ["reminder"]
    assert history(not_due.pk) == []
    assert tasks.nudge_waiting_breakpoints() == 0


# --- overlapping sweeps (real row locks: PostgreSQL) --------------------------------------


def created(count: int, payload: dict) -> list[str]:
    agent = Actor.for_agent("agent-a")
    return [
        breakpoint_create(actor=agent, payload=payload, ttl_seconds=3600)[0].pk
        for _ in range(count)
    ]


def per_breakpoint(event_type: str) -> Counter:
    return Counter(Event.objects.filter(type=event_type).values_list("breakpoint_id", flat=True))


def deliveries_per_breakpoint(event_type: str) -> Counter:
    return Counter(
        Delivery.objects.filter(event_type=event_type).values_list("breakpoint_id", flat=True)
    )


@pytest.mark.postgres  # row locks: SELECT ... FOR UPDATE SKIP LOCKED
@pytest.mark.django_db(transaction=True)
def test_overlapping_escalation_sweeps_escalate_each_breakpoint_once(monkeypatch):
    monkeypatch.setattr(outbox, "publish_deliveries", lambda ids: len(ids))  # no broker here
    subscribe("https://example.com/escalated", ["escalated"])
    ids = created(90, escalating(expert="tech-lead"))
    backdate(*ids, field="escalate_at")

    results = run_together({f"sweep-{i}": breakpoints_escalate_due for i in range(4)})

    assert sum(results.values()) == len(ids)
    assert per_breakpoint("escalated") == dict.fromkeys(ids, 1)
    assert deliveries_per_breakpoint("escalated") == dict.fromkeys(ids, 1)
    assert {tuple(e) for e in Breakpoint.objects.values_list("experts", flat=True)} == {
        ("tech-lead", "ops-lead")
    }


@pytest.mark.postgres  # row locks: SELECT ... FOR UPDATE SKIP LOCKED
@pytest.mark.django_db(transaction=True)
def test_overlapping_reminder_sweeps_send_each_reminder_once(monkeypatch):
    monkeypatch.setattr(outbox, "publish_deliveries", lambda ids: len(ids))  # no broker here
    subscribe("https://example.com/reminder", ["reminder"])
    ids = created(90, reminding())
    backdate(*ids, field="remind_at")

    results = run_together({f"sweep-{i}": breakpoints_remind_due for i in range(4)})

    assert sum(results.values()) == len(ids)
    assert per_breakpoint("reminder") == dict.fromkeys(ids, 1)
    assert deliveries_per_breakpoint("reminder") == dict.fromkeys(ids, 1)
    assert set(Breakpoint.objects.values_list("reminders_sent", flat=True)) == {1}


@pytest.mark.postgres  # row locks: SELECT ... FOR UPDATE SKIP LOCKED
@pytest.mark.django_db(transaction=True)
def test_overlapping_nudge_tasks_and_expiry_sweeps_act_once_per_breakpoint():
    nudged = created(40, {**escalating(), "remindEverySeconds": EVERY})
    overdue = created(40, {**escalating(), "remindEverySeconds": EVERY, "onTimeout": "reject"})
    backdate(*nudged, *overdue, field="escalate_at")
    backdate(*nudged, *overdue, field="remind_at")
    backdate(*overdue, field="expires_at")

    works: dict[str, Callable[[], object]] = {
        f"nudge-{i}": tasks.nudge_waiting_breakpoints for i in range(3)
    }
    works.update({f"expire-{i}": breakpoints_expire_due for i in range(2)})
    results = run_together(works)

    assert sum(results[f"nudge-{i}"] for i in range(3)) == 2 * len(nudged)
    assert sum(results[f"expire-{i}"] for i in range(2)) == len(overdue)
    for bp_id in nudged:
        assert sorted(history(bp_id)) == ["escalated", "reminder"]
    for bp_id in overdue:  # past expiresAt: the policy, and no nudge
        assert history(bp_id) == ["released"]
    assert set(Breakpoint.objects.filter(pk__in=overdue).values_list("status", flat=True)) == {
        "released"
    }
