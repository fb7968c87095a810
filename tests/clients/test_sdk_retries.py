"""The SDK against real misbehaving HTTP servers on 127.0.0.1, and its retry and decoding rules.

Each server is a stdlib `http.server` in a thread that answers from a script (status, body,
headers) and records every request it received, so the tests count what really went over
the wire. No Django server and no database are needed here.
"""

import json
import socket
import time

import httpx
import pytest
from bpm_client import (
    ApiError,
    Breakpoint,
    Client,
    ConnectionFailed,
    DecodeError,
    IdempotencyConflict,
    InvalidState,
    NotAuthenticated,
    NotFound,
    PayloadTooLarge,
    PermissionDenied,
    Retry,
    ServerError,
    Status,
    Throttled,
    Unavailable,
    ValidationError,
)

from tests.support.scripted import (
    NOW,
    Answer,
    ScriptedServer,
    breakpoint_json,
    envelope,
    status_json,
)

FAST = Retry(attempts=4, base=0.01)


def client_for(server: ScriptedServer, retry: Retry = FAST) -> Client:
    return Client(server.url, "bpm_test", retry=retry, strict=True)


# --- retries ----------------------------------------------------------------------------


@pytest.mark.parametrize("refusal", [503, 429])
def test_refusal_with_retry_after_is_resent_after_the_pause(scripted, refusal):
    """503 and 429 with Retry-After: 1 are sent again, no sooner than a second later."""
    server = scripted(
        Answer(refusal, envelope("unavailable"), {"Retry-After": "1"}),
        Answer(200, status_json(status="released")),
    )
    with client_for(server) as client:
        status = client.status("bp_1")
    assert status.status == "released"
    first, second = server.seen
    assert (first.path, second.path) == ("/api/breakpoints/bp_1/status",) * 2
    assert second.at - first.at >= 0.9


def test_throttled_feedback_is_resent_since_no_work_was_done(scripted):
    """429 means refused before any work: even a non-idempotent call is sent again."""
    created = {"feedback": {"id": "f1", "author": "alice", "comment": "hi", "createdAt": NOW}}
    server = scripted(
        Answer(429, envelope("throttled"), {"Retry-After": "0"}),
        Answer(201, {**created, "status": "waiting", "result": None}),
    )
    with client_for(server) as client:
        answer = client.feedback("bp_1", "hi")
    assert answer.feedback.comment == "hi"
    assert len(server.seen) == 2


def test_server_error_on_a_read_is_retried(scripted):
    server = scripted(
        Answer(500, envelope("server_error")),
        Answer(500, envelope("server_error")),
        Answer(200, breakpoint_json()),
    )
    with client_for(server) as client:
        assert client.get("bp_1").breakpoint_id == "bp_1"
    assert [seen.method for seen in server.seen] == ["GET", "GET", "GET"]


def test_server_error_on_feedback_is_not_retried(scripted):
    """A 500 to a comment may have stored it: sending it again could post it twice."""
    server = scripted(Answer(500, envelope("server_error", "Boom.")))
    with client_for(server) as client, pytest.raises(ServerError) as raised:
        client.release("bp_1", "go")
    assert raised.value.code == "server_error" and raised.value.status_code == 500
    assert len(server.seen) == 1
    assert json.loads(server.seen[0].body) == {"comment": "go", "release": True, "approved": True}


def test_create_is_resent_after_502_with_the_same_idempotency_key(scripted):
    server = scripted(Answer(502, "<html>Bad Gateway</html>"), Answer(201, breakpoint_json()))
    with client_for(server) as client:
        created = client.create("Ship?")
    assert created.breakpoint_id == "bp_1"
    keys = [seen.headers.get("idempotency-key") for seen in server.seen]
    assert len(keys) == 2 and keys[0] and keys[0] == keys[1]
    assert server.seen[0].body == server.seen[1].body


def test_each_create_gets_its_own_key_unless_one_is_given(scripted):
    server = scripted(Answer(201, breakpoint_json()))
    with client_for(server) as client:
        client.create("Ship?")
        client.create("Ship?")
        client.create("Ship?", idempotency_key="deploy-42")
    keys = [seen.headers["idempotency-key"] for seen in server.seen]
    assert keys[0] != keys[1] and keys[2] == "deploy-42"


class CountingTransport(httpx.HTTPTransport):
    """The real transport, counting the requests it was handed."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.count += 1
        return super().handle_request(request)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # nothing listens once the socket is closed


REFUSED_CALLS = {
    "status": lambda client: client.status("bp_1"),
    "feedback": lambda client: client.feedback("bp_1", "hi"),
}


@pytest.mark.parametrize("call", list(REFUSED_CALLS))
def test_connection_refused_fails_after_the_retry_budget(call):
    """A refused connection never reached the server, so even feedback is tried again."""
    transport = CountingTransport()
    url = f"http://127.0.0.1:{_closed_port()}"
    client = Client(url, "bpm_test", retry=Retry(attempts=2, base=0.01), transport=transport)
    with client, pytest.raises(ConnectionFailed) as raised:
        REFUSED_CALLS[call](client)
    assert transport.count == 3  # the first try and two retries
    assert "127.0.0.1" in str(raised.value)


# --- errors -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "code", "error_class"),
    [
        (400, "validation_error", ValidationError),
        (401, "not_authenticated", NotAuthenticated),
        (403, "permission_denied", PermissionDenied),
        (404, "not_found", NotFound),
        (409, "invalid_state", InvalidState),
        (409, "idempotency_conflict", IdempotencyConflict),
        (413, "payload_too_large", PayloadTooLarge),
        (405, "method_not_allowed", ApiError),
    ],
)
def test_envelope_error_maps_to_its_exception(scripted, status, code, error_class):
    details = {"currentStatus": "released", "field": ["Bad."]}
    server = scripted(
        Answer(status, envelope(code, "It failed.", **details), {"X-Request-ID": "r-1"})
    )
    with client_for(server) as client, pytest.raises(ApiError) as raised:
        client.get("bp_1")
    error = raised.value
    assert type(error) is error_class
    assert (error.code, error.message, error.details) == (code, "It failed.", details)
    assert (error.status_code, error.request_id) == (status, "r-1")
    assert len(server.seen) == 1  # a client error is never retried


def test_proxy_502_without_an_envelope_is_unavailable(scripted):
    server = scripted(Answer(502, "<html><body>502 Bad Gateway</body></html>"))
    with client_for(server, Retry(attempts=1, base=0.01)) as client:
        with pytest.raises(Unavailable) as raised:
            client.get("bp_1")
    assert raised.value.code == "unavailable" and raised.value.status_code == 502
    assert len(server.seen) == 2


def test_throttled_after_the_budget_carries_its_code(scripted):
    server = scripted(Answer(429, envelope("throttled", "Slow down."), {"Retry-After": "0"}))
    with client_for(server, Retry(attempts=1, base=0.01)) as client:
        with pytest.raises(Throttled, match="Slow down"):
            client.status("bp_1")
    assert len(server.seen) == 2


# --- the retry schedule -----------------------------------------------------------------


@pytest.mark.parametrize("attempt", [0, 1, 3, 10])
def test_backoff_delay_stays_within_half_and_full_ceiling(attempt):
    retry = Retry(base=0.5, cap=10.0)
    ceiling = min(10.0, 0.5 * 2**attempt)
    delays = [retry.delay(attempt) for _ in range(200)]
    assert all(ceiling / 2 <= delay <= ceiling for delay in delays)
    assert len(set(delays)) > 1  # jittered: not one fixed value


def test_retry_after_wins_over_backoff_within_limits():
    retry = Retry(base=0.5, cap=10.0)
    assert retry.delay(0, retry_after=7) == 7
    assert retry.delay(5, retry_after=-3) == 0
    assert retry.delay(0, retry_after=10_000) == 120


def test_retry_budget_counts_attempts_and_time():
    assert Retry(attempts=2).allows(1, time.monotonic())
    assert not Retry(attempts=2).allows(2, time.monotonic())
    unlimited = Retry(attempts=None, give_up_after=5.0)
    assert unlimited.allows(1000, time.monotonic())
    assert not unlimited.allows(0, time.monotonic() - 6)


# --- strict and lenient decoding ---------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "where"),
    [
        ({"surprise": 1}, "unknown keys ['surprise']"),
        ({"status": "paused"}, "status"),
        ({"updatedAt": "yesterday"}, "updatedAt"),
        ({"pollAfterMs": True}, "pollAfterMs"),
        ({"pollAfterMs": "1000"}, "pollAfterMs"),
        ({"result": {"approved": "yes"}}, "result.approved"),
    ],
)
def test_strict_decoding_refuses_what_the_api_does_not_send(changes, where):
    with pytest.raises(DecodeError, match=where.replace("[", r"\[").replace("]", r"\]")):
        Status.from_json(status_json(**changes), strict=True)


def test_strict_decoding_refuses_a_missing_key():
    body = status_json()
    del body["pollAfterMs"]
    with pytest.raises(DecodeError, match="pollAfterMs: missing"):
        Status.from_json(body, strict=True)


def test_strict_decoding_names_the_nested_path():
    body = breakpoint_json(feedback=[{"id": "f1", "author": 7, "createdAt": NOW}])
    with pytest.raises(DecodeError, match=r"feedback\[0\]\.author"):
        Breakpoint.from_json(body, strict=True)


def test_lenient_decoding_keeps_extra_keys_and_tolerates_gaps():
    body = status_json(status="released", future="field")
    del body["pollAfterMs"]
    status = Status.from_json(body)
    assert status.status == "released" and status.done
    assert status.extra == {"future": "field"}
    assert status.poll_after_ms is None


def test_strict_decoding_builds_typed_values():
    body = breakpoint_json(
        status="released",
        result={"approved": True, "respondedBy": "alice", "allResponses": [
            {"respondedBy": "alice", "approved": True, "respondedAt": NOW},
        ]},
    )  # fmt: skip
    bp = Breakpoint.from_json(body, strict=True)
    assert bp.done and bp.created_at.tzinfo is not None
    assert bp.result is not None and bp.result.all_responses[0].responded_by == "alice"
    assert bp.result.all_responses[0].responded_at.year == 2026
