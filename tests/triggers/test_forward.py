"""The `forward` action: the event goes out as a signed trigger.fired webhook, once."""

import json

from core.actors import Actor
from notifications.models import Delivery
from notifications.services import delivery_attempt, webhook_add
from tests.support.github_events import deliver, run_event
from tests.support.webhook_receiver import expected_signature
from triggers import services

pytest_plugins = ["tests.support.github_events"]  # the github source fixture

PAYLOAD = {"workflow_run": {"head_sha": "abc123", "conclusion": "success"}}


def test_a_forward_rule_sends_the_event_as_a_signed_trigger_fired_webhook(
    settings, github, admin_user, make_receiver
):
    settings.BPM_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    receiver = make_receiver()
    hook = webhook_add(url=receiver.url, event_types=["trigger.fired"])
    webhook_add(url=receiver.url.replace("/hook", "/other"), event_types=["released"])
    services.rule_add(
        actor=Actor.for_user(admin_user),
        name="start-deploy",
        source="github",
        action="forward",
        event_type="workflow_run",
        conditions=["workflow_run.conclusion == 'success'"],
    )

    event = run_event(deliver(PAYLOAD, delivery="run-1"))

    (delivery,) = Delivery.objects.all()  # only the trigger.fired subscriber
    assert (delivery.event_type, delivery.breakpoint_id) == ("trigger.fired", None)
    assert delivery_attempt(delivery.pk).status == "delivered"
    (received,) = receiver.received
    body = received.json()
    assert body["type"] == "trigger.fired"
    assert body["data"]["rule"] == "start-deploy"
    assert body["data"]["event"]["id"] == event.pk
    assert body["data"]["event"]["payload"] == PAYLOAD
    headers = received.headers
    assert headers["webhook-signature"] == expected_signature(
        hook.secret, headers["webhook-id"], headers["webhook-timestamp"], received.body
    )
    results = {r["rule"]: r for r in event.results}
    assert results["start-deploy"]["actions"][0]["outcome"] == "forwarded to 1 subscriber(s)"
    assert services.event_evaluate(event.pk) == "skipped"  # evaluated once: forwarded once
    assert Delivery.objects.count() == 1
    assert json.loads(received.body) == body
