"""Fault: one slow webhook receiver. Another subscriber's deliveries do not wait behind it.

Real processes (web, a worker with two pool processes, beat, Redis, PostgreSQL) and two
receivers on 127.0.0.1: the slow one holds every request SLOW_SECONDS. Before the
per-target cap the worker took deliveries in arrival order, so the fast subscriber's k-th
delivery arrived only after the slow one's k-th answer.

No timed assertion: the checks compare the order in which the two receivers saw
requests, and count requests in flight at once. The deadlines only end a hung test.
"""

from collections.abc import Iterator

import httpx
import pytest

from accounts.tokens import token_create_for_agent
from notifications.models import Delivery
from tests.support.system import System

pytestmark = pytest.mark.django_db(transaction=True)

BREAKPOINTS = 16
SLOW_SECONDS = 2.0
# The slow receiver answers at most this many before the fast one has all of its
# deliveries; in arrival order it would have answered about all of them.
SLOW_ANSWERS_BOUND = BREAKPOINTS // 4


@pytest.fixture
def two_process_system(make_system) -> System:
    return make_system(worker_concurrency=2)


@pytest.fixture
def agent(two_process_system, transactional_db) -> Iterator[httpx.Client]:
    raw = token_create_for_agent(agent_id="agent-a")[1]
    with httpx.Client(
        base_url=two_process_system.base_url,
        headers={"Authorization": f"Bearer {raw}"},
        timeout=20,
    ) as client:
        yield client


def create(agent: httpx.Client, number: int) -> str:
    response = agent.post("/api/breakpoints", json={"payload": {"question": f"Step {number}?"}})
    assert response.status_code == 201, response.text
    return response.json()["breakpointId"]


def breakpoint_ids(received) -> list[str]:
    return sorted(r.json()["data"]["breakpointId"] for r in received)


def test_a_slow_receiver_does_not_hold_up_another_subscribers_deliveries(
    two_process_system, agent, make_receiver, subscribe
):
    system = two_process_system
    slow = make_receiver(hold_first=10**6, hold_seconds=SLOW_SECONDS)
    fast = make_receiver()
    subscribe(slow.url, ["created"])
    subscribe(fast.url, ["created"])

    created = sorted(create(agent, number) for number in range(BREAKPOINTS))

    fast_got = fast.wait_for(
        lambda got: len(got) >= BREAKPOINTS, timeout=120, what="every delivery to the fast one"
    )
    last_fast = max(r.received_at for r in fast_got)
    slow_before = [r for r in slow.received if r.received_at <= last_fast]
    assert len(slow_before) <= SLOW_ANSWERS_BOUND, (
        f"the fast subscriber waited behind the slow one: {len(slow_before)} requests "
        f"reached the slow receiver before the fast one's last\n{system.logs()}"
    )
    # The slow one gets everything too, once each, never more than one at a time.
    slow_got = slow.wait_for(
        lambda got: len(got) >= BREAKPOINTS,
        timeout=BREAKPOINTS * SLOW_SECONDS + 90,
        what="every delivery to the slow one",
    )
    system.wait_until(
        lambda: Delivery.objects.filter(status="delivered").count() == 2 * BREAKPOINTS,
        what="every delivery marked delivered",
    )
    assert breakpoint_ids(slow_got) == breakpoint_ids(fast.received) == created
    assert len({r.webhook_id for r in slow.received + fast.received}) == 2 * BREAKPOINTS
    assert slow.max_in_flight == 1
    assert Delivery.objects.filter(attempts=1).count() == 2 * BREAKPOINTS
