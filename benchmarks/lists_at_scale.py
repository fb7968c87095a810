"""Data at scale: create p95, a TTL sweep of 100,000 due rows, and every list right after it.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bpm_bench python benchmarks/lists_at_scale.py

In-process, through the whole Django stack with the test Client (no network), on a
database seeded by benchmarks/seed.py (1,000,000 breakpoints in `make bench`). In order:

1. settled: every API list filter and console queue page on the seeded, vacuumed table;
2. the TTL sweep: 100,000 waiting breakpoints past their expiresAt are inserted (COPY,
   indexes live, then ANALYZE as autoanalyze would after that many inserts) and
   breakpoints.services.breakpoints_expire_due() is timed;
3. the same pages right after the sweep: no VACUUM, no pause in between. The first
   request of each case is shown on its own: it is the one that meets the dead entries;
4. per page: queries per request, every COUNT on breakpoints (capped at 10,000 or not)
   and the access paths of the page's query (EXPLAIN ANALYZE, run after its timings);
5. create: POST /api/breakpoints as an agent, p95 (last: new rows would top the lists);
6. clean-up: the swept and created rows are deleted and the tables vacuumed, so the next
   run starts from the same state.

Each figure is printed beside its target with PASS/FAIL. Bounded: fixed iteration counts,
and each page stops after --case-seconds. Mints temporary tokens and deletes them.
"""

import argparse
import os
import random
import re
import time
from dataclasses import dataclass, field
from datetime import timedelta
from urllib.parse import urlencode

from _common import (
    AGENT_PREFIX,
    POLL_AGENT,
    REVIEWER,
    TOKEN_NAME,
    bootstrap,
    database_label,
    execution_ms,
    guard_database,
    peak_rss_mib,
    print_table,
    scans,
    summary_ms,
)
from _scale_writes import (
    BP_TABLE,
    autovacuum_print,
    creates_measure,
    due_rows_insert,
    scratch_rows_delete,
    sweep_already_due,
    sweep_measure,
    verdict,
)

LIST_TARGET_MS = 30.0  # p95 of every filter's page, one client, at 1M rows
COUNT_CAP = 250  # web.console.pagination.COUNT_CAP


@dataclass
class Page:
    name: str
    url: str
    client: object
    first_ms: float = float("nan")
    seconds: list[float] = field(default_factory=list)
    queries: list[dict] = field(default_factory=list)  # of the first request
    warm_queries: list[dict] = field(default_factory=list)  # of one after the timed ones
    status_codes: set[int] = field(default_factory=set)
    plan: str = ""
    counts: str = ""  # the COUNTs on breakpoints the page ran


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--due", type=int, default=100_000, help="due rows for the sweep")
    parser.add_argument("--creates", type=int, default=200)
    parser.add_argument("--iterations", type=int, default=40, help="per page and phase")
    parser.add_argument("--case-seconds", type=float, default=10.0, help="cap per page")
    parser.add_argument("--no-settled", action="store_true", help="skip the settled phase")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--force", action="store_true", help="allow a database without 'bench'")
    args = parser.parse_args()

    bootstrap()
    guard_database(args.force)

    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client

    from accounts.models import ApiToken
    from accounts.tokens import token_create_for_agent, token_create_for_user
    from breakpoints.models import Breakpoint

    if connection.vendor != "postgresql":
        raise SystemExit("lists_at_scale.py measures PostgreSQL (VACUUM, EXPLAIN ANALYZE).")
    started = time.perf_counter()
    rng = random.Random(args.seed)
    scratch_rows_delete(then_vacuum=True)  # what an interrupted run left behind
    total = Breakpoint.objects.count()
    if not Breakpoint.objects.filter(agent_id=POLL_AGENT).exists():
        raise SystemExit("No benchmark rows: run benchmarks/seed.py first.")
    with connection.cursor() as cursor:
        cursor.execute("SHOW autovacuum")
        autovacuum = cursor.fetchone()[0]
        cursor.execute("SELECT reloptions FROM pg_class WHERE relname = %s", [BP_TABLE.strip('"')])
        reloptions = cursor.fetchone()[0]
    print(
        f"database: {database_label()}  breakpoints: {total:,}  load avg: "
        f"{' '.join(f'{v:.2f}' for v in os.getloadavg())} on {os.cpu_count()} cores\n"
        f"autovacuum (server): {autovacuum}; breakpoints table options: {reloptions or 'none'}"
    )

    reviewer = get_user_model().objects.get(username=REVIEWER)
    _, agent_raw = token_create_for_agent(agent_id=POLL_AGENT, name=TOKEN_NAME)
    _, user_raw = token_create_for_user(user=reviewer, name=TOKEN_NAME)
    agent = Client(headers={"authorization": f"Bearer {agent_raw}"})
    api = Client(headers={"authorization": f"Bearer {user_raw}"})
    console = Client()
    console.force_login(reviewer)
    try:
        sweep_already_due()
        # Built once, before the sweep: finding a run id afterwards would read (and mark)
        # the dead entries the pages are to meet.
        pages = pages_build(api, console)
        settled = None
        if not args.no_settled:
            settled = [Page(p.name, p.url, p.client) for p in pages]
            print(f"\n=== settled: {total:,} rows, vacuumed ===")
            pages_measure(settled, args)
        due = due_rows_insert(args.due, rng)
        sweep_measure(due)
        autovacuum_print()
        after = [Page(p.name, p.url, p.client) for p in pages]
        print("\n=== right after the sweep (no VACUUM in between) ===")
        pages_measure(after, args)
        pages_report(after, settled)
        creates_measure(agent, args.creates, rng)  # last: its rows would top the lists
    finally:
        console.logout()
        ApiToken.objects.filter(name=TOKEN_NAME).delete()
        scratch_rows_delete(then_vacuum=True)
    print(
        f"\ntotal {time.perf_counter() - started:.0f}s; peak RSS of this process: "
        f"{peak_rss_mib():.0f} MiB"
    )


# --- the pages ---------------------------------------------------------------------------


def api_list_queries(run_id: str | None) -> list[tuple[str, object]]:
    """Every API list filter and search, as (name, query) on the seeded rows (also timed
    over HTTP by http_bench.py's lists section)."""
    from django.utils import timezone

    now = timezone.now()
    day_after = (now - timedelta(days=30)).replace(microsecond=0)
    one_day = {
        "createdAfter": day_after.isoformat(),
        "createdBefore": (day_after + timedelta(days=1)).isoformat(),
    }
    recent = {"createdAfter": (now - timedelta(hours=24)).replace(microsecond=0).isoformat()}
    return [
        ("default (newest first)", {}),
        ("?status=waiting", {"status": "waiting"}),
        ("?status=expired", {"status": "expired"}),
        ("?status=released", {"status": "released"}),
        ("?tag=deploy&tag=production", [("tag", "deploy"), ("tag", "production")]),
        ("?tag=compliance (rare)", {"tag": "compliance"}),
        (f"?agentId={AGENT_PREFIX}04 (10%)", {"agentId": f"{AGENT_PREFIX}04"}),
        (f"?agentId={AGENT_PREFIX}08 (2%)", {"agentId": f"{AGENT_PREFIX}08"}),
        ("?runId=<a run>", {"runId": run_id}),
        ("?createdAfter&createdBefore (1 day)", one_day),
        ("?createdAfter=24 h ago", recent),
        ("?search=deploy", {"search": "deploy"}),
        ("?search=rollback (rare)", {"search": "rollback"}),
        ("?assignedTo=me", {"assignedTo": "me"}),
        ("?status=waiting&assignedTo=me", {"status": "waiting", "assignedTo": "me"}),
    ]


def a_run_id() -> str | None:
    from breakpoints.models import Breakpoint

    return (
        Breakpoint.objects.filter(agent_id=f"{AGENT_PREFIX}04", run_id__startswith="run-")
        .values_list("run_id", flat=True)
        .first()
    )


def pages_build(api, console) -> list[Page]:
    """Every API filter and the console queue with each of its sidebar filters."""
    from django.utils import timezone

    now = timezone.now()
    run_id = a_run_id()
    api_cases = api_list_queries(run_id)
    pages = [Page(f"api {name}", f"/api/breakpoints?{urlencode(q)}", api) for name, q in api_cases]
    today = timezone.localtime(now).replace(hour=0, minute=0, second=0, microsecond=0)
    week = {
        "created_at__gte": str(today - timedelta(days=7)),
        "created_at__lt": str(today + timedelta(days=1)),
    }
    console_cases = [
        ("queue (waiting first)", {}),
        ("?status__exact=waiting", {"status__exact": "waiting"}),
        ("?status__exact=expired", {"status__exact": "expired"}),
        ("?tag=deploy", {"tag": "deploy"}),
        (f"?agent={AGENT_PREFIX}08", {"agent": f"{AGENT_PREFIX}08"}),
        ("?run=<a run>", {"run": run_id}),
        ("?assigned=me", {"assigned": "me"}),
        ("?q=rollback", {"q": "rollback"}),
        ("created_at: past 7 days", week),
    ]
    queue = "/admin/breakpoints/breakpoint/"
    pages += [
        Page(f"console {name}", f"{queue}?{urlencode(q)}" if q else queue, console)
        for name, q in console_cases
    ]
    # The queue's groups count every waiting breakpoint (bp_waiting_key_run, index only):
    # their cost grows with the waiting rows, not with the table.
    pages += [
        Page("api groups", "/api/breakpoints/groups", api),
        Page("console grouped queue", f"{queue}groups/", console),
    ]
    return pages


def pages_measure(pages: list[Page], args) -> None:
    """Per page: the first request (queries logged), the timed ones, then its EXPLAIN."""
    from django.db import close_old_connections, connection
    from django.test.utils import CaptureQueriesContext

    def request(page: Page) -> float:
        close_old_connections()
        began = time.perf_counter()
        response = page.client.get(page.url)
        took = time.perf_counter() - began
        page.status_codes.add(response.status_code)
        return took

    for page in pages:
        with CaptureQueriesContext(connection) as captured:
            page.first_ms = request(page) * 1000
        page.queries = list(captured.captured_queries)
        began = time.perf_counter()
        while (
            len(page.seconds) < args.iterations and time.perf_counter() - began < args.case_seconds
        ):
            page.seconds.append(request(page))
        with CaptureQueriesContext(connection) as captured:
            request(page)
        page.warm_queries = list(captured.captured_queries)
        main = _main_query(page.queries)
        page.plan = _explain(main["sql"]) if main else ""
        page.counts = _counts(page.queries)
        figures = summary_ms(page.seconds)
        print(
            f"  {page.name:<48} 1st {page.first_ms:7.1f} ms  p95 {figures['p95']:6.1f} ms  "
            f"{verdict(figures['p95'] < LIST_TARGET_MS)}",
            flush=True,
        )


def pages_report(after: list[Page], settled: list[Page] | None) -> None:
    before = {page.name: page for page in settled or []}
    rows = []
    for page in after:
        figures = summary_ms(page.seconds)
        prior = before.get(page.name)
        rows.append(
            (
                page.name,
                summary_ms(prior.seconds)["p95"] if prior else float("nan"),
                page.first_ms,
                figures["p50"],
                figures["p95"],
                verdict(figures["p95"] < LIST_TARGET_MS),
                len(page.queries),
                _db_ms(page.warm_queries),
                figures["p50"] - _db_ms(page.warm_queries),
                _breakdown(page.warm_queries),
                ",".join(str(c) for c in sorted(page.status_codes)),
                page.counts,
                execution_ms(page.plan),
                "; ".join(scans(page.plan)) or "-",
            )
        )
    print(
        f"\n=== lists at scale: p95 < {LIST_TARGET_MS:.0f} ms per page, one client; "
        "no COUNT over the whole table ==="
    )
    print_table(
        (
            "page",
            "settled p95",
            "after: 1st ms",
            "p50 ms",
            "p95 ms",
            f"p95<{LIST_TARGET_MS:.0f}",
            "queries",
            "db ms",
            "render ms",
            "db ms by query",
            "http",
            "COUNT on breakpoints",
            "exec ms",
            "page query plan (access paths)",
        ),
        rows,
    )
    whole = [page.name for page in after if "WHOLE TABLE" in page.counts]
    uncapped = {
        _where(q["sql"])
        for page in after
        for q in page.queries
        if "COUNT(" in q["sql"]
        and f"FROM {BP_TABLE}" in q["sql"]
        and not _is_capped(q["sql"])
        and "GROUP BY" not in q["sql"]  # the groups' own query counts by design
    }
    slow = [p.name for p in after if summary_ms(p.seconds)["p95"] >= LIST_TARGET_MS]
    print(
        f"\nno COUNT over the whole table: {verdict(not whole)}"
        + (f" ({', '.join(whole)})" if whole else "")
        + f"; every page p95 < {LIST_TARGET_MS:.0f} ms right after the sweep: "
        + verdict(not slow)
        + (f" ({len(slow)} over: {', '.join(slow)})" if slow else "")
    )
    for where in sorted(uncapped):
        pages = sum(any(where == _where(q["sql"]) for q in page.queries) for page in after)
        print(f"WARN: an uncapped COUNT on {pages} of {len(after)} pages: WHERE {where}")
    print(
        "(1st: the first request after the sweep, before any other request of that page; "
        "db ms: the time in queries of one request after the timed ones, and by query "
        "(page: the rows shown; count<=cap: the paginator's count, capped at "
        f"{COUNT_CAP:,} rows; COUNT: uncapped; other: session, user, routing); render ms: "
        "the p50 less the db ms, the page's budget outside the database (Python, templates, "
        "JSON); COUNT on "
        "breakpoints: 'capped', or the rows an uncapped COUNT visits; exec ms: EXPLAIN "
        "ANALYZE of the page query, run after the page's timings)"
    )


def _db_ms(queries: list[dict]) -> float:
    return sum(float(q["time"]) for q in queries) * 1000


def _breakdown(queries: list[dict]) -> str:
    """Where a request's database time goes: each query on breakpoints, then the rest."""
    parts, rest = [], 0.0
    for query in queries:
        sql, ms = query["sql"], float(query["time"]) * 1000
        if f"FROM {BP_TABLE}" not in sql:
            rest += ms
        elif "COUNT(" in sql:
            parts.append(f"{'count<=cap' if _is_capped(sql) else 'COUNT'} {ms:.0f}")
        else:
            parts.append(f"{'page' if 'ORDER BY' in sql else 'select'} {ms:.0f}")
    return " + ".join([*parts, f"other {rest:.0f}"])


def _where(sql: str) -> str:
    return sql.split(" WHERE ", 1)[1] if " WHERE " in sql else "(none: the whole table)"


def _is_capped(sql: str) -> bool:
    return bool(re.search(r"LIMIT \d+\) subquery", sql))


def _main_query(queries: list[dict]) -> dict | None:
    """The page's query on breakpoints: its ordered SELECT (LIMITed unless all fit)."""
    rows = [
        q
        for q in queries
        if f"FROM {BP_TABLE}" in q["sql"]
        and ("COUNT(" not in q["sql"] or "GROUP BY" in q["sql"])  # the groups' page counts
        and "ORDER BY" in q["sql"]
    ]
    return rows[0] if rows else None


def _counts(queries: list[dict]) -> str:
    """Each COUNT on breakpoints: capped (a LIMITed subquery), or the rows it counts."""
    from django.db import connection

    found = []
    for query in queries:
        sql = query["sql"]
        if "COUNT(" not in sql or f"FROM {BP_TABLE}" not in sql or "GROUP BY" in sql:
            continue  # the groups' GROUP BY is the page's own query, not a count of it
        if _is_capped(sql):
            found.append("capped")
            continue
        with connection.cursor() as cursor:
            cursor.execute(sql)
            counted = cursor.fetchone()[0]
        where = sql.split(f"FROM {BP_TABLE}", 1)[1]
        found.append(f"{counted:,} rows" if " WHERE " in where else f"WHOLE TABLE {counted:,}")
    return ", ".join(found) or "none"


def _explain(sql: str) -> str:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql)
        return "\n".join(row[0] for row in cursor.fetchall())


if __name__ == "__main__":
    main()
