"""The service through PgBouncer in transaction mode (Debian's, 1.18: no protocol-level
prepared statements): web, worker and beat on DATABASE_URL = PgBouncer with
DATABASE_POOLER=transaction, the wake-up listener on DATABASE_LISTEN_URL = PostgreSQL
itself. Creates, long-polls, releases and webhooks, each write path run past psycopg's
prepare threshold (5): a statement prepared on one server connection and executed on
another would fail ("prepared statement ... does not exist")."""

import os
import threading
from collections.abc import Iterator

import httpx
import pytest
from django.db import connection

from accounts.tokens import token_create_for_agent, token_create_for_user
from tests.support.factories import ReviewerFactory
from tests.support.pgbouncer import PgBouncer, missing, running_pgbouncer
from tests.support.system import System, database_url

pytestmark = pytest.mark.django_db(transaction=True)

ROUNDS = 8  # past psycopg's prepare_threshold (5) on every write path


@pytest.fixture
def bouncer() -> Iterator[PgBouncer]:
    reason = missing()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    with running_pgbouncer() as bouncer:
        yield bouncer


@pytest.fixture
def pooled_system(make_system, bouncer) -> System:
    return make_system(
        env={
            "DATABASE_URL": database_url(via_port=bouncer.port),
            "DATABASE_POOLER": "transaction",
            "DATABASE_LISTEN_URL": database_url(),
        }
    )


def client(system: System, raw_token: str) -> httpx.Client:
    return httpx.Client(
        base_url=system.base_url, headers={"Authorization": f"Bearer {raw_token}"}, timeout=30
    )


def wait_for_status(agent: httpx.Client, bp: str, answers: list[httpx.Response]) -> None:
    answers.append(agent.get(f"/api/breakpoints/{bp}/status?wait=30"))


def test_create_wait_release_and_webhooks_through_pgbouncer_in_transaction_mode(
    pooled_system, bouncer, make_receiver, subscribe
):
    receiver = make_receiver()
    subscribe(receiver.url + "/hook", ["created", "released"])
    agent = client(pooled_system, token_create_for_agent(agent_id="pooled-agent")[1])
    reviewer = client(
        pooled_system, token_create_for_user(user=ReviewerFactory(username="rita"))[1]
    )

    for n in range(ROUNDS):
        created = agent.post("/api/breakpoints", json={"payload": {"question": f"Deploy {n}?"}})
        assert created.status_code == 201, created.text
        bp = created.json()["breakpointId"]
        answers: list[httpx.Response] = []
        waiter = threading.Thread(target=wait_for_status, args=(agent, bp, answers))
        waiter.start()
        released = reviewer.post(
            f"/api/breakpoints/{bp}/feedback",
            json={"comment": f"ok {n}", "release": True, "approved": True},
        )
        waiter.join(timeout=40)
        assert released.status_code == 201, released.text
        assert answers and answers[0].status_code == 200, answers
        assert answers[0].json()["status"] == "released"

    got = receiver.wait_for(lambda got: len(got) >= 2 * ROUNDS, timeout=60, what="the webhooks")
    types = sorted(hook.json()["type"] for hook in got)
    assert types == ["breakpoint.created"] * ROUNDS + ["breakpoint.released"] * ROUNDS
    assert "prepared statement" not in bouncer.log()
    for process in pooled_system.processes:
        assert "prepared statement" not in process.output(last=10**7), process.name
    # The service's work went through PgBouncer: its transactions are counted there.
    name = connection.settings_dict["NAME"]
    (stats,) = [row for row in bouncer.admin("SHOW STATS") if row["database"] == name]
    assert stats["total_xact_count"] >= 4 * ROUNDS
    # The listener did not: it holds its own session on PostgreSQL (DATABASE_LISTEN_URL).
    clients = bouncer.admin("SHOW CLIENTS")
    assert all(row.get("application_name") != "bpm-listener" for row in clients), clients
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'bpm-listener' "
            "AND datname = current_database()"
        )
        assert cursor.fetchone()[0] >= 1
