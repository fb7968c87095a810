"""Slow request bodies against the production web server (gunicorn + uvicorn), issue 19.

Connections that send their headers and 2 bytes of a 1,000-byte body, then nothing, used
to hold every one of the web process's Django threads (each waited in wsgi.input for the
rest): /healthz, the console login and the API timed out for as long as they stayed open.
Bodies are now read in the async layer first (web/asgi_body.py), with a deadline and a
cap per client address, so the threads stay free for everyone else.
"""

import socket
from collections.abc import Iterator

import httpx
import pytest

from accounts.tokens import token_create_for_agent, token_create_for_user
from tests.support.factories import ReviewerFactory
from tests.support.system import System

SLOW_CONNECTIONS = 40  # from one address (127.0.0.1), five times BPM_WEB_THREADS
UPLOADS_PER_ADDRESS = 4
READ_SECONDS = 5
ANSWER_SECONDS = 2.0  # the client timeout of each check: a stall fails it


@pytest.fixture
def web(make_system) -> System:
    env = {
        "BPM_BODY_READ_SECONDS": str(READ_SECONDS),
        "BPM_MAX_UPLOADS_PER_ADDRESS": str(UPLOADS_PER_ADDRESS),
    }
    return make_system(beat=False, env=env)


def open_slow_body(web: System) -> socket.socket:
    """A POST whose headers promise 1,000 bytes of body, of which 2 are sent."""
    sock = socket.create_connection(("127.0.0.1", web.web_port), timeout=READ_SECONDS + 20)
    sock.sendall(
        b"POST /api/events/gh HTTP/1.1\r\n"
        b"Host: 127.0.0.1\r\n"
        b"Content-Type: application/json\r\n"
        b"Content-Length: 1000\r\n"
        b"\r\n"
        b'{"'
    )
    return sock


def status_of(sock: socket.socket) -> int:
    """The status code of the answer on `sock` (waits for it)."""
    head = b""
    while b"\r\n" not in head:
        chunk = sock.recv(4096)
        if not chunk:
            return 0  # closed without an answer
        head += chunk
    return int(head.split(b" ", 2)[1])


@pytest.fixture
def slow_bodies(web) -> Iterator[list[socket.socket]]:
    sockets = [open_slow_body(web) for _ in range(SLOW_CONNECTIONS)]
    try:
        yield sockets
    finally:
        for sock in sockets:
            sock.close()


def client(web: System, token: str = "") -> httpx.Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=web.base_url, headers=headers, timeout=ANSWER_SECONDS)


def test_slow_bodies_from_one_address_leave_the_service_answering(web, slow_bodies):
    token = token_create_for_user(user=ReviewerFactory(username="alice"))[1]
    with client(web) as anonymous, client(web, token) as reviewer:
        for _ in range(3):
            assert anonymous.get("/healthz").status_code == 200
            assert anonymous.get("/admin/login/").status_code == 200
            listed = reviewer.get("/api/breakpoints")
            assert listed.status_code == 200, listed.text

    statuses = sorted(status_of(sock) for sock in slow_bodies)

    # The few uploads the address may hold ran out of time; the rest were refused at once.
    assert statuses.count(408) == UPLOADS_PER_ADDRESS
    assert statuses.count(429) == SLOW_CONNECTIONS - UPLOADS_PER_ADDRESS


def test_a_body_that_arrives_slowly_within_the_deadline_is_served(web):
    body = b'{"runId": "run-1", "payload": {"question": "Ship it?"}}'
    token = token_create_for_agent(agent_id="agent-a")[1]
    with socket.create_connection(("127.0.0.1", web.web_port), timeout=20) as sock:
        sock.sendall(
            b"POST /api/breakpoints HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Authorization: Bearer " + token.encode() + b"\r\n"
            b"Content-Type: application/json\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body[:10]
        )
        with client(web, token) as agent:
            assert agent.get("/api/breakpoints").status_code == 200
        sock.sendall(body[10:])

        assert status_of(sock) == 201
