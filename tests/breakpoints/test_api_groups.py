"""GET /api/breakpoints/groups: the waiting breakpoints counted by key and run."""

from datetime import timedelta

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from breakpoints.models import Breakpoint
from core.limits import MAX_QUEUE_GROUPS
from tests.support.api import assert_error, parse_time
from tests.support.factories import BreakpointFactory

URL = "/api/breakpoints/groups"
WRITE = "mcp.filesystem.write-file"
READ = "mcp.filesystem.read-file"


def waiting(key: str, run_id: str | None, count: int, minutes_ago: int = 0) -> list[Breakpoint]:
    created = timezone.now() - timedelta(minutes=minutes_ago)
    rows = BreakpointFactory.create_batch(count, key=key, run_id=run_id)
    Breakpoint.objects.filter(pk__in=[bp.pk for bp in rows]).update(created_at=created)
    return rows


def test_groups_count_by_key_and_run_largest_first(reviewer_client):
    waiting(WRITE, "r-42", 3, minutes_ago=5)
    oldest = waiting(WRITE, "r-42", 1, minutes_ago=30)[0]
    waiting(WRITE, "r-43", 2, minutes_ago=40)
    waiting(READ, None, 2, minutes_ago=10)
    waiting(READ, "r-42", 1)
    finished = BreakpointFactory(key=WRITE, run_id="r-42", status="released")
    assert finished.status == "released"

    response = reviewer_client.get(URL)

    assert response.status_code == 200
    groups = response.json()["results"]
    assert [(g["key"], g["runId"], g["count"]) for g in groups] == [
        (WRITE, "r-42", 4),
        (WRITE, "r-43", 2),  # two each: the longer waiting first
        (READ, None, 2),
        (READ, "r-42", 1),
    ]
    assert set(groups[0]) == {"key", "runId", "count", "oldestCreatedAt"}
    assert groups[0]["oldestCreatedAt"].endswith("Z")
    stored = Breakpoint.objects.get(pk=oldest.pk).created_at
    assert parse_time(groups[0]["oldestCreatedAt"]) == stored


def test_status_waiting_is_the_only_status_grouped(reviewer_client):
    waiting(WRITE, "r-1", 1)

    assert reviewer_client.get(URL, {"status": "waiting"}).json()["results"][0]["count"] == 1
    refused = assert_error(reviewer_client.get(URL, {"status": "released"}), 400)
    assert "status" in refused["details"]


def test_at_most_a_hundred_groups_are_listed(reviewer_client):
    for n in range(MAX_QUEUE_GROUPS):
        waiting(WRITE, f"r-{n}", 1)
    waiting(READ, "big", 2)

    groups = reviewer_client.get(URL).json()["results"]

    assert len(groups) == MAX_QUEUE_GROUPS
    assert (groups[0]["runId"], groups[0]["count"]) == ("big", 2)


def test_one_grouping_query_however_many_groups(reviewer_client):
    reviewer_client.get(URL)  # warm-up: the token's first use records last_used_at
    waiting(WRITE, "r-1", 2)
    with CaptureQueriesContext(connection) as few:
        assert len(reviewer_client.get(URL).json()["results"]) == 1
    for n in range(40):
        waiting(f"key-{n}", f"r-{n}", 2)
    with CaptureQueriesContext(connection) as many:
        assert len(reviewer_client.get(URL).json()["results"]) == 41

    assert len(many.captured_queries) == len(few.captured_queries)
    grouping = [q["sql"] for q in many.captured_queries if "GROUP BY" in q["sql"]]
    assert len(grouping) == 1


def test_agents_are_403(agent_client):
    assert_error(agent_client.get(URL), 403, "permission_denied")


def test_a_person_without_a_role_is_403(nobody_client):
    assert_error(nobody_client.get(URL), 403, "permission_denied")


def test_a_groups_breakpoints_are_listed_by_its_key_and_run(reviewer_client):
    """GET /api/breakpoints?status=waiting&key=K&runId=R lists exactly one group."""
    group = waiting(WRITE, "r-42", 2)
    waiting(WRITE, "r-43", 1)
    waiting(READ, "r-42", 1)

    response = reviewer_client.get(
        "/api/breakpoints", {"status": "waiting", "key": WRITE, "runId": "r-42"}
    )

    assert response.status_code == 200
    listed = sorted(row["breakpointId"] for row in response.json()["results"])
    assert listed == sorted(bp.pk for bp in group)
