"""The agent client's generic-hmac signing (bpm_client.events.sending, what `bpm events
send`, the git hooks and the watcher send) and the server's verification
(triggers.verification) agree: the same signature, the same limits, and a client-signed
delivery posted to /api/events/<source> is stored; altered, it is refused."""

import time

import pytest
from bpm_client.events import sending
from django.test import Client as DjangoClient
from hypothesis import given
from hypothesis import strategies as st

from core import limits
from triggers.models import EventSource, ExternalEvent
from triggers.services.config import NAME as SOURCE_NAME
from triggers.verification import sign_generic

SECRET = "client-signing-secret-0123456789abcdef"


@given(secret=st.text(min_size=1), body=st.binary(), timestamp=st.integers(0, 10**12))
def test_the_client_signs_as_the_server_verifies(secret, body, timestamp):
    assert sending.signature(secret, body, timestamp) == sign_generic(secret, body, timestamp)


def test_the_clients_limits_are_the_servers():
    assert sending.MAX_EVENT_TYPE_LENGTH == limits.MAX_EVENT_TYPE_LENGTH
    assert sending.MAX_DELIVERY_ID_LENGTH == limits.MAX_DELIVERY_ID_LENGTH
    assert sending.SOURCE_NAME.pattern == SOURCE_NAME.pattern


def post(body: bytes, headers: dict[str, str]):
    meta = {f"HTTP_{name.upper().replace('-', '_')}": value for name, value in headers.items()}
    meta.pop("HTTP_CONTENT_TYPE")
    return DjangoClient().post(
        "/api/events/ci", data=body, content_type=headers["Content-Type"], **meta
    )


@pytest.fixture
def ci(db) -> EventSource:
    return EventSource.objects.create(name="ci", kind="generic-hmac", secret=SECRET)


def test_a_client_signed_event_is_accepted_and_stored_once(ci):
    body = sending.encode({"env": "prod", "tests": 812, "name": "déploiement"})
    headers = sending.signed_headers(SECRET, body, event_type="deploy.done", delivery_id="d-1")

    first, again = post(body, headers), post(body, headers)

    assert first.status_code == 202, first.content
    assert again.status_code == 200 and again.json()["duplicate"] is True
    (event,) = ExternalEvent.objects.all()
    assert (event.pk, event.type, event.delivery_id) == (
        first.json()["eventId"],
        "deploy.done",
        "d-1",
    )
    assert event.payload == {"env": "prod", "tests": 812, "name": "déploiement"}


@pytest.mark.parametrize(
    "tamper",
    [
        pytest.param(lambda body, headers: (body + b" ", headers), id="altered body"),
        pytest.param(
            lambda body, headers: (body, {**headers, "X-Bpm-Timestamp": str(int(time.time()) + 1)}),
            id="another timestamp",  # within the tolerance: the signature covers it
        ),
    ],
)
def test_a_client_signed_event_altered_on_the_way_is_refused(ci, tamper):
    body = sending.encode({"ok": True})
    headers = sending.signed_headers(SECRET, body, event_type="t", delivery_id="d-2")
    response = post(*tamper(body, headers))
    assert response.status_code == 401
    assert not ExternalEvent.objects.exists()


def test_a_client_signed_event_with_another_secret_is_refused(ci):
    body = sending.encode({"ok": True})
    headers = sending.signed_headers("not-" + SECRET, body, event_type="t", delivery_id="d-3")
    assert post(body, headers).status_code == 401
    assert not ExternalEvent.objects.exists()
