"""A real Celery worker on a real Redis delivers signed webhooks; beat sweeps retries and TTLs."""

import time

import pytest
from django.utils import timezone
from standardwebhooks.webhooks import Webhook as StandardWebhook

from audit.models import Event
from breakpoints.models import Breakpoint
from notifications.models import Delivery
from tests.support.api import parse_time
from tests.support.system import SWEEP_SECONDS
from tests.support.webhook_receiver import expected_signature

pytestmark = pytest.mark.django_db(transaction=True)


def create(agent_http, **body) -> dict:
    body.setdefault("payload", {"question": "Approve the plan?", "title": "Plan Review"})
    response = agent_http.post("/api/breakpoints", json=body)
    assert response.status_code == 201, response.text
    return response.json()


def delivery_status(delivery_id: str) -> str:
    return Delivery.objects.values_list("status", flat=True).get(pk=delivery_id)


def notification_outcomes(delivery_id: str) -> list[tuple]:
    return [
        (e.actor, e.metadata["attempt"], e.metadata["outcome"], e.metadata["statusCode"])
        for e in Event.objects.filter(
            type="notification", metadata__deliveryId=delivery_id
        ).order_by("timestamp", "id")
    ]


def test_worker_delivers_signed_webhooks_for_each_subscribed_event(
    system, agent_http, reviewer_http, make_receiver, subscribe
):
    receiver = make_receiver()
    every = subscribe(receiver.url + "/all")
    plain_secret = "a plain shared secret"
    released_only = subscribe(receiver.url + "/released", ["released"], secret=plain_secret)

    bp = create(agent_http)
    bp_id = bp["breakpointId"]

    [created] = receiver.wait_for(lambda got: len(got) >= 1, timeout=30, what="the created webhook")
    assert created.path == "/hook/all"
    body = created.json()
    assert body["type"] == "breakpoint.created"
    assert body["data"]["breakpointId"] == bp_id
    assert body["data"]["status"] == "waiting"
    # The signature, with the reference implementation and by hand.
    assert StandardWebhook(every.secret).verify(created.body, created.headers) == body
    assert created.headers["webhook-signature"] == expected_signature(
        every.secret, created.webhook_id, created.headers["webhook-timestamp"], created.body
    )
    delivery = Delivery.objects.get(pk=created.webhook_id)
    assert (delivery.breakpoint_id, delivery.webhook_id) == (bp_id, every.pk)
    system.wait_until(
        lambda: delivery_status(created.webhook_id) == "delivered", what="delivered row"
    )
    # The audit trail, as a reviewer reads it over the API (agents do not see deliveries).
    events = reviewer_http.get(f"/api/breakpoints/{bp_id}/events").json()["results"]
    [notification] = [e for e in events if e["type"] == "notification"]
    assert notification["actor"] == "system:webhooks"
    assert notification["metadata"]["url"] == receiver.url + "/all"
    agent_events = agent_http.get(f"/api/breakpoints/{bp_id}/events").json()["results"]
    assert [e["type"] for e in agent_events] == ["created"]
    assert notification["metadata"]["statusCode"] == 200
    assert notification["metadata"]["outcome"] == "delivered"
    assert isinstance(notification["metadata"]["durationMs"], int)

    released = reviewer_http.post(
        f"/api/breakpoints/{bp_id}/feedback", json={"comment": "Ship it", "release": True}
    )
    assert released.status_code == 201, released.text

    got = receiver.wait_for(lambda got: len(got) >= 4, timeout=30, what="4 webhooks")
    time.sleep(2 * SWEEP_SECONDS)  # nothing more should come
    got = receiver.received
    assert sorted((r.path, r.json()["type"]) for r in got) == [
        ("/hook/all", "breakpoint.created"),
        ("/hook/all", "breakpoint.feedback"),
        ("/hook/all", "breakpoint.released"),
        ("/hook/released", "breakpoint.released"),
    ]
    assert len({r.webhook_id for r in got}) == 4
    [to_released] = [r for r in got if r.path == "/hook/released"]
    StandardWebhook(plain_secret.encode()).verify(to_released.body, to_released.headers)
    assert to_released.headers["webhook-signature"] == expected_signature(
        plain_secret,
        to_released.webhook_id,
        to_released.headers["webhook-timestamp"],
        to_released.body,
    )
    data = to_released.json()["data"]
    assert data["status"] == "released"
    assert data["result"]["approved"] is True
    assert data["result"]["respondedBy"] == "alice"
    system.wait_until(
        lambda: (
            set(Delivery.objects.filter(webhook=released_only).values_list("status", flat=True))
            == {"delivered"}
        ),
        what="released-only delivery marked delivered",
    )
    assert Delivery.objects.filter(webhook=released_only).count() == 1


def test_failed_attempt_is_retried_by_the_sweep_with_the_same_webhook_id(
    system, agent_http, make_receiver, subscribe
):
    receiver = make_receiver(statuses=[503])
    webhook = subscribe(receiver.url, ["created"])

    bp_id = create(agent_http)["breakpointId"]

    got = receiver.wait_for(lambda got: len(got) >= 2, timeout=30, what="a retry")
    first, second = got[:2]
    assert first.webhook_id == second.webhook_id
    assert first.body == second.body
    StandardWebhook(webhook.secret).verify(second.body, second.headers)
    delivery_id = first.webhook_id
    system.wait_until(lambda: delivery_status(delivery_id) == "delivered", what="delivered row")
    delivery = Delivery.objects.get(pk=delivery_id)
    assert (delivery.breakpoint_id, delivery.attempts, delivery.last_status_code) == (
        bp_id,
        2,
        200,
    )
    assert notification_outcomes(delivery_id) == [
        ("system:webhooks", 1, "retry", 503),
        ("system:webhooks", 2, "delivered", 200),
    ]
    time.sleep(2 * SWEEP_SECONDS)
    assert len(receiver.with_id(delivery_id)) == 2  # delivered: never sent again


def test_ttl_sweep_expires_an_untouched_breakpoint_and_notifies(
    system, agent_http, make_receiver, subscribe
):
    receiver = make_receiver()
    subscribe(receiver.url, ["expired"])

    untouched = create(agent_http, ttlSeconds=2)
    polled = create(agent_http, ttlSeconds=2)
    expires_at = parse_time(untouched["expiresAt"])
    assert untouched["status"] == "waiting"

    # The polled one: an agent polling /status sees "expired" within 2 s of expiresAt.
    polled_expiry = parse_time(polled["expiresAt"])
    seen = None
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        status = agent_http.get(f"/api/breakpoints/{polled['breakpointId']}/status").json()
        if status["status"] != "waiting":
            seen = (timezone.now(), status)
            break
        time.sleep(0.2)
    assert seen is not None, system.logs()
    seen_at, status = seen
    assert status["status"] == "expired"
    assert status["result"]["approved"] is False
    assert 0 <= (seen_at - polled_expiry).total_seconds() < 2

    # The untouched one (never read through the API) is expired by beat's sweep.
    system.wait_until(
        lambda: Breakpoint.objects.get(pk=untouched["breakpointId"]).status == "expired",
        what="the sweep to expire the untouched breakpoint",
        timeout=15,
    )
    stored = Breakpoint.objects.get(pk=untouched["breakpointId"])
    assert stored.expired_at >= expires_at
    assert (stored.expired_at - expires_at).total_seconds() < 5 * SWEEP_SECONDS
    assert stored.result["respondedBy"] == "system:ttl"
    for bp in (untouched, polled):
        assert Event.objects.filter(breakpoint_id=bp["breakpointId"], type="expired").count() == 1

    got = receiver.wait_for(lambda got: len(got) >= 2, timeout=30, what="2 expired webhooks")
    time.sleep(2 * SWEEP_SECONDS)
    got = receiver.received
    assert sorted(r.json()["data"]["breakpointId"] for r in got) == sorted(
        [untouched["breakpointId"], polled["breakpointId"]]
    )
    assert {r.json()["type"] for r in got} == {"breakpoint.expired"}
    assert {r.json()["data"]["status"] for r in got} == {"expired"}
    # Still exactly one expired event each after more sweeps ran.
    for bp in (untouched, polled):
        assert Event.objects.filter(breakpoint_id=bp["breakpointId"], type="expired").count() == 1
