"""Waiting agents against the production web server (gunicorn + uvicorn worker) on PostgreSQL.

Releases happen in this test process (another process than the web server), so the only
way a waiter hears of one within its wait is the web process's LISTEN connection (the
periodic safety re-check is pushed out to 10 minutes here), or the re-check after that
connection reconnects.
"""

import asyncio
import socket
import threading
import time
from typing import Any

import httpx
import pytest
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.db import connection, transaction

from breakpoints.services import breakpoint_create, feedback_add
from core.actors import Actor
from tests.support.aio import run_async
from tests.support.factories import ReviewerFactory
from tests.support.system import System

WAIT_ENV = {
    "BPM_WAIT_RECHECK_SECONDS": "600",  # no safety re-check within any test's wait
    # The console login below is over plain HTTP.
    "SESSION_COOKIE_SECURE": "0",
    "CSRF_COOKIE_SECURE": "0",
}
WAIT_SECONDS = 30


@pytest.fixture
def waiting_system(make_system) -> System:
    return make_system(beat=False, env=WAIT_ENV)


@pytest.fixture
def agent(waiting_system, transactional_db) -> dict[str, Any]:
    from accounts.tokens import token_create_for_agent

    raw = token_create_for_agent(agent_id="agent-a")[1]
    return {"token": raw, "headers": {"Authorization": f"Bearer {raw}"}}


@pytest.fixture
def reviewer(transactional_db):
    return ReviewerFactory(username="alice")


def create(n: int = 1) -> list[str]:
    actor = Actor.for_agent("agent-a")
    return [
        breakpoint_create(actor=actor, payload={"question": f"Ship {i}?"})[0].pk for i in range(n)
    ]


def release(breakpoint_id: str, reviewer, comment: str = "go") -> None:
    feedback_add(
        breakpoint_id=breakpoint_id, actor=Actor.for_user(reviewer), comment=comment, release=True
    )


class Waiting:
    """A long-poll running in a thread; .answer() joins it."""

    def __init__(self, system: System, headers: dict, path: str, timeout: float = 45):
        self._result: dict[str, Any] = {}

        def run() -> None:
            with httpx.Client(base_url=system.base_url, headers=headers, timeout=timeout) as client:
                self._result["response"] = client.get(path)

        self._thread = threading.Thread(target=run)
        self._thread.start()

    def answer(self) -> httpx.Response:
        self._thread.join(timeout=60)
        return self._result["response"]


def health(system: System) -> dict:
    return httpx.get(f"{system.base_url}/healthz", timeout=5).json()


def wait_for_waiters(system: System, count: int) -> None:
    system.wait_until(lambda: health(system)["waiters"] == count, what=f"{count} waiters")


def listener_pids() -> list[int]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = 'bpm-listener' "
            "AND datname = current_database()"
        )
        return [row[0] for row in cursor.fetchall()]


def test_a_waiter_is_answered_after_a_release_made_by_another_process(
    waiting_system, agent, reviewer
):
    (bp,) = create()
    waiting = Waiting(waiting_system, agent["headers"], f"/api/breakpoints/{bp}/status?wait=30")
    wait_for_waiters(waiting_system, 1)

    release(bp, reviewer, "ship it")

    response = waiting.answer()
    assert response.status_code == 200
    assert response.json()["status"] == "released"
    assert response.json()["result"]["feedback"] == "ship it"
    assert response.json()["pollAfterMs"] is None
    wait_for_waiters(waiting_system, 0)


def test_the_many_id_form_answers_when_any_one_is_decided(waiting_system, agent, reviewer):
    first, second, third = create(3)
    path = f"/api/breakpoints/status?id={first}&id={second}&id={third}&id=bp-unknown&wait=30"
    waiting = Waiting(waiting_system, agent["headers"], path)
    wait_for_waiters(waiting_system, 1)

    release(second, reviewer)

    response = waiting.answer()
    assert response.status_code == 200
    results = response.json()["results"]
    assert [r["breakpointId"] for r in results] == [first, second, third, "bp-unknown"]
    assert [r.get("status") for r in results] == ["waiting", "released", "waiting", None]
    assert results[3]["error"]["code"] == "not_found"


def test_a_rolled_back_release_wakes_nobody(waiting_system, agent, reviewer):
    (bp,) = create()
    waiting = Waiting(waiting_system, agent["headers"], f"/api/breakpoints/{bp}/status?wait=3")
    wait_for_waiters(waiting_system, 1)

    with pytest.raises(RuntimeError), transaction.atomic():
        release(bp, reviewer)
        raise RuntimeError("roll the release back")

    response = waiting.answer()
    assert response.status_code == 200
    assert response.json()["status"] == "waiting"
    assert response.json()["result"] is None


def test_a_release_made_while_the_listener_is_down_is_caught_after_it_reconnects(
    waiting_system, agent, reviewer
):
    (bp,) = create()
    waiting = Waiting(waiting_system, agent["headers"], f"/api/breakpoints/{bp}/status?wait=30")
    wait_for_waiters(waiting_system, 1)
    before = listener_pids()
    assert len(before) == 1

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [before[0]])
    release(bp, reviewer, "while nobody listened")

    response = waiting.answer()
    assert response.json()["status"] == "released"
    assert response.json()["result"]["feedback"] == "while nobody listened"
    waiting_system.wait_until(
        lambda: listener_pids() and listener_pids() != before, what="a new listener connection"
    )
    assert health(waiting_system)["listener"] == "up"
    assert "Wake-up listener lost" in waiting_system.web.output(last=200_000)


def test_two_hundred_waiters_block_neither_a_release_nor_the_console(
    waiting_system, agent, reviewer
):
    ids = create(200)
    # Hashed the way the web process checks it (the suite's own hasher is a fast one).
    hasher = PBKDF2PasswordHasher()
    reviewer.password = hasher.encode("a-long-passphrase-42", hasher.salt())
    reviewer.save()
    from accounts.tokens import token_create_for_user

    reviewer_token = token_create_for_user(user=reviewer)[1]

    async def scenario() -> tuple[list[httpx.Response], httpx.Response, httpx.Response]:
        limits = httpx.Limits(max_connections=300, max_keepalive_connections=300)
        async with httpx.AsyncClient(
            base_url=waiting_system.base_url, headers=agent["headers"], timeout=60, limits=limits
        ) as agents:
            waits = [
                asyncio.create_task(agents.get(f"/api/breakpoints/{bp}/status?wait={WAIT_SECONDS}"))
                for bp in ids
            ]
            await asyncio.to_thread(wait_for_waiters, waiting_system, 200)
            # While 200 agents wait: a reviewer releases one, and the console answers.
            # A 10 s client timeout would fail them if they queued behind the 30 s waits.
            async with httpx.AsyncClient(base_url=waiting_system.base_url, timeout=10) as person:
                released = await person.post(
                    f"/api/breakpoints/{ids[0]}/feedback",
                    json={"comment": "first", "release": True},
                    headers={"Authorization": f"Bearer {reviewer_token}"},
                )
                console = await console_queue(person)
            # Then all the others at once, through the service (another process).
            await asyncio.to_thread(release_all, ids[1:], reviewer)
            return await asyncio.gather(*waits), released, console

    answers, released, console = run_async(scenario())
    assert released.status_code == 201
    assert console.status_code == 200
    assert "Breakpoints" in console.text
    assert [a.status_code for a in answers] == [200] * 200
    assert {a.json()["status"] for a in answers} == {"released"}
    wait_for_waiters(waiting_system, 0)


def release_all(ids: list[str], reviewer) -> None:
    try:
        for bp in ids:
            release(bp, reviewer)
    finally:
        connection.close()


async def console_queue(client: httpx.AsyncClient) -> httpx.Response:
    """Log in to the console as alice and open the queue."""
    login = await client.get("/admin/login/")
    csrf = client.cookies["csrftoken"]
    await client.post(
        "/admin/login/?next=/admin/",
        data={
            "username": "alice",
            "password": "a-long-passphrase-42",
            "csrfmiddlewaretoken": csrf,
            "next": "/admin/",
        },
        headers={"Referer": str(login.url)},
    )
    return await client.get("/admin/", follow_redirects=True)


def test_a_client_that_disconnects_frees_its_waiter(waiting_system, agent):
    ids = create(3)
    sockets = []
    for bp in ids:
        sock = socket.create_connection(("127.0.0.1", waiting_system.web_port), timeout=5)
        sock.sendall(
            f"GET /api/breakpoints/{bp}/status?wait=60 HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {agent['token']}\r\n\r\n".encode()
        )
        sockets.append(sock)
    wait_for_waiters(waiting_system, 3)

    for sock in sockets:
        sock.close()

    wait_for_waiters(waiting_system, 0)


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("wait=61", "wait"),
        ("wait=-1", "wait"),
        ("wait=abc", "wait"),
        ("wait=1.5", "wait"),
        ("wait=", "wait"),
    ],
)
def test_bad_wait_is_a_400_in_the_envelope(waiting_system, agent, query, field):
    (bp,) = create()
    for path in (
        f"/api/breakpoints/{bp}/status?{query}",
        f"/api/breakpoints/status?id={bp}&{query}",
    ):
        response = httpx.get(waiting_system.base_url + path, headers=agent["headers"], timeout=10)
        assert response.status_code == 400, path
        assert response.json()["error"]["code"] == "validation_error"
        assert field in response.json()["error"]["details"]


def test_too_many_or_repeated_ids_are_a_400_in_the_envelope(waiting_system, agent):
    (bp,) = create()
    too_many = "&".join(f"id=bp-{i}" for i in range(101))
    for query in (too_many, f"id={bp}&id={bp}", "", "id="):
        response = httpx.get(
            f"{waiting_system.base_url}/api/breakpoints/status?{query}",
            headers=agent["headers"],
            timeout=10,
        )
        assert response.status_code == 400, query
        assert response.json()["error"]["code"] == "validation_error"
        assert "id" in response.json()["error"]["details"]


def test_a_wait_ends_with_the_breakpoint_still_waiting(waiting_system, agent):
    (bp,) = create()
    started = time.monotonic()

    response = httpx.get(
        f"{waiting_system.base_url}/api/breakpoints/{bp}/status?wait=1",
        headers=agent["headers"],
        timeout=10,
    )

    assert response.status_code == 200
    assert response.json()["status"] == "waiting"
    assert response.json()["pollAfterMs"] >= 1000
    assert time.monotonic() - started >= 1  # it did hold the answer
