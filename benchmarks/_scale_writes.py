"""The writes of lists_at_scale.py: due rows, the timed TTL sweep, timed creates, clean-up.

PostgreSQL only (COPY, VACUUM, pg_stat_user_tables). Every row written here carries one of
two keys, so the clean-up (and a later run, after an interrupted one) finds exactly them.
"""

import random
import time
from datetime import timedelta

from _bulk import rows_write
from _common import summary_ms
from _rows import KEYS, LOREM, SERVICES, Runs, breakpoint_rows

SWEEP_TARGET_S = 30.0  # the TTL sweep of 100,000 due breakpoints
CREATE_TARGET_MS = 50.0  # ours (no requirement sets one): a create is one short transaction
SWEEP_KEY = "bench.ttl-sweep"  # the due rows inserted for the sweep
CREATE_KEY = "bench.create"  # the rows the timed creates make
BP_TABLE = '"breakpoints_breakpoint"'


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def creates_measure(agent, count: int, rng: random.Random) -> None:
    """POST /api/breakpoints `count` times as one agent, each with a ~1 KB context file."""
    from django.db import close_old_connections

    seconds = []
    for i in range(count + 3):
        _, title, question, _ = rng.choice(KEYS)
        body = {
            "title": title,
            "payload": {
                "breakpointId": CREATE_KEY,
                "question": question.format(svc=rng.choice(SERVICES), n=i),
                "context": {
                    "files": [{"path": "plan.md", "format": "markdown", "content": LOREM[:1000]}]
                },
            },
            "tags": rng.sample(["deploy", "production", "plan", "database"], 2),
            "runId": f"bench-create-{i // 5:04d}",
            "ttlSeconds": 3600,
        }
        close_old_connections()
        began = time.perf_counter()
        response = agent.post("/api/breakpoints", body, content_type="application/json")
        took = time.perf_counter() - began
        if response.status_code != 201:
            raise SystemExit(f"create answered {response.status_code}: {response.content[:300]}")
        if i >= 3:  # the first three warm up
            seconds.append(took)
    figures = summary_ms(seconds)
    print(
        f"\n=== create: POST /api/breakpoints, in-process test Client, {len(seconds)} creates "
        f"===\np50 {figures['p50']:.1f} ms  p95 {figures['p95']:.1f} ms  p99 "
        f"{figures['p99']:.1f} ms  (target p95 < {CREATE_TARGET_MS:.0f} ms, ours) "
        f"{verdict(figures['p95'] < CREATE_TARGET_MS)}"
    )


def sweep_already_due() -> int:
    """Expire seeded rows whose TTL ran out since seeding (untimed), so the timed sweep
    takes exactly the rows this script inserts."""
    from breakpoints.services import breakpoints_expire_due

    expired = breakpoints_expire_due()
    if expired:
        print(f"(expired {expired:,} seeded breakpoints already past expiresAt first, untimed)")
        vacuum(analyze=True)
    return expired


def due_rows_insert(count: int, rng: random.Random) -> int:
    """`count` waiting breakpoints created over the last 3 hours, every TTL already run out.

    The realistic case: a fleet's requests nobody answered. They are the newest rows, so
    a newest-first list meets their dead versions first after the sweep.
    """
    from django.db import connection, transaction
    from django.utils import timezone

    from audit.models import Event
    from breakpoints.models import Breakpoint, Feedback

    now = timezone.now()
    ages = sorted((rng.uniform(15 * 60, 3 * 3600) for _ in range(count)), reverse=True)
    runs = Runs("sweep")
    began = time.perf_counter()
    for start in range(0, count, 10_000):
        bps, feedback, events = [], [], []
        for age in ages[start : start + 10_000]:
            bp, bp_feedback, bp_events = breakpoint_rows(
                rng,
                now - timedelta(seconds=age),
                now,
                runs,
                status="waiting",
                due=True,
                key=SWEEP_KEY,
            )
            bps.append(bp)
            feedback.extend(bp_feedback)
            events.extend(bp_events)
        with transaction.atomic():
            rows_write(Breakpoint, bps)
            rows_write(Feedback, feedback)
            rows_write(Event, events)
    inserted = time.perf_counter() - began
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {BP_TABLE}")
    print(
        f"\n=== TTL sweep ===\ninserted {count:,} due waiting breakpoints (COPY, indexes live) "
        f"in {inserted:.1f}s, then ANALYZE (as autoanalyze would after them)"
    )
    return count


def sweep_measure(due: int) -> None:
    """Time the real sweep. Nothing reads the swept rows before the pages are measured:
    a read through an index marks the dead entries it meets, hiding what a reviewer meets."""
    from breakpoints.services import breakpoints_expire_due

    began = time.perf_counter()
    expired = breakpoints_expire_due()
    took = time.perf_counter() - began
    print(
        f"breakpoints_expire_due(): {expired:,} rows in {took:.1f}s = {expired / took:,.0f} "
        f"rows/s  (target {due:,} in < {SWEEP_TARGET_S:.0f} s) "
        f"{verdict(took < SWEEP_TARGET_S and expired >= due)}"
    )


def autovacuum_print() -> None:
    """Would autovacuum and autoanalyze take the table after the sweep (its settings)?"""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.reltuples, s.n_dead_tup, s.n_mod_since_analyze, c.reloptions "
            "FROM pg_class c JOIN pg_stat_user_tables s ON s.relid = c.oid "
            "WHERE c.relname = %s",
            [BP_TABLE.strip('"')],
        )
        reltuples, dead, modified, reloptions = cursor.fetchone()
        settings = {}
        for name in ("vacuum_threshold", "vacuum_scale_factor", "analyze_threshold"):
            cursor.execute(f"SHOW autovacuum_{name}")
            settings[name] = float(cursor.fetchone()[0])
        cursor.execute("SHOW autovacuum_analyze_scale_factor")
        settings["analyze_scale_factor"] = float(cursor.fetchone()[0])
    for option in reloptions or []:
        name, value = option.split("=", 1)
        if name.startswith("autovacuum_") and name[11:] in settings:
            settings[name[11:]] = float(value)
    vacuum_at = settings["vacuum_threshold"] + settings["vacuum_scale_factor"] * reltuples
    analyze_at = settings["analyze_threshold"] + settings["analyze_scale_factor"] * reltuples
    print(
        f"after it: {dead:,} dead rows (autovacuum vacuums past {vacuum_at:,.0f}: "
        f"{'yes' if dead > vacuum_at else 'NO'}), {modified:,} changed since ANALYZE "
        f"(autoanalyze past {analyze_at:,.0f}: {'yes' if modified > analyze_at else 'NO'}); "
        f"table options: {', '.join(reloptions or []) or 'server defaults'}"
    )


def scratch_rows_delete(*, then_vacuum: bool) -> int:
    """Delete the rows this script made (swept and created), with their children."""
    from django.db import connection, transaction

    tables = ["audit_event", "reviews_feedback", "breakpoints_webhookdelivery"]
    began = time.perf_counter()
    with transaction.atomic(), connection.cursor() as cursor:
        for table in tables:
            cursor.execute(
                f'DELETE FROM "{table}" WHERE breakpoint_id IN '
                f"(SELECT id FROM {BP_TABLE} WHERE key IN (%s, %s))",
                [SWEEP_KEY, CREATE_KEY],
            )
        cursor.execute(f"DELETE FROM {BP_TABLE} WHERE key IN (%s, %s)", [SWEEP_KEY, CREATE_KEY])
        deleted = cursor.rowcount
    if deleted:
        if then_vacuum:
            vacuum(analyze=True)
        print(
            f"\nclean-up: deleted {deleted:,} breakpoints this script made"
            + (", vacuumed" if then_vacuum else "")
            + f" in {time.perf_counter() - began:.1f}s"
        )
    return deleted


def vacuum(*, analyze: bool) -> None:
    """VACUUM the tables the script writes (clean-up only: never between sweep and lists)."""
    from django.db import connection

    option = "(ANALYZE) " if analyze else ""
    with connection.cursor() as cursor:
        for table in (BP_TABLE, '"reviews_feedback"', '"audit_event"'):
            cursor.execute(f"VACUUM {option}{table}")
