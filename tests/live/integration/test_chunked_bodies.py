"""Chunked request bodies over real HTTP, against the production web server (gunicorn + uvicorn).

httpx sends a generator body as `Transfer-Encoding: chunked` with no Content-Length;
before web/asgi_body.py Django (WSGI behind a2wsgi) read such a body as empty.
"""

import json
from collections.abc import Iterator

import httpx
import pytest

from breakpoints.models import Breakpoint
from tests.support.system import System

LIMIT = 4000


@pytest.fixture
def web(make_system) -> System:
    return make_system(beat=False, env={"BPM_MAX_BODY_BYTES": str(LIMIT)})


@pytest.fixture
def token(transactional_db) -> str:
    from accounts.tokens import token_create_for_agent

    return token_create_for_agent(agent_id="agent-a")[1]


def chunks(body: bytes, size: int) -> Iterator[bytes]:
    for i in range(0, len(body), size):
        yield body[i : i + size]


def post_chunked(web: System, token: str, body: bytes) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    with httpx.Client(base_url=web.base_url, timeout=20) as client:
        request = client.build_request(
            "POST", "/api/breakpoints", content=chunks(body, 100), headers=headers
        )
        assert request.headers["transfer-encoding"] == "chunked"
        assert "content-length" not in request.headers
        return client.send(request)


def test_a_chunked_create_is_stored_whole(web, token):
    created = {"runId": "run-9", "payload": {"question": "Ship it?", "note": "y" * 1000}}

    response = post_chunked(web, token, json.dumps(created).encode())

    assert response.status_code == 201, response.text
    assert response.json()["payload"] == created["payload"]
    assert Breakpoint.objects.get().run_id == "run-9"


def test_a_chunked_body_over_the_limit_is_413_envelope(web, token):
    response = post_chunked(web, token, json.dumps({"payload": {"q": "x" * LIMIT}}).encode())

    assert response.status_code == 413
    assert response.json()["error"]["code"] == "payload_too_large"
    assert response.json()["error"]["details"] == {"limit": LIMIT}
    assert not Breakpoint.objects.exists()
