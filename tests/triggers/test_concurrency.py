"""Concurrent copies of one delivery are one event; concurrent evaluations act once.

Real concurrency needs a database that runs transactions side by side: PostgreSQL (the
unique (source, delivery id) constraint and SELECT ... FOR UPDATE SKIP LOCKED do the
work). SQLite serialises writers, so these tests are skipped there.
"""

import json
import time
import uuid
from collections import Counter

import pytest
from django.test import Client

from audit.models import Event, EventType
from breakpoints.models import Breakpoint
from core.actors import Actor
from tests.support.threads import run_indexed
from triggers import services
from triggers.models import EventSource, EventStatus, ExternalEvent
from triggers.verification import sign_generic, sign_github

COPIES = 100
CLIENTS = 10  # threads sending the copies: fewer than the test pool's connections (12), so
# no copy waits past the pool's timeout on a loaded machine and is answered 503
WORKERS = 8
SECRET = "concurrency-secret-0123456789"


pytestmark = pytest.mark.postgres  # SQLite serialises writers


@pytest.fixture(autouse=True)
def _no_rate_limit(settings) -> None:
    settings.BPM_THROTTLE_ANON_RATE = "off"  # 100 deliveries from one address on purpose


def one_delivery(kind: str) -> tuple[bytes, dict[str, str]]:
    """One signed delivery (the very same bytes and headers for every copy)."""
    body = json.dumps({"run": "r-1", "conclusion": "success"}).encode()
    delivery = str(uuid.uuid4())
    if kind == "github":
        headers = {
            "X-Hub-Signature-256": sign_github(SECRET, body),
            "X-GitHub-Delivery": delivery,
            "X-GitHub-Event": "ci.done",
        }
    else:
        stamp = int(time.time())
        headers = {
            "X-Bpm-Timestamp": str(stamp),
            "X-Bpm-Signature": sign_generic(SECRET, body, stamp),
            "X-Bpm-Event-Id": delivery,
            "X-Bpm-Event-Type": "ci.done",
        }
    return body, headers


def deliver_concurrently(kind: str) -> str:
    """COPIES copies of one delivery from CLIENTS threads released at once; the one event's id."""
    body, headers = one_delivery(kind)

    def post(client: Client) -> tuple[int, str]:
        response = client.post(
            f"/api/events/{kind}", data=body, content_type="application/json", headers=headers
        )
        assert response.status_code < 500, response.content
        return response.status_code, response.json().get("eventId", "")

    def send_share(_: int) -> list[tuple[int, str]]:
        client = Client(raise_request_exception=False)
        return [post(client) for _ in range(COPIES // CLIENTS)]

    answers = [answer for share in run_indexed(CLIENTS, send_share) for answer in share]
    assert len(answers) == COPIES
    assert Counter(status for status, _ in answers) == {202: 1, 200: COPIES - 1}, answers
    (event_id,) = {event_id for _, event_id in answers}
    return event_id


@pytest.mark.parametrize("kind", ["generic-hmac", "github"])
def test_concurrent_copies_of_one_delivery_are_one_event(transactional_db, kind):
    EventSource.objects.create(name=kind, kind=kind, secret=SECRET)

    event_id = deliver_concurrently(kind)

    (event,) = ExternalEvent.objects.all()
    assert (event.pk, event.status) == (event_id, EventStatus.PENDING)


def test_concurrent_deliveries_then_concurrent_workers_act_once(
    transactional_db, admin_user, make_breakpoint
):
    EventSource.objects.create(name="generic-hmac", kind="generic-hmac", secret=SECRET)
    admin = Actor.for_user(admin_user)
    services.rule_add(
        actor=admin,
        name="release-run",
        action="release",
        event_type="ci.*",
        params={"selector": {"runId": "{{ run }}"}, "feedback": "CI {{ conclusion }}"},
    )
    services.rule_add(
        actor=admin,
        name="ask-to-deploy",
        action="create",
        event_type="ci.*",
        params={"question": "Deploy {{ run }}?", "runId": "deploy-{{ run }}"},
    )
    waiting = make_breakpoint(run_id="r-1")
    event_id = deliver_concurrently("generic-hmac")

    outcomes = run_indexed(WORKERS, lambda _: services.event_evaluate(event_id))

    assert Counter(outcomes) == {"processed": 1, "skipped": WORKERS - 1}
    assert Event.objects.filter(type=EventType.RELEASED).count() == 1
    assert Breakpoint.objects.get(pk=waiting.pk).status == "released"
    assert Breakpoint.objects.filter(run_id="deploy-r-1").count() == 1
    event = ExternalEvent.objects.get(pk=event_id)
    assert event.status == EventStatus.PROCESSED and event.attempts == 1
    assert sorted(result["rule"] for result in event.results) == ["ask-to-deploy", "release-run"]
