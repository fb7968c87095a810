"""Web Push through the real processes: the API creates, the Celery worker pushes to a push
service stand-in on 127.0.0.1 that decrypts each push with the device's keys (as the
browser would) and checks its VAPID token; beat's outbox sweep retries after a 500; a 410
removes the device. One system for the module: no test here breaks it."""

import base64
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from accounts.tokens import token_create_for_agent
from channels.models import PushSubscription
from notifications.models import Delivery
from tests.standins.push import PushService
from tests.support.console import session_client
from tests.support.factories import ReviewerFactory
from tests.support.system import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

PUBLIC_URL = "https://bpm.example.test"
QUESTION = "Rotate the production database password now?"


def _vapid_key() -> str:
    private = ec.generate_private_key(ec.SECP256R1()).private_numbers().private_value
    return base64.urlsafe_b64encode(private.to_bytes(32, "big")).rstrip(b"=").decode()


VAPID_KEY = _vapid_key()
PUSH_ENV = {
    "BPM_VAPID_PRIVATE_KEY": VAPID_KEY,
    "BPM_VAPID_SUBJECT": "mailto:ops@example.test",
    "BPM_PUSH_SERVICES": "127.0.0.1",
    "BPM_PUBLIC_URL": PUBLIC_URL,
    "BPM_NOTIFY_EMAIL": "0",
}


@pytest.fixture(scope="module")
def module_system_options() -> dict[str, Any]:
    return {"env": PUSH_ENV}


@pytest.fixture(scope="module")
def push() -> Iterator[PushService]:
    service = PushService()
    yield service
    service.close()


@pytest.fixture
def agent(module_system, transactional_db) -> Iterator[httpx.Client]:
    raw = token_create_for_agent(agent_id="deploy-bot")[1]
    with httpx.Client(
        base_url=module_system.base_url, headers={"Authorization": f"Bearer {raw}"}, timeout=20
    ) as client:
        yield client


@pytest.fixture
def device(push, settings, request) -> tuple[Any, str]:
    """A reviewer whose browser turned notifications on, through the console's endpoint."""
    settings.BPM_VAPID_PRIVATE_KEY = VAPID_KEY
    settings.BPM_PUSH_SERVICES = ["127.0.0.1"]
    name = request.node.name[-40:]
    reviewer = ReviewerFactory(username="rita")
    saved = session_client(reviewer).post(
        "/push/devices", push.subscription(name), content_type="application/json"
    )
    assert saved.status_code == 201, saved.content
    return reviewer, name


def create(agent: httpx.Client) -> str:
    response = agent.post(
        "/api/breakpoints",
        json={
            "payload": {"question": QUESTION, "title": "Rotate the DB password"},
            "ttlSeconds": 1800,
        },
    )
    assert response.status_code == 201, response.text
    return response.json()["breakpointId"]


def received_by(push: PushService, device: str, count: int) -> list:
    wait_until(
        lambda: len([p for p in push.received if p.device == device]) >= count,
        timeout=30,
        what=f"{count} push(es) to {device}",
    )
    return [p for p in push.received if p.device == device]


def test_a_new_breakpoint_reaches_the_device_encrypted_and_without_its_question(
    push, device, agent
):
    _, name = device

    bp_id = create(agent)

    (received,) = received_by(push, name, 1)
    notice = received.notice
    assert notice["title"] == "Rotate the DB password"
    assert notice["agent"] == "deploy-bot"
    assert notice["url"] == f"{PUBLIC_URL}/admin/breakpoints/breakpoint/{bp_id}/change/"
    assert 1700 <= notice["secondsLeft"] <= 1800
    assert QUESTION not in repr(notice)
    assert received.vapid_claims["aud"] == push.origin
    assert push.refused == []


def test_a_500_is_retried_by_the_outbox_and_delivered(push, device, agent):
    _, name = device
    push.answer_next(name, 500)

    bp_id = create(agent)

    first, second = received_by(push, name, 2)
    assert (first.status, second.status) == (500, 201)
    assert first.notice["id"] == second.notice["id"] == bp_id
    wait_until(
        lambda: Delivery.objects.filter(
            breakpoint_id=bp_id, channel="push", status="delivered"
        ).exists(),
        timeout=30,
        what="the push delivery marked delivered",
    )
    assert Delivery.objects.get(breakpoint_id=bp_id, channel="push").attempts == 2


def test_a_410_removes_the_device_and_the_next_breakpoint_is_not_pushed(push, device, agent):
    reviewer, name = device
    push.answer_next(name, 410)

    bp_id = create(agent)

    received_by(push, name, 1)
    delivery = wait_until(
        lambda: Delivery.objects.filter(
            breakpoint_id=bp_id, channel="push", status="failed"
        ).first(),
        timeout=30,
        what="the push delivery failed for good",
    )
    assert delivery.last_status_code == 410 and delivery.attempts == 1
    assert not PushSubscription.objects.filter(user=reviewer).exists()
    later = create(agent)
    assert not Delivery.objects.filter(breakpoint_id=later, channel="push").exists()
