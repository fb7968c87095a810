"""Latency, queries and query plans of the hot paths, in-process, on a seeded database.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bpm_bench python benchmarks/api_hot_paths.py

Runs requests through the whole Django stack with the test Client (no network): the
agent's status poll, the reviewers' list with each filter, and the console queue. First it
times beat's expectedDecision refresh over the seeded history (so the polls carry figures).
For each it prints p50/p95/p99 latency, the queries per request (CaptureQueriesContext)
and the access paths (indexes) of the EXPLAIN of exactly the SQL the endpoint ran
(EXPLAIN ANALYZE on PostgreSQL). Run benchmarks/seed.py first. Mints two temporary
tokens and deletes them at the end, so it also refuses a database without "bench".
"""

import argparse
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlencode, urlsplit

from _common import (
    AGENT_PREFIX,
    POLL_AGENT,
    REVIEWER,
    TOKEN_NAME,
    bootstrap,
    database_label,
    execution_ms,
    explain,
    guard_database,
    peak_rss_mib,
    print_table,
    scans,
    summary_ms,
)

BP_TABLE = '"breakpoints_breakpoint"'


@dataclass
class Case:
    name: str
    path: Callable[[], str]  # the next URL to request
    iterations: int
    client: object
    seconds: list[float] = field(default_factory=list)
    queries: list[list[dict]] = field(default_factory=list)  # per sampled request
    db_seconds: list[float] = field(default_factory=list)  # per sampled request
    pings: list[int] = field(default_factory=list)  # health-check SELECT 1 per request
    sizes: list[int] = field(default_factory=list)
    status_codes: set[int] = field(default_factory=set)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--poll-iterations", type=int, default=2000)
    parser.add_argument("--iterations", type=int, default=40, help="per list/console case")
    parser.add_argument("--sample", type=int, default=5, help="requests whose queries we log")
    parser.add_argument(
        "--agent",
        action="append",
        help=f"for ?agentId= (repeatable; default {AGENT_PREFIX}04 (10%%), {AGENT_PREFIX}08 (2%%))",
    )
    parser.add_argument(
        "--tags",
        action="append",
        help="comma-separated, for ?tag=&tag= (repeatable; default deploy,production (common) "
        "and compliance,billing (rare))",
    )
    parser.add_argument("--search", default="deploy", help="a common search term")
    parser.add_argument("--rare-search", default="rollback", help="a selective search term")
    parser.add_argument("--plans", choices=["main", "all", "none"], default="main")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--force", action="store_true", help="allow a database without 'bench'")
    args = parser.parse_args()
    agents = args.agent or [f"{AGENT_PREFIX}04", f"{AGENT_PREFIX}08"]
    tag_sets = [[t for t in ts.split(",") if t] for ts in args.tags or []] or [
        ["deploy", "production"],
        ["compliance", "billing"],
    ]

    bootstrap()
    guard_database(args.force)

    from django.conf import settings
    from django.db import connection
    from django.test import Client

    from accounts.models import ApiToken
    from accounts.tokens import token_create_for_agent, token_create_for_user
    from breakpoints.models import Breakpoint

    rng = random.Random(args.seed)
    total = Breakpoint.objects.count()
    mine = list(Breakpoint.objects.filter(agent_id=POLL_AGENT).values_list("pk", flat=True))
    if not mine:
        raise SystemExit("No benchmark rows: run benchmarks/seed.py first.")
    others = list(
        Breakpoint.objects.exclude(agent_id=POLL_AGENT).values_list("pk", flat=True)[:1000]
    )
    run_id = Breakpoint.objects.filter(agent_id=agents[0]).values_list("run_id", flat=True)[0]

    from django.contrib.auth import get_user_model

    reviewer = get_user_model().objects.get(username=REVIEWER)
    _, agent_raw = token_create_for_agent(agent_id=POLL_AGENT, name=TOKEN_NAME)
    _, user_raw = token_create_for_user(user=reviewer, name=TOKEN_NAME)
    console = Client()
    try:
        agent = Client(headers={"authorization": f"Bearer {agent_raw}"})
        api = Client(headers={"authorization": f"Bearer {user_raw}"})
        console.force_login(reviewer)

        print(
            f"database: {database_label()}  breakpoints: {total:,}  DEBUG={settings.DEBUG}  "
            f"load avg: {' '.join(f'{v:.2f}' for v in os.getloadavg())} on {os.cpu_count()} cores"
        )
        print(
            f"poll agent {POLL_AGENT}: {len(mine):,} breakpoints; health checks "
            f"{'on' if connection.settings_dict.get('CONN_HEALTH_CHECKS') else 'off'}, "
            f"CONN_MAX_AGE={connection.settings_dict.get('CONN_MAX_AGE')}"
        )

        def poll_path() -> str:
            return f"/api/breakpoints/{rng.choice(mine)}/status"

        def fixed(path: str) -> Callable[[], str]:
            return lambda: path

        api_cases = [
            ("list default (newest first)", ""),
            ("list ?status=waiting", urlencode({"status": "waiting"})),
            *[
                ("list ?tag=" + "&tag=".join(tags), urlencode([("tag", t) for t in tags]))
                for tags in tag_sets
            ],
            *[(f"list ?agentId={a}", urlencode({"agentId": a})) for a in agents],
            (f"list ?runId={run_id}", urlencode({"runId": run_id})),
            (f"list ?search={args.search}", urlencode({"search": args.search})),
            (f"list ?search={args.rare_search}", urlencode({"search": args.rare_search})),
            ("list ?search=no-such-text", urlencode({"search": "no-such-text"})),
            ("list ?assignedTo=me", urlencode({"assignedTo": "me"})),
            ("list ?ordering=createdAt", urlencode({"ordering": "createdAt"})),
        ]
        cases = [
            Case("poll /status (own, random ids)", poll_path, args.poll_iterations, agent),
            Case(
                "poll /status (other agent's: 404)",
                lambda: f"/api/breakpoints/{rng.choice(others)}/status",
                max(50, args.poll_iterations // 10),
                agent,
            ),
        ]
        for name, query in api_cases:
            cases.append(
                Case(
                    name,
                    fixed("/api/breakpoints" + (f"?{query}" if query else "")),
                    args.iterations,
                    api,
                )
            )
        first_page = api.get("/api/breakpoints").json()
        if first_page.get("next"):
            parts = urlsplit(first_page["next"])
            cases.append(
                Case(
                    "list page 2 (cursor)",
                    fixed(f"{parts.path}?{parts.query}"),
                    args.iterations,
                    api,
                )
            )
        queue = "/admin/breakpoints/breakpoint/"
        for name, query in [
            ("console queue (default order)", ""),
            ("console queue ?status__exact=waiting", "status__exact=waiting"),
            (f"console queue ?tag={tag_sets[0][0]}", urlencode({"tag": tag_sets[0][0]})),
            (f"console queue ?q={args.rare_search}", urlencode({"q": args.rare_search})),
        ]:
            cases.append(
                Case(name, fixed(queue + (f"?{query}" if query else "")), args.iterations, console)
            )

        decision_times_print()  # first: the polls then carry the seeded history's figures
        started = time.perf_counter()
        for case in cases:
            run(case, args.sample)
        elapsed = time.perf_counter() - started

        report(cases, elapsed)
        plans(cases, args.plans)
        seq_scans_print(cases)
        indexes_print(cases)
    finally:
        console.logout()  # its session row
        ApiToken.objects.filter(name=TOKEN_NAME).delete()
    print(f"\npeak RSS of this process: {peak_rss_mib():.0f} MiB")


# The refresh runs every 5 minutes under Celery's 120 s soft time limit.
TARGET_DECISION_TIMES_SECONDS = 60.0


def decision_times_print() -> None:
    """Time beat's refresh of the expectedDecision aggregate over the seeded history (it
    replaces DecisionTimeStat: the status polls below then carry figures, as in production)."""
    from breakpoints.services import decision_times_refresh

    started = time.perf_counter()
    groups = decision_times_refresh()
    seconds = time.perf_counter() - started
    verdict = "PASS" if seconds < TARGET_DECISION_TIMES_SECONDS else "FAIL"
    print(
        f"{verdict}  expectedDecision refresh (last 90 days of human decisions): {groups} "
        f"groups in {seconds:.2f} s  (target < {TARGET_DECISION_TIMES_SECONDS:.0f} s)"
    )


def run(case: Case, sample: int) -> None:
    """Warm up, log the queries of `sample` requests, then time `iterations` requests.

    Each request starts the way a served one does (close_old_connections, which the test
    Client skips): with CONN_HEALTH_CHECKS that costs a SELECT 1 per request, outside the
    query log; we count those separately.
    """
    from django.db import close_old_connections, connection
    from django.test.utils import CaptureQueriesContext

    pings = [0]
    usable = connection.is_usable

    def counting_is_usable() -> bool:
        pings[0] += 1
        return usable()

    def request() -> float:
        close_old_connections()
        started = time.perf_counter()
        response = case.client.get(case.path())
        took = time.perf_counter() - started
        case.status_codes.add(response.status_code)
        case.sizes.append(len(response.content))
        return took

    db_time = [0.0]

    def timed_execute(execute, sql, params, many, context):
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            db_time[0] += time.perf_counter() - started

    for _ in range(3):
        request()
    connection.is_usable = counting_is_usable
    try:
        for _ in range(sample):
            pings[0], db_time[0] = 0, 0.0
            with CaptureQueriesContext(connection) as captured:
                with connection.execute_wrapper(timed_execute):
                    request()
            case.queries.append(list(captured.captured_queries))
            case.pings.append(pings[0])
            case.db_seconds.append(db_time[0])
    finally:
        del connection.is_usable
    case.sizes.clear()
    for _ in range(case.iterations):
        case.seconds.append(request())


def _span(values: list[int]) -> str:
    low, high = min(values), max(values)
    return str(low) if low == high else f"{low}-{high}"


def report(cases: list[Case], elapsed: float) -> None:
    rows = []
    for case in cases:
        figures = summary_ms(case.seconds)
        db_ms = sorted(s * 1000 for s in case.db_seconds)
        main = main_query(case)
        rows.append(
            (
                case.name,
                len(case.seconds),
                figures["p50"],
                figures["p95"],
                figures["p99"],
                _span([len(qs) for qs in case.queries]),
                _span(case.pings),
                db_ms[len(db_ms) // 2],
                f"{sum(case.sizes) // max(1, len(case.sizes)):,}",
                ",".join(str(c) for c in sorted(case.status_codes)),
                "; ".join(scans(explain(main["sql"]))) if main else "-",
            )
        )
    print()
    print_table(
        (
            "case",
            "n",
            "p50 ms",
            "p95 ms",
            "p99 ms",
            "queries",
            "+ping",
            "db ms",
            "bytes",
            "http",
            "main query plan (access paths)",
        ),
        rows,
    )
    print(
        f"\n(queries: per request, from CaptureQueriesContext; +ping: CONN_HEALTH_CHECKS "
        f"SELECT 1 per request, not in the query log; db ms: median time in cursor.execute "
        f"over {len(cases[0].db_seconds)} logged requests; total {elapsed:.1f}s)"
    )


def main_query(case: Case) -> dict | None:
    """The request's query on breakpoints: the page (LIMIT) or the primary-key read."""
    candidates = [q for q in case.queries[-1] if f"FROM {BP_TABLE}" in q["sql"]]
    if not candidates:
        return None
    rows = [q for q in candidates if "COUNT(" not in q["sql"]] or candidates
    # The admin drops LIMIT when every match fits on one page.
    limited = [q for q in rows if "LIMIT" in q["sql"]]
    return (limited or rows)[-1]


def plans(cases: list[Case], which: str) -> None:
    if which == "none":
        return
    print("\n=== query plans (EXPLAIN ANALYZE of the SQL each endpoint ran) ===")
    seen: set[str] = set()
    for case in cases:
        queries = case.queries[-1]
        main = main_query(case)
        print(f"\n--- {case.name}: {len(queries)} queries")
        for i, query in enumerate(queries, 1):
            plan = explain(query["sql"])
            marker = "*" if query is main else " "
            table = _table(query["sql"])
            print(
                f" {marker}{i}. {table:<28} exec {execution_ms(plan):>7} ms  "
                f"{'; '.join(scans(plan)) or '-'}"
            )
        if main is not None and (which == "all" or main["sql"] not in seen):
            seen.add(main["sql"])
            print("   SQL: " + _short(main["sql"]))
            print("   " + explain(main["sql"]).replace("\n", "\n   "))


def seq_scans_print(cases: list[Case]) -> None:
    """Every sequential scan of the breakpoints table, the thing that grows with the data."""
    found = []
    for case in cases:
        for i, query in enumerate(case.queries[-1], 1):
            if f"FROM {BP_TABLE}" not in query["sql"]:
                continue
            plan = explain(query["sql"])
            if any(_full_scan(access) for access in scans(plan)):
                found.append((case.name, i, execution_ms(plan), _short(query["sql"], 110)))
    print("\n=== sequential scans of breakpoints_breakpoint ===")
    if not found:
        print("none")
        return
    print_table(("case", "query #", "exec ms", "SQL"), found)


def _full_scan(access: str) -> bool:
    """A PostgreSQL Seq Scan, or an SQLite SCAN of a table without an index."""
    if "Seq Scan" in access:
        return True
    return access.startswith("SCAN ") and "(" not in access and "json_each" not in access


def indexes_print(cases: list[Case]) -> None:
    """The definition of each index the plans name (PostgreSQL)."""
    from django.db import connection

    if connection.vendor != "postgresql":
        return
    named = set()
    for case in cases:
        for query in case.queries[-1]:
            for access in scans(explain(query["sql"])):
                if " Scan" in access and not access.startswith(("Seq", "Parallel Seq")):
                    named.add(access.rsplit(" ", 1)[1])
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE indexname = ANY(%s) ORDER BY 1",
            [sorted(named)],
        )
        rows = [(name, definition.split(" USING ", 1)[1]) for name, definition in cursor]
    print("\n=== indexes the plans use ===")
    print_table(("index", "definition"), rows)


def _table(sql: str) -> str:
    head = sql.split(" WHERE ")[0]
    for keyword in ("FROM ", "UPDATE ", "INTO "):
        if keyword in head:
            return head.split(keyword, 1)[1].split()[0].strip('"')
    return sql[:28]


def _short(sql: str, limit: int = 600) -> str:
    """The SQL without its long column list."""
    if sql.startswith("SELECT ") and " FROM " in sql:
        columns, rest = sql[7:].split(" FROM ", 1)
        if len(columns) > 80:
            sql = f"SELECT <{columns.count(',') + 1} columns> FROM {rest}"
    return sql if len(sql) <= limit else sql[:limit] + " ..."


if __name__ == "__main__":
    main()
