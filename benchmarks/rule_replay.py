"""A rule's replay at scale: POST /api/rules/simulate over the seeded window, beside a floor.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bpm_bench python benchmarks/rule_replay.py

In-process, through the whole Django stack with the test Client (no network), as an admin
(a temporary `bench-admin` token), on a database seeded by benchmarks/seed.py (1,000,000
breakpoints in `make bench`, ~800,000 of them finished within the default 90 days). For
each rule below: the answer's time (median and slowest of --iterations) beside the target
(2 s at 1,000,000), and the floor measured in the same run: a bare COUNT of the
same window (the finished breakpoints created in the last 90 days), the least any answer
over it must read. Then the access paths of the replay's aggregate (EXPLAIN ANALYZE): it
should read the index bp_replay alone. Nothing is written but the token, deleted after.
"""

import argparse
import os
import statistics
import time

from _common import TOKEN_NAME, bootstrap, database_label, guard_database, scans

TARGET_MS = 2000.0  # a replay within 2 s over 1,000,000 breakpoints
ADMIN = "bench-admin"
CASES = [
    ("a third of the keys", {"pattern": "deploy.*"}),
    # Predicates on tags and experts: the groups are by both (the most a replay groups by).
    (
        "predicates on tags and experts",
        {"pattern": "deploy.*(tags contains 'production' AND expert = 'sre')"},
    ),
    ("every key", {"pattern": "*"}),
    ("never-auto-approve", {"pattern": "db.migration", "action": "never-auto-approve"}),
    ("autoApproveAfterN", {"action": "autoApproveAfterN", "key": "plan-review", "n": 3}),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=5, help="answers per rule (5)")
    parser.add_argument("--force", action="store_true", help="allow a database without 'bench'")
    args = parser.parse_args()

    bootstrap()
    guard_database(args.force)

    from django.test import Client

    from accounts.models import ApiToken
    from breakpoints.models import Breakpoint

    total = Breakpoint.objects.count()
    if not total:
        raise SystemExit("No benchmark rows: run benchmarks/seed.py first.")
    print(
        f"database: {database_label()}  breakpoints: {total:,}  load avg: "
        f"{' '.join(f'{v:.2f}' for v in os.getloadavg())} on {os.cpu_count()} cores"
    )
    api = Client(headers={"authorization": f"Bearer {admin_token()}"})
    try:
        floor = floor_ms(args.iterations)
        print(f"floor: COUNT of the window, median {floor:.0f} ms")
        failed = [name for name, body in CASES if not case_measure(api, name, body, args, floor)]
        plan_print()
    finally:
        ApiToken.objects.filter(name=TOKEN_NAME).delete()
    print("\nall within target" if not failed else f"\nover target: {', '.join(failed)}")


def admin_token() -> str:
    """A temporary token of `bench-admin`, a member of the admins group (made when missing)."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    from accounts.tokens import token_create_for_user
    from core.actors import ADMINS_GROUP

    user, _ = get_user_model().objects.get_or_create(username=ADMIN, defaults={"is_staff": True})
    user.groups.add(Group.objects.get_or_create(name=ADMINS_GROUP)[0])
    return token_create_for_user(user=user, name=TOKEN_NAME)[1]


def window():
    from datetime import timedelta

    from django.utils import timezone

    from breakpoints.rule_replay import finished_since

    return finished_since(timezone.now() - timedelta(days=90))


def floor_ms(iterations: int) -> float:
    seconds = []
    for _ in range(iterations):
        started = time.perf_counter()
        window().count()
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds) * 1000


def case_measure(api, name: str, body: dict, args: argparse.Namespace, floor: float) -> bool:
    """Print the case's line; whether its median is within the target."""
    seconds, answer = [], {}
    for _ in range(args.iterations):
        started = time.perf_counter()
        response = api.post("/api/rules/simulate", body, content_type="application/json")
        seconds.append(time.perf_counter() - started)
        if response.status_code != 200:
            raise SystemExit(f"{name}: {response.status_code} {response.content[:300]!r}")
        answer = response.json()
    median, slowest = statistics.median(seconds) * 1000, max(seconds) * 1000
    ok = median <= TARGET_MS
    print(
        f"\n{name}: {body}\n"
        f"  median {median:.0f} ms, slowest {slowest:.0f} ms (target {TARGET_MS:.0f} ms: "
        f"{'PASS' if ok else 'FAIL'}; floor {floor:.0f} ms, x{median / max(floor, 0.001):.1f})\n"
        f"  considered {answer['considered']:,}, matched {answer['matched']:,}, would "
        f"auto-approve {answer['wouldAutoApprove']:,}, rejected but would approve "
        f"{answer['rejectedButWouldApproveCount']:,} ({len(answer['rejectedButWouldApprove'])} "
        "listed)"
    )
    return ok


def plan_print() -> None:
    """The access paths of the replay's main aggregate, as it runs (EXPLAIN ANALYZE)."""
    from django.db import connection

    from breakpoints.rule_replay import aggregate_memory, shape_groups

    # The most a replay groups by: a rule or the always-break-on list names tags and experts.
    columns = ("key", "tags_text", "experts_text", "prevent_self_review", "needs_person")
    sql, params = shape_groups(window(), columns).query.sql_with_params()
    postgres = connection.vendor == "postgresql"
    with aggregate_memory(), connection.cursor() as cursor:
        cursor.execute(("EXPLAIN (ANALYZE) " if postgres else "EXPLAIN QUERY PLAN ") + sql, params)
        plan = "\n".join(" ".join(str(column) for column in row) for row in cursor.fetchall())
    print(f"\nthe window's aggregate reads: {', '.join(scans(plan)) or plan}")


if __name__ == "__main__":
    main()
