"""Chunked request bodies (no Content-Length) reach Django whole, through the ASGI app.

Through config.asgi.application with httpx's ASGI transport: a generator body is sent as
`Transfer-Encoding: chunked`, one ASGI message per chunk. The web server threads read
through their own connections, so the data is committed (transactional_db).
"""

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest
from django.test import override_settings

from accounts.tokens import token_create_for_agent, token_create_for_user
from audit.models import Event
from breakpoints.models import Breakpoint, Feedback
from tests.support.aio import run_asgi, run_async
from tests.support.factories import ReviewerFactory
from web.asgi_body import BufferedBodyApp

CREATE = {"runId": "run-1", "tags": ["deploy"], "payload": {"question": "Ship it?"}}


def run(scenario: Callable[[httpx.AsyncClient], Awaitable[Any]]) -> Any:
    return run_asgi(scenario)


class Chunks:
    """An async body of several chunks, counting how many the server pulled."""

    def __init__(self, body: bytes, size: int):
        self.chunks = [body[i : i + size] for i in range(0, len(body), size)]
        self.pulled = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            self.pulled += 1
            yield chunk


def post_chunked(path: str, body: Chunks, token: str) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    async def scenario(client: httpx.AsyncClient) -> httpx.Response:
        request = client.build_request("POST", path, content=body, headers=headers)
        assert request.headers["transfer-encoding"] == "chunked"
        assert "content-length" not in request.headers
        return await client.send(request)

    return run(scenario)


@pytest.fixture(autouse=True)
def _testserver_allowed(settings):
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]


@pytest.mark.django_db(transaction=True)
def test_a_chunked_create_is_read_whole_and_stored():
    token = token_create_for_agent(agent_id="agent-a")[1]
    body = Chunks(json.dumps(CREATE).encode(), size=7)

    response = post_chunked("/api/breakpoints", body, token)

    assert response.status_code == 201, response.text
    assert response.json()["payload"] == CREATE["payload"]
    assert response.json()["tags"] == ["deploy"]
    assert body.pulled == len(body.chunks) > 1
    assert Breakpoint.objects.get().run_id == "run-1"


@pytest.mark.django_db(transaction=True)
def test_a_chunked_feedback_is_read_whole(make_breakpoint):
    bp = make_breakpoint()
    token = token_create_for_user(user=ReviewerFactory(username="alice"))[1]
    body = Chunks(json.dumps({"comment": "go", "release": True}).encode(), size=5)

    response = post_chunked(f"/api/breakpoints/{bp.pk}/feedback", body, token)

    assert response.status_code == 201, response.text
    bp.refresh_from_db()
    assert bp.status == "released"
    assert Feedback.objects.get().comment == "go"


@pytest.mark.django_db(transaction=True)
def test_a_chunked_body_over_the_limit_is_413_and_read_no_further(settings):
    settings.BPM_MAX_BODY_BYTES = 1000
    token = token_create_for_agent(agent_id="agent-a")[1]
    big = json.dumps({"payload": {"question": "x" * 5000}}).encode()
    body = Chunks(big, size=100)

    response = post_chunked("/api/breakpoints", body, token)

    assert response.status_code == 413
    assert response.json() == {
        "error": {
            "code": "payload_too_large",
            "message": "Request body is over the limit of 1000 bytes.",
            "details": {"limit": 1000},
        }
    }
    assert response.headers["x-request-id"]
    assert body.pulled == 11  # the chunk that crossed the limit was the last one read
    assert not Breakpoint.objects.exists()
    assert not Event.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_body_with_content_length_is_unchanged():
    token = token_create_for_agent(agent_id="agent-a")[1]

    response = run(
        lambda client: client.post(
            "/api/breakpoints", json=CREATE, headers={"Authorization": f"Bearer {token}"}
        )
    )

    assert response.status_code == 201, response.text
    assert Breakpoint.objects.count() == 1


# --- the middleware alone -------------------------------------------------------------


CHUNKED = [(b"transfer-encoding", b"chunked")]


def call(messages: list[dict], headers: list[tuple[bytes, bytes]], limit: int = 100) -> dict:
    """Run BufferedBodyApp over `messages`; what the app saw and what was sent."""
    seen: dict[str, Any] = {"called": False, "sent": []}
    queue = list(messages)

    async def receive() -> dict:
        return queue.pop(0) if queue else {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        seen["sent"].append(message)

    async def app(scope: dict, app_receive: Any, app_send: Any) -> None:
        seen.update(called=True, headers=scope["headers"])
        seen["first"] = await app_receive()
        seen["then"] = await app_receive()

    scope = {"type": "http", "method": "POST", "path": "/api/x", "headers": headers}

    with override_settings(BPM_MAX_BODY_BYTES=limit):
        run_async(BufferedBodyApp(app)(scope, receive, send))
    return seen


def body(chunk: bytes, more: bool) -> dict:
    return {"type": "http.request", "body": chunk, "more_body": more}


def test_the_app_gets_the_whole_body_with_its_length_and_no_transfer_encoding():
    seen = call(
        [body(b"ab", True), body(b"", True), body(b"cd", False)],
        [(b"host", b"x"), (b"transfer-encoding", b"chunked")],
    )

    assert seen["headers"] == [(b"host", b"x"), (b"content-length", b"4")]
    assert seen["first"] == body(b"abcd", False)
    assert seen["then"] == {"type": "http.disconnect"}  # later receives are the server's


def test_a_body_of_exactly_the_limit_passes():
    seen = call([body(b"x" * 60, True), body(b"y" * 40, False)], CHUNKED, limit=100)

    assert seen["first"]["body"] == b"x" * 60 + b"y" * 40


def test_a_body_with_content_length_is_read_whole_and_keeps_its_length():
    headers = [(b"content-length", b"4")]
    seen = call([body(b"ok", True), body(b"go", False)], headers)

    assert seen["headers"] == headers
    assert seen["first"] == body(b"okgo", False)


def test_a_request_without_a_body_is_passed_through_untouched():
    headers = [(b"host", b"x")]
    seen = call([body(b"", False)], headers)

    assert seen["headers"] == headers
    assert seen["first"] == body(b"", False)


def test_a_client_that_leaves_mid_body_reaches_no_app():
    seen = call([body(b"ab", True), {"type": "http.disconnect"}], CHUNKED)

    assert seen["called"] is False
    assert seen["sent"] == []
