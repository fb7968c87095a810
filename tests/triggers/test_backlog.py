"""Costly trigger rules starve nothing (issue 47, item 7).

10 rules of 10 costly conditions and 12 events of 359 KB kept every worker process busy:
a 2 s breakpoint expired 26 s late, a webhook arrived 28 s late. Now:

- the evaluation of events runs on a queue of its own (`triggers`), consumed by a worker of
  its own (the Procfile's and compose.yaml's `triggers`; make run's one worker takes both
  queues); the sweeps and
  the deliveries stay on `celery`, which that worker never takes. Asserted here on the real
  Celery app's routing and on the files that start the workers; tests/live/integration/
  test_trigger_queue.py shows a due breakpoint expiring while a backlog sits on `triggers`;
- a source's backlog is bounded: past BPM_TRIGGER_MAX_PENDING_EVENTS of its events waiting
  for evaluation, its deliveries are answered 429 with Retry-After, nothing stored.
"""

import json
import re
import shlex
import time
import uuid

import pytest
import yaml
from rest_framework.test import APIClient

from config.celery import app
from core import tasknames
from tests.support.project import ROOT
from triggers import services
from triggers.models import EventSource, EventStatus, ExternalEvent
from triggers.services.ingest import BACKLOG_RETRY_SECONDS
from triggers.verification import sign_generic

SECRET = "backlog-secret-0123456789abcdef"


# --- the queues ---------------------------------------------------------------------------


def queue_of(task_name: str) -> str:
    """The queue the real Celery app sends `task_name` to (by name, as infra.publishing)."""
    return app.amqp.router.route({}, task_name, (), {})["queue"].name


def test_the_evaluation_of_events_has_a_queue_of_its_own():
    assert queue_of(tasknames.EVALUATE_EVENT) == tasknames.TRIGGERS_QUEUE == "triggers"


def test_the_sweeps_and_the_deliveries_are_never_on_the_triggers_queue():
    app.loader.import_default_modules()
    scheduled = {entry["task"] for entry in app.conf.beat_schedule.values()}
    others = (set(tasknames.PUBLISHED) | scheduled) - {tasknames.EVALUATE_EVENT}
    assert {tasknames.EXPIRE_DUE, tasknames.DELIVER, tasknames.DELIVER_MANY} <= others
    assert {name: queue_of(name) for name in others} == dict.fromkeys(others, "celery")


def test_a_worker_started_without_queues_consumes_both():
    """A worker without --queues (an old deployment's, the test systems') still evaluates."""
    assert set(app.amqp.queues) == {"celery", "triggers"}


def procfile(name: str) -> dict[str, list[str]]:
    lines = (ROOT / name).read_text().splitlines()
    return {
        line.partition(":")[0]: shlex.split(line.partition(":")[2])
        for line in lines
        if re.match(r"^\w+:", line)
    }


def consumed(command: list[str]) -> set[str]:
    assert command[0] == "celery" and "worker" in command, command
    return set(command[command.index("--queues") + 1].split(","))


def test_the_procfile_runs_a_worker_per_queue():
    processes = procfile("Procfile")
    assert consumed(processes["worker"]) == {"celery"}
    assert consumed(processes["triggers"]) == {"triggers"}
    # Two workers on one machine need two node names.
    assert processes["triggers"][processes["triggers"].index("--hostname") + 1] == "triggers@%h"


def test_make_runs_one_worker_consumes_both_queues():
    """make run (Procfile.dev) on a development machine: one worker, so events are still
    evaluated; a second one doubled what its stop takes (tests/live/test_make_run_stop.py)."""
    processes = procfile("Procfile.dev")
    assert consumed(processes["worker"]) == {"celery", "triggers"}
    assert "triggers" not in processes


def test_compose_starts_the_triggers_worker_in_a_role_the_entrypoint_knows():
    services_ = yaml.safe_load((ROOT / "compose.yaml").read_text())["services"]
    assert services_["triggers"]["command"] == ["triggers"]
    assert "triggers@" in " ".join(services_["triggers"]["healthcheck"]["test"])
    entrypoint = (ROOT / "deploy" / "entrypoint.sh").read_text()
    assert "  worker | triggers | beat)" in entrypoint


# --- the backlog --------------------------------------------------------------------------


@pytest.fixture
def sources(admin) -> dict[str, EventSource]:
    return {
        name: services.source_add(actor=admin, name=name, kind="generic-hmac", secret=SECRET)
        for name in ("busy", "quiet")
    }


def deliver(source: str, delivery: str | None = None) -> object:
    raw = json.dumps({"type": "ping"}).encode()
    stamp = int(time.time())
    return APIClient().post(
        f"/api/events/{source}",
        data=raw,
        content_type="application/json",
        HTTP_X_BPM_TIMESTAMP=str(stamp),
        HTTP_X_BPM_SIGNATURE=sign_generic(SECRET, raw, stamp),
        HTTP_X_BPM_EVENT_ID=delivery or str(uuid.uuid4()),
    )


def test_past_the_backlog_bound_a_source_is_answered_429_and_nothing_is_stored(sources, settings):
    settings.BPM_TRIGGER_MAX_PENDING_EVENTS = 3

    answers = [deliver("busy") for _ in range(4)]

    assert [a.status_code for a in answers] == [202, 202, 202, 429]
    refused = answers[-1]
    assert refused["Retry-After"] == str(BACKLOG_RETRY_SECONDS)
    error = refused.json()["error"]
    assert error["code"] == "throttled"
    assert "3 events waiting for evaluation" in error["message"]
    assert ExternalEvent.objects.filter(source=sources["busy"]).count() == 3
    assert deliver("quiet").status_code == 202  # another source's backlog is its own


def test_a_redelivery_past_the_bound_is_still_answered_as_one(sources, settings):
    settings.BPM_TRIGGER_MAX_PENDING_EVENTS = 2
    first = deliver("busy", "d-1")
    deliver("busy", "d-2")

    again = deliver("busy", "d-1")

    assert again.status_code == 200
    assert again.json() == {"eventId": first.json()["eventId"], "duplicate": True}


def test_once_an_event_is_evaluated_the_source_is_taken_again(sources, settings):
    settings.BPM_TRIGGER_MAX_PENDING_EVENTS = 2
    first, _ = deliver("busy"), deliver("busy")
    assert deliver("busy").status_code == 429

    assert services.event_evaluate(first.json()["eventId"]) == "processed"

    assert deliver("busy").status_code == 202
    pending = ExternalEvent.objects.filter(source=sources["busy"], status=EventStatus.PENDING)
    assert pending.count() == 2


def test_zero_lifts_the_bound(sources, settings):
    settings.BPM_TRIGGER_MAX_PENDING_EVENTS = 0
    assert [deliver("busy").status_code for _ in range(3)] == [202] * 3


def test_the_sweep_publishes_a_waiting_event_once_a_minute_not_once_a_sweep(sources, sent_tasks):
    """Behind a busy `triggers` worker, a waiting event's messages do not pile up: the sweep
    (every 15 s) publishes it again only once REPUBLISH_AFTER has passed."""
    from datetime import timedelta

    from django.utils import timezone

    from triggers.services.evaluate import REPUBLISH_AFTER
    from triggers.tasks import dispatch_due_events

    event_id = deliver("busy").json()["eventId"]  # (its publish on commit: not in a test)

    sweeps = [dispatch_due_events() for _ in range(3)]

    evaluations = [args for name, args, _ in sent_tasks if name == tasknames.EVALUATE_EVENT]
    assert sweeps == [1, 0, 0]  # a lost first publish is covered by the first sweep
    assert evaluations == [(event_id,)]
    later = timezone.now() - REPUBLISH_AFTER - timedelta(seconds=1)
    ExternalEvent.objects.filter(pk=event_id).update(next_attempt_at=later)
    assert dispatch_due_events() == 1  # still waiting a minute later: published again
