"""The status poll's plan cannot depend on the planner's statistics: on a table never
analyzed (autovacuum off, or a busy new agent between two ANALYZEs), after one agent's
10,000 creates, its query is read by primary key, and the agent's ownership is checked on
the rows it returns (PostgreSQL: EXPLAIN of exactly the SQL the poll runs)."""

import json
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from breakpoints.models import Breakpoint
from breakpoints.services.reads import breakpoint_statuses_read
from core.actors import AgentPrincipal
from tests.conftest import on_postgres

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
