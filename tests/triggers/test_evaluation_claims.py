"""Evaluating an event holds no lock that ingest needs, and still acts once.

The worker claims the event (its row alone, a short transaction), evaluates the rules
with no transaction open, and records the outcome in a second short transaction that
checks the claim is still its own. A hook in the middle of the evaluation (the
condition step, patched to wait on threading Events: no sleeps) holds it there.

The lock tests need PostgreSQL: SQLite has no row locks (it serialises writers), so they
are deselected there (marked `postgres`); `make test` runs them against the real
PostgreSQL (.ci/run). The
claim tests run on both.
"""

import json
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest
from django.db import connection, connections, transaction
from django.test import Client
from django.utils import timezone

from audit.models import Event, EventType
from breakpoints.models import Breakpoint
from core.actors import Actor
from triggers import services
from triggers.models import EventSource, EventStatus, ExternalEvent
from triggers.services import evaluate
from triggers.verification import sign_generic

SECRET = "claims-secret-0123456789abcdef"
HELD = 30  # seconds a hook waits for the test at most (only ends a hung test)

# Row locks need PostgreSQL (SQLite serialises writers): deselected on SQLite (tests/conftest).
postgresql_only = pytest.mark.postgres


@pytest.fixture
def source(db) -> EventSource:
    return EventSource.objects.create(name="ci", kind="generic-hmac", secret=SECRET)


@pytest.fixture
def rules(admin_user, source) -> None:
    """A release by runId and a create, both on every event whose `ok` holds."""
    admin = Actor.for_user(admin_user)
    services.rule_add(
        actor=admin,
        name="release-run",
        action="release",
        conditions=["ok"],
        params={"selector": {"runId": "{{ run }}"}, "feedback": "CI {{ run }} passed"},
    )
    services.rule_add(
        actor=admin,
        name="ask-to-deploy",
        action="create",
        conditions=["ok"],
        params={"question": "Deploy {{ run }}?", "runId": "deploy-{{ run }}"},
    )


def stored_event(source: EventSource, delivery: str = "d-1") -> ExternalEvent:
    return ExternalEvent.objects.create(
        source=source,
        type="ci.done",
        delivery_id=delivery,
        payload={"ok": True, "run": "r-1"},
        next_attempt_at=timezone.now(),
    )


def signed_post(client: Client, delivery: str):
    body = json.dumps({"type": "ci.done", "ok": True, "run": "r-2"}).encode()
    stamp = int(time.time())
    return client.post(
        "/api/events/ci",
        data=body,
        content_type="application/json",
        headers={
            "X-Bpm-Timestamp": str(stamp),
            "X-Bpm-Signature": sign_generic(SECRET, body, stamp),
            "X-Bpm-Event-Id": delivery,
        },
    )


class ConditionHook:
    """The evaluation's condition step, patched: the first call runs `during` (or, in a
    thread, says it started and waits until released), then the real step."""

    def __init__(self, monkeypatch, during: Callable[[], object] | None = None) -> None:
        self.real = evaluate.holds
        self.during = during
        self.started, self.release = threading.Event(), threading.Event()
        self.calls = 0
        monkeypatch.setattr(evaluate, "holds", self)

    def __call__(self, *args, **kwargs) -> bool:
        self.calls += 1
        if self.calls == 1:
            if self.during is not None:
                self.during()
            else:
                self.started.set()
                assert self.release.wait(HELD), "the test never released the evaluation"
        return self.real(*args, **kwargs)


@pytest.fixture
def in_thread() -> Iterator[Callable[[Callable[[], object]], dict]]:
    """Run work in a thread (its own connection, closed after); join it at teardown."""
    threads: list[threading.Thread] = []

    def start(work: Callable[[], object]) -> dict:
        box: dict = {}

        def target() -> None:
            try:
                box["result"] = work()
            except BaseException as exc:  # noqa: BLE001 - the test looks at it
                box["error"] = exc
            finally:
                connections.close_all()

        thread = threading.Thread(target=target)
        thread.start()
        threads.append(thread)
        box["thread"] = thread
        return box

    yield start
    for thread in threads:
        thread.join(timeout=HELD + 10)
        assert not thread.is_alive(), "an evaluation hung"


# --- the event's row alone is locked, and not while the rules are evaluated ---------------


@postgresql_only
def test_an_ingest_for_the_same_source_commits_while_an_evaluation_runs(
    transactional_db, source, rules, monkeypatch, in_thread
):
    """The issue's stall: the evaluation locked the source row (select_related without
    `of`) for its whole length, and every ingest's foreign-key check waited on it. Here
    the ingest's connection refuses to wait (lock_timeout): it must commit at once."""
    event = stored_event(source)
    hook = ConditionHook(monkeypatch)
    worker = in_thread(lambda: services.event_evaluate(event.pk))
    assert hook.started.wait(HELD), worker.get("error")

    with connection.cursor() as cursor:
        cursor.execute("SET lock_timeout = '1s'")
    try:
        response = signed_post(Client(raise_request_exception=False), "d-2")
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET lock_timeout")
        hook.release.set()
        worker["thread"].join(HELD)

    assert response.status_code == 202, response.content
    assert worker.get("result") == "processed", worker.get("error")
    second = ExternalEvent.objects.get(delivery_id="d-2")
    assert second.status == EventStatus.PENDING  # stored; its own evaluation comes later
    assert ExternalEvent.objects.get(pk=event.pk).status == EventStatus.PROCESSED


@postgresql_only
def test_no_transaction_is_open_while_the_rules_are_evaluated(
    transactional_db, source, rules, monkeypatch, in_thread
):
    """Nothing at all is locked mid-evaluation: the event's row can be locked NOWAIT by
    another connection, and the source's too."""
    event = stored_event(source)
    hook = ConditionHook(monkeypatch)
    worker = in_thread(lambda: services.event_evaluate(event.pk))
    assert hook.started.wait(HELD), worker.get("error")
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                "SELECT 1 FROM triggers_externalevent WHERE id = %s FOR UPDATE NOWAIT",
                [event.pk],
            )
            cursor.execute(
                "SELECT 1 FROM triggers_eventsource WHERE id = %s FOR UPDATE NOWAIT",
                [source.pk],
            )
    finally:
        hook.release.set()
        worker["thread"].join(HELD)

    assert worker.get("result") == "processed", worker.get("error")


@postgresql_only
def test_a_second_worker_skips_an_event_being_evaluated_and_it_acts_once(
    transactional_db, source, rules, monkeypatch, in_thread, make_breakpoint
):
    waiting = make_breakpoint(run_id="r-1")
    event = stored_event(source)
    hook = ConditionHook(monkeypatch)
    first = in_thread(lambda: services.event_evaluate(event.pk))
    assert hook.started.wait(HELD), first.get("error")
    try:
        second = services.event_evaluate(event.pk)
    finally:
        hook.release.set()
        first["thread"].join(HELD)

    assert (first.get("result"), second) == ("processed", "skipped"), first.get("error")
    assert Breakpoint.objects.get(pk=waiting.pk).status == "released"
    assert Event.objects.filter(type=EventType.RELEASED).count() == 1
    assert Breakpoint.objects.filter(run_id="deploy-r-1").count() == 1
    stored = ExternalEvent.objects.get(pk=event.pk)
    assert (stored.status, stored.attempts, stored.locked_until) == ("processed", 1, None)


# --- claims: a lost worker's event comes back, a stale worker records nothing ---------------


def test_an_event_under_a_live_claim_is_neither_due_nor_evaluated(source, rules):
    event = stored_event(source)
    ExternalEvent.objects.filter(pk=event.pk).update(
        locked_until=timezone.now() + timedelta(minutes=1), attempts=1
    )

    assert services.events_due() == []
    assert services.event_evaluate(event.pk) == "skipped"
    assert ExternalEvent.objects.get(pk=event.pk).status == EventStatus.PENDING


def test_a_lost_workers_event_is_retried_by_the_sweep_once_its_claim_lapses(source, rules):
    """A worker killed mid-evaluation leaves its claim; once it lapses the sweep publishes
    the event, that attempt is recorded as failed with the usual backoff, and the retry
    after it evaluates the event."""
    event = stored_event(source)
    lapsed = timezone.now() - timedelta(seconds=1)
    ExternalEvent.objects.filter(pk=event.pk).update(locked_until=lapsed, attempts=1)

    assert services.events_due() == [event.pk]
    assert services.event_evaluate(event.pk) == "skipped"
    stored = ExternalEvent.objects.get(pk=event.pk)
    assert (stored.status, stored.attempts, stored.locked_until) == ("pending", 1, None)
    assert stored.error == evaluate.LOST
    assert stored.next_attempt_at > timezone.now()  # the backoff of a failed attempt
    assert services.events_due() == []

    ExternalEvent.objects.filter(pk=event.pk).update(next_attempt_at=timezone.now())
    assert services.event_evaluate(event.pk) == "processed"
    stored = ExternalEvent.objects.get(pk=event.pk)
    assert (stored.status, stored.attempts, stored.error) == ("processed", 2, "")


def test_an_event_whose_workers_keep_getting_lost_fails_after_the_last_attempt(source, rules):
    event = stored_event(source)
    lapsed = timezone.now() - timedelta(seconds=1)
    ExternalEvent.objects.filter(pk=event.pk).update(
        locked_until=lapsed, attempts=evaluate.MAX_ATTEMPTS
    )

    assert services.event_evaluate(event.pk) == "skipped"

    stored = ExternalEvent.objects.get(pk=event.pk)
    assert (stored.status, stored.error) == (EventStatus.FAILED, evaluate.LOST)


def test_a_worker_whose_claim_was_taken_over_records_nothing(
    source, rules, monkeypatch, make_breakpoint
):
    """A worker still evaluating when its claim lapsed (and another took the event over)
    finds the claim gone when it comes to record: it takes no action, so the event's
    actions are taken once, by the worker holding the claim."""
    waiting = make_breakpoint(run_id="r-1")
    event = stored_event(source)

    def lapse_and_take_over() -> None:
        ExternalEvent.objects.filter(pk=event.pk).update(
            locked_until=timezone.now() - timedelta(seconds=1)
        )
        assert services.event_evaluate(event.pk) == "skipped"  # the lost attempt recorded
        ExternalEvent.objects.filter(pk=event.pk).update(next_attempt_at=timezone.now())
        assert services.event_evaluate(event.pk) == "processed"  # the retry

    ConditionHook(monkeypatch, during=lapse_and_take_over)

    assert services.event_evaluate(event.pk) == "skipped"

    stored = ExternalEvent.objects.get(pk=event.pk)
    assert (stored.status, stored.attempts) == (EventStatus.PROCESSED, 2)
    assert Breakpoint.objects.get(pk=waiting.pk).status == "released"
    assert Event.objects.filter(type=EventType.RELEASED).count() == 1
    assert Event.objects.filter(type=EventType.REFUSED).count() == 0
    assert Breakpoint.objects.filter(run_id="deploy-r-1").count() == 1
