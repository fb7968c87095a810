"""Faults: the broker down at commit time or killed mid-delivery, a worker killed. Nothing is lost."""

import time
from collections import Counter

import pytest
from standardwebhooks.webhooks import Webhook as StandardWebhook

from audit.models import Event
from notifications.models import Delivery
from tests.support.system import LEASE_SECONDS, PROCFILE_WORKER, SWEEP_SECONDS

pytestmark = pytest.mark.django_db(transaction=True)

CREATE_BOUND_SECONDS = 10.0  # generous: a hang on the broker is the bug
BATCH = 8  # breakpoints created while the broker is down
OUTAGE_SECONDS = 10.0


def create(agent_http, question: str) -> tuple[dict, float]:
    started = time.monotonic()
    response = agent_http.post("/api/breakpoints", json={"payload": {"question": question}})
    elapsed = time.monotonic() - started
    assert response.status_code == 201, response.text
    return response.json(), elapsed


def created_delivery(bp_id: str) -> Delivery:
    return Delivery.objects.get(breakpoint_id=bp_id, event_type="created")


def notifications(delivery_id: str) -> list[Event]:
    return list(
        Event.objects.filter(type="notification", metadata__deliveryId=delivery_id).order_by(
            "timestamp", "id"
        )
    )


def test_broker_down_create_still_answers_201_and_the_webhook_arrives_once_later(
    system, agent_http, make_receiver, subscribe, redis_server
):
    receiver = make_receiver()
    webhook = subscribe(receiver.url, ["created"])
    # Warm up: the web process has published through Redis before the outage.
    warm, _ = create(agent_http, "Before the outage?")
    receiver.wait_for(lambda got: len(got) == 1, timeout=30, what="the warm-up webhook")

    redis_server.stop()
    bp, elapsed = create(agent_http, "During the outage?")

    assert elapsed < CREATE_BOUND_SECONDS, f"POST took {elapsed:.1f}s with the broker down"
    print(f"\nPOST /api/breakpoints with the broker down answered 201 in {elapsed:.2f}s")
    assert bp["status"] == "waiting"
    delivery = created_delivery(bp["breakpointId"])
    assert (delivery.status, delivery.attempts) == ("pending", 0)
    readiness = agent_http.get("/readyz")
    assert readiness.status_code == 503
    assert readiness.json()["checks"]["broker"] != "ok"
    assert readiness.json()["checks"]["database"] == "ok"
    time.sleep(2 * SWEEP_SECONDS)
    assert receiver.with_id(delivery.pk) == []  # no broker, no delivery (yet)
    assert created_delivery(bp["breakpointId"]).status == "pending"

    redis_server.start()  # same port, empty: the message published at commit is gone
    restarted = time.monotonic()

    receiver.wait_for(
        lambda got: any(r.webhook_id == delivery.pk for r in got),
        timeout=45,
        what="the webhook created during the outage",
    )
    outage_recovered_after = time.monotonic() - restarted
    [arrived] = receiver.with_id(delivery.pk)
    assert arrived.json()["data"]["breakpointId"] == bp["breakpointId"]
    StandardWebhook(webhook.secret).verify(arrived.body, arrived.headers)
    system.wait_until(
        lambda: created_delivery(bp["breakpointId"]).status == "delivered",
        what="the delivery row to be marked delivered",
    )
    print(f"delivered {outage_recovered_after:.1f}s after the broker came back")
    time.sleep(3 * SWEEP_SECONDS)  # more sweeps: nothing is sent twice
    assert len(receiver.with_id(delivery.pk)) == 1
    assert len(receiver.received) == 2  # the warm-up one and this one, once each
    stored = created_delivery(bp["breakpointId"])
    assert (stored.status, stored.attempts, stored.last_status_code) == ("delivered", 1, 200)
    assert [e.metadata["outcome"] for e in notifications(delivery.pk)] == ["delivered"]
    assert agent_http.get("/readyz").status_code == 200
    assert created_delivery(warm["breakpointId"]).status == "delivered"


def test_worker_killed_mid_delivery_leads_to_a_redelivery_not_a_loss(
    system, agent_http, make_receiver, subscribe
):
    # The first request is held long enough for the test to kill the worker that sent it.
    receiver = make_receiver(hold_first=1, hold_seconds=20)
    webhook = subscribe(receiver.url, ["created"])

    bp, _ = create(agent_http, "Survive a crash?")
    [first] = receiver.wait_for(lambda got: len(got) >= 1, timeout=30, what="the first send")
    delivery = created_delivery(bp["breakpointId"])
    assert first.webhook_id == delivery.pk
    # In flight: claimed (leased) by the worker; the claim already counts the attempt.
    assert (delivery.status, delivery.attempts) == ("pending", 1)
    assert delivery.locked_until is not None

    returncode = system.kill_worker()  # SIGKILL the worker and its pool child, mid-request
    killed_at = time.monotonic()
    assert returncode == -9
    assert created_delivery(bp["breakpointId"]).status == "pending"  # nothing recorded
    system.start_worker()

    got = receiver.wait_for(
        lambda got: len([r for r in got if r.webhook_id == delivery.pk]) >= 2,
        timeout=30,
        what="the redelivery after the worker was killed",
    )
    redelivery_after = time.monotonic() - killed_at
    second = [r for r in got if r.webhook_id == delivery.pk][1]
    assert second.body == first.body
    StandardWebhook(webhook.secret).verify(second.body, second.headers)
    system.wait_until(
        lambda: created_delivery(bp["breakpointId"]).status == "delivered",
        what="the redelivered row to be marked delivered",
    )
    print(f"\nredelivered {redelivery_after:.1f}s after the worker was killed")
    # The lease had to run out first: a live lease is never stolen.
    assert second.received_at - first.received_at >= LEASE_SECONDS - 0.5
    time.sleep(2 * SWEEP_SECONDS)
    assert len(receiver.with_id(delivery.pk)) == 2  # the killed send and one redelivery
    stored = created_delivery(bp["breakpointId"])
    assert (stored.status, stored.last_status_code, stored.locked_until) == ("delivered", 200, None)
    [event] = notifications(delivery.pk)  # the killed attempt never got to record itself
    assert event.actor == "system:webhooks"
    assert (event.metadata["outcome"], event.metadata["statusCode"]) == ("delivered", 200)
    # The killed send used up an attempt too.
    assert (stored.attempts, event.metadata["attempt"]) == (2, 2)


@pytest.mark.parametrize("system_options", [PROCFILE_WORKER])
def test_broker_killed_mid_delivery_leaves_the_worker_running_and_delivers_all_once(
    system, agent_http, make_receiver, subscribe, redis_server
):
    """kill -9 on Redis while a delivery is in flight, back 10 s later: no restart, none lost.

    The worker runs as the Procfile's does (two pool processes, remote control and gossip on):
    one process is sending (its message unacknowledged: acks_late) while the consumer waits
    on Redis for the next message. Before infra/broker.py the worker exited here with
    "Unrecoverable error: AttributeError('NoneType' object has no attribute 'hostname')".
    """
    receiver = make_receiver(hold_first=1, hold_seconds=60)  # until release_held()
    subscribe(receiver.url, ["created"])
    first, _ = create(agent_http, "In flight when the broker dies?")
    expected = {created_delivery(first["breakpointId"]).pk}
    worker = system.worker
    system.wait_until(lambda: len(receiver.received) == 1, what="the first delivery to start")
    time.sleep(1)  # the other pool process is idle: the consumer waits on Redis

    redis_server.kill()
    killed_at = time.monotonic()
    time.sleep(2)  # the worker sees the connection drop (and used to die of it)
    receiver.release_held()  # the delivery in flight completes while Redis is down
    # More work during the outage: created (201), its deliveries pending in the outbox.
    expected |= {
        created_delivery(create(agent_http, f"During the outage {n}?")[0]["breakpointId"]).pk
        for n in range(BATCH)
    }
    time.sleep(max(0.0, OUTAGE_SECONDS - (time.monotonic() - killed_at)))
    assert worker.alive, f"the worker died with the broker:\n{worker.output()}"
    redis_server.start()  # same port, empty: every queued message is gone

    system.wait_until(
        lambda: {r.webhook_id for r in receiver.received} >= expected,
        what="every delivery after the broker came back",
        timeout=120,
    )
    system.wait_until(
        lambda: (
            set(Delivery.objects.filter(pk__in=expected).values_list("status", flat=True))
            == {"delivered"}
        ),
        what="every delivery row to be marked delivered",
    )
    print(f"\nall {len(expected)} delivered {time.monotonic() - killed_at:.1f}s after the kill")
    time.sleep(3 * SWEEP_SECONDS)  # more sweeps: nothing is sent twice
    assert Counter(r.webhook_id for r in receiver.received) == dict.fromkeys(expected, 1)
    assert worker is system.worker and worker.alive  # the same worker, never restarted
    assert "Unrecoverable error" not in worker.output(last=500_000)
    assert system.beat.alive
    assert agent_http.get("/readyz").status_code == 200
