"""`make run` on PostgreSQL keeps its database connections bounded (issue: a burst leaked 77).

The web line of Procfile.dev (what `make run` starts) is run against the test database;
after a burst of 200 concurrent requests it holds no more connections than its pool's
DATABASE_POOL_MAX, and the one LISTEN connection of its wake-up listener.
"""

import asyncio
import os
import sys
from pathlib import Path

import httpx
import pytest
from django.db import connection

from accounts.tokens import token_create_for_agent, token_create_for_user
from breakpoints.services import breakpoint_create
from core.actors import Actor
from tests.support.aio import run_async
from tests.support.factories import ReviewerFactory
from tests.support.make_run import procfile_web_command
from tests.support.net import free_port
from tests.support.system import Process, database_url, wait_until

POOL_MAX = 4
APP_NAME = "bpm-burst-test"


@pytest.fixture
def make_run_web(transactional_db, tmp_path):
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("BPM_", "CELERY_"))},
        "DEBUG": "1",
        "DATABASE_URL": database_url(),
        "DATABASE_POOL_MAX": str(POOL_MAX),
        # The burst queues 200 requests on 4 connections, and 12 threads contend for them:
        # on a slow, shared machine the last ones waited past 2 s, then past 15 s, for one
        # (CI). A request waits as long as the client does (60 s). This counts connections;
        # a pool that cannot hand one out in time is tests/web/test_outage.py's subject.
        "DATABASE_POOL_TIMEOUT": "60",
        "PGAPPNAME": APP_NAME,  # libpq names this server's pooled connections
        "BPM_PORT": str(port),
        "BPM_VAR_DIR": str(tmp_path / "var"),
        "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
    }
    web = Process("web", ["bash", "-c", f"exec {procfile_web_command()}"], env, tmp_path).start()
    base = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        try:
            return httpx.get(f"{base}/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_until(healthy, what="the make run web server", logs=[web])
        yield base
    finally:
        web.stop()


def server_connections() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s "
            "AND datname = current_database()",
            [APP_NAME],
        )
        return cursor.fetchone()[0]


def test_a_burst_of_200_requests_leaves_no_more_connections_than_the_pool(make_run_web):
    agent = token_create_for_agent(agent_id="agent-a")[1]
    reviewer = token_create_for_user(user=ReviewerFactory(username="alice"))[1]
    ids = [
        breakpoint_create(actor=Actor.for_agent("agent-a"), payload={"question": f"{n}?"})[0].pk
        for n in range(20)
    ]

    async def burst() -> list[int]:
        limits = httpx.Limits(max_connections=200)
        async with httpx.AsyncClient(base_url=make_run_web, timeout=60, limits=limits) as client:
            calls = []
            for n in range(200):
                bp = ids[n % len(ids)]
                if n % 4 == 0:  # Django (DRF) requests, on the web process's thread pool
                    calls.append(client.get("/api/breakpoints", headers=auth(reviewer)))
                elif n % 4 == 1:
                    calls.append(client.get(f"/api/breakpoints/{bp}", headers=auth(agent)))
                else:  # the status path, on its own few threads
                    calls.append(client.get(f"/api/breakpoints/{bp}/status", headers=auth(agent)))
            return [response.status_code for response in await asyncio.gather(*calls)]

    statuses = run_async(burst())

    assert statuses.count(200) == 200
    assert 0 < server_connections() <= POOL_MAX


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}
