"""A GitHub event source (the `github` fixture: register with
`pytest_plugins = ["tests.support.github_events"]`), its signed deliveries, and the
event a delivery recorded."""

import json
import uuid

import pytest
from rest_framework.test import APIClient

from core.actors import Actor
from triggers import services
from triggers.models import ExternalEvent
from triggers.verification import sign_github

SECRET = "github-webhook-secret-0123456789"


@pytest.fixture
def github(admin_user):
    return services.source_add(
        actor=Actor.for_user(admin_user), name="github", kind="github", secret=SECRET
    )


def deliver(body: dict, *, secret: str = SECRET, delivery: str | None = None, event="workflow_run"):
    raw = json.dumps(body).encode()
    return APIClient().post(
        "/api/events/github",
        data=raw,
        content_type="application/json",
        HTTP_X_HUB_SIGNATURE_256=sign_github(secret, raw),
        HTTP_X_GITHUB_DELIVERY=delivery or str(uuid.uuid4()),
        HTTP_X_GITHUB_EVENT=event,
    )


def run_event(response) -> ExternalEvent:
    assert response.status_code == 202, response.content
    event_id = response.json()["eventId"]
    assert services.event_evaluate(event_id) == "processed"
    return ExternalEvent.objects.get(pk=event_id)
