"""Hot paths whose plan cannot depend on the planner's statistics: on a table never
analyzed (autovacuum off, or a busy new agent between two ANALYZEs), after one agent's
10,000 creates, the status poll reads by primary key (the agent's ownership checked on the
rows it returns), a decision reads and writes its breakpoint by id, and a token is found
by its hash (PostgreSQL: EXPLAIN of exactly the SQL each runs). The agent's list page is
not among them yet: without statistics it sorts the agent's whole history."""

import json
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from accounts.tokens import token_create_for_agent
from breakpoints.models import Breakpoint
from breakpoints.services import feedback_add
from breakpoints.services.reads import breakpoint_statuses_read
from core.actors import Actor, AgentPrincipal
from tests.conftest import bearer_client, on_postgres

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(not on_postgres(), reason="PostgreSQL's planner"),
]

BUSY = "busy-agent"


@pytest.fixture
def busy_history(db) -> list[str]:
    """10,000 breakpoints of one agent and a few of others, never analyzed."""
    Breakpoint.objects.bulk_create(
        [Breakpoint(agent_id=BUSY, key="deploy", payload={"question": "?"}) for _ in range(10_000)],
        batch_size=2_000,
    )
    Breakpoint.objects.bulk_create(
        [
            Breakpoint(agent_id=f"agent-{n}", key="deploy", payload={"question": "?"})
            for n in range(50)
        ]
    )
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_statistic WHERE starelid = %s::regclass",
            [Breakpoint._meta.db_table],
        )
        assert cursor.fetchone()[0] == 0, "the table must not have been analyzed"
    return list(Breakpoint.objects.filter(agent_id=BUSY).values_list("pk", flat=True)[:50])


def _scans(plan: dict[str, Any]) -> list[dict[str, Any]]:
    found = [plan] if "Scan" in plan.get("Node Type", "") else []
    for child in plan.get("Plans", []):
        found += _scans(child)
    return found


def _polled_sql(principal: Any, ids: list[str]) -> tuple[str, dict]:
    with CaptureQueriesContext(connection) as queries:
        rows = breakpoint_statuses_read(principal, ids)
    (read,) = [q["sql"] for q in queries.captured_queries if Breakpoint._meta.db_table in q["sql"]]
    return read, rows


@pytest.mark.parametrize("count", [1, 50])
def test_the_status_poll_reads_by_primary_key_whatever_the_statistics(busy_history, count):
    ids = busy_history[:count]

    sql, rows = _polled_sql(AgentPrincipal(BUSY), ids)

    assert sorted(rows) == sorted(ids)
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (FORMAT JSON) " + sql)
        plan = cursor.fetchone()[0]
    plan = json.loads(plan) if isinstance(plan, str) else plan
    scans = _scans(plan[0]["Plan"])
    assert scans, plan
    assert all(scan["Node Type"] != "Seq Scan" for scan in scans), plan
    indexes = [scan for scan in scans if "Index Name" in scan]  # a bitmap heap scan's below
    assert indexes, plan
    for scan in indexes:
        assert "agent" not in scan["Index Name"], scan
        assert "(id)" in scan["Index Cond"], scan
    assert "agent_id" not in sql.split(" WHERE ", 1)[1]


def test_another_agents_ids_are_absent_as_before(busy_history):
    other = Breakpoint.objects.filter(agent_id="agent-7").values_list("pk", flat=True).first()

    rows = breakpoint_statuses_read(AgentPrincipal(BUSY), [busy_history[0], other])

    assert list(rows) == [busy_history[0]]
    assert "agent_id" not in rows[busy_history[0]]


def _explained_scans(sql: str) -> list[dict[str, Any]]:
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (FORMAT JSON) " + sql)
        plan = cursor.fetchone()[0]
    plan = json.loads(plan) if isinstance(plan, str) else plan
    return _scans(plan[0]["Plan"])


def test_a_decisions_reads_and_writes_of_the_breakpoint_go_by_its_id(busy_history, reviewer):
    with CaptureQueriesContext(connection) as queries:
        feedback_add(
            breakpoint_id=busy_history[0],
            actor=Actor.for_user(reviewer),
            comment="",
            release=True,
            approved=True,
        )

    table = f'"{Breakpoint._meta.db_table}"'
    touching = [q["sql"] for q in queries.captured_queries if table in q["sql"]]
    assert touching
    for sql in touching:
        on_breakpoints = [
            scan
            for scan in _explained_scans(sql)
            if scan.get("Relation Name") == Breakpoint._meta.db_table
        ]
        for scan in on_breakpoints:
            assert scan["Node Type"] != "Seq Scan", sql
            assert "agent" not in scan.get("Index Name", ""), sql


def test_the_token_lookup_goes_by_the_tokens_hash(busy_history):
    raw = token_create_for_agent(agent_id=BUSY)[1]
    for _ in range(200):
        token_create_for_agent(agent_id=BUSY)

    with CaptureQueriesContext(connection) as queries:
        response = bearer_client(raw).get(f"/api/breakpoints/{busy_history[0]}/status")

    assert response.status_code == 200
    (lookup,) = [q["sql"] for q in queries.captured_queries if "token_hash" in q["sql"]]
    scans = [
        s for s in _explained_scans(lookup) if s.get("Relation Name") == "breakpoints_apitoken"
    ]
    assert [s.get("Index Cond", "") for s in scans] and all(
        "token_hash" in s.get("Index Cond", "") for s in scans
    ), scans
