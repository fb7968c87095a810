"""Fault: costly trigger rules and a backlog of large events. The sweeps and the webhook
deliveries do not wait behind them (issue 47, item 7).

Real processes: web, beat, Redis, PostgreSQL, and a worker consuming only the default
queue (`celery`), as the Procfile's `worker` does. Before the fix the evaluation of events
went to that same queue: 10 rules of costly conditions and 12 events of 359 KB kept every
pool process busy, a 2 s breakpoint expired 26 s late and its webhook arrived 28 s late.
Now the evaluations wait on the `triggers` queue for the Procfile's `triggers` worker.

No timed assertion: with a backlog of costly events stored and published, a breakpoint of
a 1 s TTL expires and its webhook arrives; at that moment no event was even claimed (the
default worker never takes one) and every evaluation still waits on `triggers`. Then a
worker for `triggers` alone starts and evaluates them all. The deadlines only end a hung
test.
"""

import httpx
import pytest
import redis

from accounts.tokens import token_create_for_agent
from core import tasknames
from core.actors import Actor
from tests.support.events import post_signed_event
from tests.support.system import System
from triggers import services
from triggers.models import EventSource, EventStatus, ExternalEvent

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "trigger-queue-secret-0123456789"
EVENTS = 6
RULES = 3  # each stops at its 1 s budget (BPM_TRIGGER_RULE_SECONDS): ~3 s of CPU per event
VALUES = 99_000  # about the 359 KB per event
COSTLY = (
    "length([@,@] | [@,@] | [@,@] | [@,@] | [@,@] | [@,@] | "
    "[*][*][*][*][*][*].a[?b[?d[?@ > `5`]]]){} >= `0`"
)


@pytest.fixture
def default_queue_system(make_system) -> System:
    """The Procfile's `worker` (the `celery` queue only), beat and web; no `triggers` worker."""
    return make_system(worker_queues=tasknames.DEFAULT_QUEUE)


@pytest.fixture
def costly_rules(admin_user) -> None:
    EventSource.objects.create(name="ci", kind="generic-hmac", secret=SECRET)
    admin = Actor.for_user(admin_user)
    for number in range(RULES):
        conditions = [COSTLY.format(" " * n) for n in range(10)]
        services.rule_add(
            actor=admin, name=f"costly-{number}", action="forward", conditions=conditions
        )


def send(client: httpx.Client, delivery: str, body: dict) -> int:
    return post_signed_event(client, "ci", SECRET, delivery, body).status_code


def waiting_on(system: System, queue: str) -> int:
    client = redis.Redis.from_url(system.redis.url)
    try:
        return int(client.llen(queue))
    finally:
        client.close()


def test_a_due_breakpoint_expires_and_its_webhook_arrives_while_evaluations_wait(
    default_queue_system, costly_rules, make_receiver, subscribe
):
    system = default_queue_system
    receiver = make_receiver()
    subscribe(receiver.url, ["expired"])
    agent = token_create_for_agent(agent_id="agent-q")[1]
    large = {"type": "big", "a": [{"b": [{"d": [1] * VALUES}]}]}
    with httpx.Client(base_url=system.base_url, timeout=60) as client:
        assert [send(client, f"big-{n}", large) for n in range(EVENTS)] == [202] * EVENTS
        created = client.post(
            "/api/breakpoints",
            json={"payload": {"question": "Due soon?"}, "ttlSeconds": 1},
            headers={"Authorization": f"Bearer {agent}"},
        )
    assert created.status_code == 201, created.text
    bp_id = created.json()["breakpointId"]

    receiver.wait_for(
        lambda got: any(r.json()["data"]["breakpointId"] == bp_id for r in got),
        timeout=60,
        what="the expired breakpoint's webhook",
    )

    events = ExternalEvent.objects.filter(source__name="ci")
    untouched = events.filter(status=EventStatus.PENDING, attempts=0, locked_until=None)
    assert untouched.count() == EVENTS, "the default worker evaluated events"
    assert waiting_on(system, tasknames.TRIGGERS_QUEUE) >= EVENTS

    system.start_worker(queues=tasknames.TRIGGERS_QUEUE)  # the Procfile's `triggers`
    system.wait_until(
        lambda: events.filter(status=EventStatus.PROCESSED).count() == EVENTS,
        what="the triggers worker to evaluate the backlog",
        timeout=180,
    )
