"""Fault: a costly evaluation in the worker. Ingest for the same source is not held by it.

Real processes (web, a worker with two pool processes, beat, Redis, PostgreSQL). A rule of
20 costly conditions (the issue's nested filters over 64 copies of a 99,000-value event)
keeps one pool process evaluating for as long as the task's time limit allows (the
budgets are raised here so that nothing else stops it; each condition alone is seconds
of work on any machine). Before the fix that evaluation held a lock on the event's
source for its whole length: each ingest for that source waited at COMMIT on its
foreign-key check, holding a web thread (the issue: 42.8 s per small event, an
authenticated list 40 s).

No timed assertion: the test waits until the worker has claimed the large event, then
ingests 20 small signed events over HTTP and reads the event list, and checks that the
large event's evaluation was still running after all of them answered (still pending,
under the same claim, no error). The deadlines only end a hung test.
"""

from collections.abc import Iterator

import httpx
import pytest

from accounts.tokens import token_create_for_user
from breakpoints.models import Breakpoint
from core.actors import Actor
from core.limits import MAX_CONDITIONS
from tests.support.events import post_signed_event
from tests.support.system import System
from triggers import services
from triggers.models import EventSource, EventStatus, ExternalEvent

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "evaluation-fault-secret-0123456789"
SMALL_EVENTS = 20
VALUES = 99_000  # in the large event's one list (an event holds at most 100,000 values)
# The nested filters over 64 copies of the event (within the limits of a rule's
# shape); the spaces make 20 distinct conditions.
COSTLY = (
    "length([@,@] | [@,@] | [@,@] | [@,@] | [@,@] | [@,@] | "
    "[*][*][*][*][*][*].a[?b[?d[?@ > `5`]]]){} >= `0`"
)


@pytest.fixture
def loaded_system(make_system) -> System:
    return make_system(
        worker_concurrency=2,
        env={
            "BPM_TRIGGER_EXPRESSION_STEPS": str(10**12),
            "BPM_TRIGGER_RULE_SECONDS": "3600",
        },
    )


@pytest.fixture
def admin_http(loaded_system, admin_user) -> Iterator[httpx.Client]:
    raw = token_create_for_user(user=admin_user)[1]
    with httpx.Client(
        base_url=loaded_system.base_url, headers={"Authorization": f"Bearer {raw}"}, timeout=60
    ) as client:
        yield client


@pytest.fixture
def rules(admin_user) -> None:
    EventSource.objects.create(name="ci", kind="generic-hmac", secret=SECRET)
    admin = Actor.for_user(admin_user)
    conditions = [COSTLY.format(" " * n) for n in range(MAX_CONDITIONS)]
    services.rule_add(
        actor=admin, name="costly", action="forward", event_type="big", conditions=conditions
    )
    services.rule_add(
        actor=admin,
        name="ask",
        action="create",
        event_type="small",
        params={"question": "Deploy {{ run }}?", "runId": "{{ run }}"},
    )


def send(client: httpx.Client, delivery: str, body: dict) -> httpx.Response:
    return post_signed_event(client, "ci", SECRET, delivery, body)


def test_ingest_answers_while_a_costly_evaluation_of_the_same_source_runs(
    loaded_system, admin_http, rules
):
    system = loaded_system
    large = {"type": "big", "a": [{"b": [{"d": [1] * VALUES}]}]}
    with httpx.Client(base_url=system.base_url, timeout=60) as sender:
        assert send(sender, "large", large).status_code == 202
        claimed = system.wait_until(
            lambda: ExternalEvent.objects.filter(
                delivery_id="large", locked_until__isnull=False
            ).first(),
            what="the worker to claim the large event",
            timeout=60,
        )

        answers = [
            send(sender, f"small-{n}", {"type": "small", "run": f"r-{n}"}).status_code
            for n in range(SMALL_EVENTS)
        ]
        listed = admin_http.get("/api/events", params={"source": "ci"})

    still = ExternalEvent.objects.get(pk=claimed.pk)
    assert answers == [202] * SMALL_EVENTS
    assert listed.status_code == 200, listed.text
    assert (still.status, still.locked_until, still.error) == (
        EventStatus.PENDING,
        claimed.locked_until,
        "",
    ), "the large event's evaluation ended before the ingests answered: nothing was proven"
    # The other pool process evaluates the small events meanwhile: the rules act.
    system.wait_until(
        lambda: Breakpoint.objects.filter(run_id__startswith="r-").count() == SMALL_EVENTS,
        what="the small events' breakpoints",
        timeout=120,
    )
    assert ExternalEvent.objects.get(pk=claimed.pk).status == EventStatus.PENDING
    system.kill_worker()  # no need to burn a core until the task's time limit


def test_a_rules_dry_run_on_a_costly_event_stops_at_the_rules_time_limit(make_system, admin_user):
    """The dry run (`/test`) runs in a web thread: it stops at the rule's time limit
    (BPM_TRIGGER_RULE_SECONDS, 1 s by default) and answers the rule's error, whatever the
    step budget allows (raised here so that only the clock can stop it). Before, nothing
    bounded its time: the issue's 10 such conditions held a web thread 37 s."""
    system = make_system(beat=False, env={"BPM_TRIGGER_EXPRESSION_STEPS": str(10**12)})
    admin = Actor.for_user(admin_user)
    services.rule_add(
        actor=admin,
        name="costly",
        action="forward",
        event_type="big",
        conditions=[COSTLY.format("")],
    )
    raw = token_create_for_user(user=admin_user)[1]
    sample = {"type": "big", "payload": {"a": [{"b": [{"d": [1] * VALUES}]}]}}

    answer = httpx.post(
        f"{system.base_url}/api/triggers/costly/test",
        json=sample,
        headers={"Authorization": f"Bearer {raw}"},
        timeout=120,  # only ends a hung test
    )

    assert answer.status_code == 200, answer.text
    assert "time limit" in (answer.json().get("error") or ""), answer.json()
