"""The ASGI status handler, in process: the same contract as the DRF views, and waits on the hub.

These run the project's ASGI application (config.asgi) with httpx's ASGI transport, on
whichever database the suite uses; the bridge threads read through their own connections,
so the data is committed (transactional_db). tests/live/integration/test_waiting.py drives the
production server over real HTTP on PostgreSQL.
"""

import asyncio
import resource
import subprocess
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from django.db import connection

from accounts.tokens import token_create_for_agent, token_create_for_user, token_revoke
from breakpoints.services import breakpoint_cancel, feedback_add
from breakpoints.waiting.hub import get_hub
from config.asgi import application
from core.actors import Actor
from tests.support.aio import run_asgi, until
from tests.support.factories import ReviewerFactory, UserFactory
from web import openfiles

pytestmark = pytest.mark.django_db(transaction=True)


def run(scenario: Callable[[httpx.AsyncClient], Awaitable[Any]]) -> Any:
    return run_asgi(scenario)


def get(path: str, token: str | None = None, **headers: str) -> httpx.Response:
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return run(lambda client: client.get(path, headers=headers))


@pytest.fixture
def token() -> str:
    return token_create_for_agent(agent_id="agent-a")[1]


@pytest.fixture(autouse=True)
def _testserver_allowed(settings):
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]


@pytest.fixture(autouse=True)
def _no_periodic_recheck(settings):
    """Only a notification can wake a waiter within a test's wait."""
    settings.BPM_WAIT_RECHECK_SECONDS = 600
    settings.BPM_WAIT_FALLBACK_RECHECK_SECONDS = 600


def in_thread(function: Callable[[], Any]) -> Callable[[], Any]:
    """A database write from another thread (its own connection, closed after)."""

    def call() -> Any:
        try:
            return function()
        finally:
            connection.close()

    return call


# --- the same answers as the DRF views ------------------------------------------------


def test_status_answers_like_the_drf_view(token, make_breakpoint, agent_client):
    bp = make_breakpoint()

    response = get(f"/api/breakpoints/{bp.pk}/status", token, **{"X-Request-ID": "req-42"})

    assert response.status_code == 200
    assert response.headers["x-request-id"] == "req-42"
    assert response.json() == agent_client.get(f"/api/breakpoints/{bp.pk}/status").json()
    assert response.json()["pollAfterMs"] == 1000


def test_another_agents_breakpoint_is_not_found(make_breakpoint):
    bp = make_breakpoint(agent_id="agent-b")
    token = token_create_for_agent(agent_id="agent-a")[1]

    response = get(f"/api/breakpoints/{bp.pk}/status?wait=5", token)

    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_many_ids_report_a_hidden_one_exactly_like_a_missing_one(token, make_breakpoint):
    mine = make_breakpoint()
    theirs = make_breakpoint(agent_id="agent-b")

    response = get(f"/api/breakpoints/status?id={mine.pk}&id={theirs.pk}&id=bp-nope", token)

    assert response.status_code == 200
    hidden, missing = response.json()["results"][1:]
    assert hidden == {"breakpointId": theirs.pk, "error": missing["error"]}
    assert missing["error"]["code"] == "not_found"
    assert response.json()["results"][0]["status"] == "waiting"


def test_an_invalid_or_revoked_token_is_401_naming_the_scheme(make_breakpoint):
    bp = make_breakpoint()
    stored, raw = token_create_for_agent(agent_id="agent-a")
    assert get(f"/api/breakpoints/{bp.pk}/status", raw).status_code == 200
    token_revoke(prefix_or_id=str(stored.pk))

    for bad in (raw, "bpm_not-a-real-token", " "):
        response = get(f"/api/breakpoints/{bp.pk}/status", bad)
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "not_authenticated"
        assert response.headers["www-authenticate"] == 'Bearer realm="api"'


def test_a_person_without_a_role_is_403(make_breakpoint):
    bp = make_breakpoint()
    raw = token_create_for_user(user=UserFactory(username="nobody"))[1]

    response = get(f"/api/breakpoints/{bp.pk}/status", raw)

    assert response.status_code == 403
    assert response.json()["error"]["code"] == "permission_denied"


def test_a_reviewer_polls_any_breakpoint(make_breakpoint):
    bp = make_breakpoint(agent_id="agent-z")
    raw = token_create_for_user(user=ReviewerFactory(username="alice"))[1]

    assert get(f"/api/breakpoints/{bp.pk}/status", raw).json()["status"] == "waiting"


def test_without_a_bearer_token_django_answers(make_breakpoint):
    bp = make_breakpoint()

    response = get(f"/api/breakpoints/{bp.pk}/status")

    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"
    assert "x-request-id" in response.headers


@pytest.mark.parametrize(
    "query",
    ["wait=61", "wait=-1", "wait=abc", "wait=1.5", "wait=", "wait=1e9", "wait=%00"],
)
def test_bad_wait_is_400_in_the_envelope(token, make_breakpoint, query):
    bp = make_breakpoint()

    for path in (
        f"/api/breakpoints/{bp.pk}/status?{query}",
        f"/api/breakpoints/status?id={bp.pk}&{query}",
    ):
        response = get(path, token)
        assert response.status_code == 400, path
        assert response.json()["error"]["code"] == "validation_error"
        assert "wait" in response.json()["error"]["details"]


@pytest.mark.parametrize(
    "query",
    [
        "&".join(f"id=bp-{n}" for n in range(101)),
        "id=bp-1&id=bp-2&id=bp-1",
        "",
        "id=",
        "wait=5",
    ],
)
def test_too_many_repeated_or_missing_ids_are_400(token, query):
    response = get(f"/api/breakpoints/status?{query}", token)

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "validation_error"
    assert "id" in response.json()["error"]["details"]


def test_hostile_ids_are_simply_not_found(token):
    for path_id in ("%00", "x" * 500, "bp-%E2%80%AE"):
        assert get(f"/api/breakpoints/{path_id}/status", token).status_code == 404
    response = get("/api/breakpoints/status?id=%00&id=" + "y" * 500, token)
    assert [r["error"]["code"] for r in response.json()["results"]] == ["not_found"] * 2


# --- waiting --------------------------------------------------------------------------


def test_a_decided_breakpoint_answers_at_once_even_with_wait(token, make_breakpoint):
    bp = make_breakpoint()
    breakpoint_cancel(breakpoint_id=bp.pk, actor=Actor.for_agent("agent-a"))

    response = get(f"/api/breakpoints/{bp.pk}/status?wait=60", token)

    assert response.json()["status"] == "cancelled"
    assert response.json()["pollAfterMs"] is None


def test_a_waiter_is_woken_by_a_release_committed_elsewhere(token, make_breakpoint):
    bp = make_breakpoint()
    reviewer = ReviewerFactory(username="alice")

    async def scenario(client: httpx.AsyncClient) -> httpx.Response:
        waiting = asyncio.create_task(
            client.get(
                f"/api/breakpoints/{bp.pk}/status?wait=30",
                headers={"Authorization": f"Bearer {token}"},
            )
        )
        await until(lambda: get_hub().waiter_count == 1)
        await asyncio.to_thread(
            in_thread(
                lambda: feedback_add(
                    breakpoint_id=bp.pk,
                    actor=Actor.for_user(reviewer),
                    comment="ship it",
                    release=True,
                )
            )
        )
        return await asyncio.wait_for(waiting, 20)

    response = run(scenario)

    assert response.json()["status"] == "released"
    assert response.json()["result"]["feedback"] == "ship it"


def test_a_waiter_sees_its_ttl_expire(token, make_breakpoint):
    bp = make_breakpoint(ttl_seconds=1)

    response = get(f"/api/breakpoints/{bp.pk}/status?wait=20", token)

    assert response.json()["status"] == "expired"
    assert response.json()["result"]["approved"] is False


def test_a_client_that_goes_away_frees_its_waiter(token, make_breakpoint):
    bp = make_breakpoint()

    async def scenario(client: httpx.AsyncClient) -> tuple[list, int]:
        gone = asyncio.Event()
        sent: list = []
        messages = iter([{"type": "http.request", "body": b"", "more_body": False}])

        async def receive() -> dict:
            message = next(messages, None)
            if message is None:
                await gone.wait()
                return {"type": "http.disconnect"}
            return message

        async def send(message: dict) -> None:
            sent.append(message)

        scope = {
            "type": "http",
            "method": "GET",
            "path": f"/api/breakpoints/{bp.pk}/status",
            "query_string": b"wait=60",
            "headers": [(b"authorization", f"Bearer {token}".encode())],
        }
        request = asyncio.create_task(application(scope, receive, send))
        await until(lambda: get_hub().waiter_count == 1)
        gone.set()
        await asyncio.wait_for(request, 5)
        return sent, get_hub().waiter_count

    sent, waiters = run(scenario)

    assert sent == []
    assert waiters == 0


def test_waits_beyond_the_per_token_cap_are_429_with_retry_after(token, make_breakpoint, settings):
    settings.BPM_MAX_WAITS_PER_TOKEN = 1
    first, second = make_breakpoint(), make_breakpoint()
    auth = {"Authorization": f"Bearer {token}"}

    async def scenario(
        client: httpx.AsyncClient,
    ) -> tuple[httpx.Response, httpx.Response, httpx.Response]:
        held = asyncio.create_task(
            client.get(f"/api/breakpoints/{first.pk}/status?wait=2", headers=auth)
        )
        await until(lambda: get_hub().waiter_count == 1)
        refused = await client.get(f"/api/breakpoints/{second.pk}/status?wait=2", headers=auth)
        short = await client.get(f"/api/breakpoints/{second.pk}/status", headers=auth)
        return await held, refused, short

    held, refused, short = run(scenario)

    assert held.json()["status"] == "waiting"
    assert refused.status_code == 429
    assert refused.json()["error"]["code"] == "throttled"
    assert refused.headers["retry-after"] == "1"
    assert short.status_code == 200  # a poll without wait is never capped


def test_waits_beyond_the_process_cap_are_503_with_retry_after(token, make_breakpoint, settings):
    settings.BPM_MAX_WAITERS = 0
    bp = make_breakpoint()

    response = get(f"/api/breakpoints/{bp.pk}/status?wait=5", token)

    assert response.status_code == 503
    assert response.json()["error"]["code"] == "unavailable"
    assert response.headers["retry-after"] == "1"


def test_a_low_open_file_limit_lowers_the_caps_and_a_refused_wait_closes_its_connection(
    token, make_breakpoint, monkeypatch
):
    """Room for two sockets of waiters: one per token; the refused one's socket is freed."""
    monkeypatch.setattr(openfiles, "open_file_limit", lambda: openfiles.HEADROOM + 2)
    first, second = make_breakpoint(), make_breakpoint()
    auth = {"Authorization": f"Bearer {token}"}

    async def scenario(client: httpx.AsyncClient) -> tuple[httpx.Response, httpx.Response]:
        held = asyncio.create_task(
            client.get(f"/api/breakpoints/{first.pk}/status?wait=2", headers=auth)
        )
        await until(lambda: get_hub().waiter_count == 1)
        refused = await client.get(f"/api/breakpoints/{second.pk}/status?wait=2", headers=auth)
        return await held, refused

    held, refused = run(scenario)

    assert held.json()["status"] == "waiting"
    assert refused.status_code == 429  # BPM_MAX_WAITS_PER_TOKEN is 1,000
    assert refused.headers["retry-after"] == "1"
    assert refused.headers["connection"] == "close"


@pytest.mark.parametrize(
    ("limit", "caps"),
    [
        (1024, (768, 384)),  # the default limit: 768 waiters, 384 per token
        (1_048_576, (20_000, 1_000)),  # a raised one: the settings
        (openfiles.HEADROOM, (1, 1)),  # no room at all: still one
    ],
)
def test_waiter_caps_fit_the_open_file_limit(limit, caps):
    assert openfiles.waiter_caps(20_000, 1_000, limit) == caps


def test_a_web_process_raises_its_open_file_limit_and_warns_when_it_stays_low():
    script = (
        "import logging, resource, sys\n"
        "logging.basicConfig(stream=sys.stdout, format='%(message)s')\n"
        "from web.openfiles import raise_open_file_limit\n"
        "print(raise_open_file_limit(1000))\n"
    )

    def run_with(soft: int, hard: int) -> list[str]:
        done = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            timeout=60,
            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard)),
            check=True,
        )
        return done.stdout.splitlines()

    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert hard >= 2048, "this test needs a hard limit the web process can raise its soft one to"
    low = run_with(512, 512)
    raised = run_with(512, hard)
    assert low[-1] == "512" and "leaves room for 256 waiting agents" in low[0]
    assert raised == [str(hard)]  # raised to the hard limit: room enough, no warning
