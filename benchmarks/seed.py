"""Seed a benchmark database with N realistic breakpoints, their feedback and events.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bpm_bench python benchmarks/seed.py
    python benchmarks/seed.py --count 100000 --reset

Rows belong to agents `bench-agent-*` (so --reset finds exactly them); the reviewer
`bench-reviewer` and the groups experts are routed to are created when missing. The
database's name must contain "bench" unless --force. Creates the database when it does not
exist (PostgreSQL) and migrates it first (after that check).
Without --reset, an already seeded database is left as it is.

On PostgreSQL the rows go in with COPY in one transaction, the tables' secondary indexes
and foreign keys dropped first and built once at the end (an interrupted seed rolls back
whole); elsewhere through bulk_create. Then VACUUM (ANALYZE), as a settled table would be.
"""

import argparse
import random
import time

from _bulk import indexes_deferred, rows_write
from _common import (
    AGENT_PREFIX,
    REVIEWER,
    TOKEN_NAME,
    bootstrap,
    database_ensure,
    database_label,
    guard_database,
    peak_rss_mib,
    print_table,
)
from _rows import EXPERT_GROUPS, Runs, breakpoint_rows, created_times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=100_000, help="breakpoints (100000)")
    parser.add_argument("--batch", type=int, default=20_000, help="breakpoints per COPY")
    parser.add_argument("--reset", action="store_true", help="delete benchmark rows first")
    parser.add_argument("--seed", type=int, default=42, help="random seed (reproducible data)")
    parser.add_argument("--force", action="store_true", help="allow a database without 'bench'")
    parser.add_argument("--no-migrate", action="store_true", help="skip manage.py migrate")
    args = parser.parse_args()

    bootstrap()
    guard_database(args.force)
    database_ensure()

    from django.core.management import call_command

    print(f"database: {database_label()}")
    if not args.no_migrate:
        call_command("migrate", interactive=False, verbosity=0)
    reviewer_and_groups_ensure()

    from breakpoints.models import Breakpoint

    if args.reset:
        started = time.perf_counter()
        deleted = benchmark_rows_delete()
        print(f"reset: deleted {deleted:,} breakpoints in {time.perf_counter() - started:.1f}s")
    existing = Breakpoint.objects.filter(agent_id__startswith=AGENT_PREFIX).count()
    if existing:
        print(
            f"already seeded: {existing:,} benchmark breakpoints (use --reset to seed again "
            f"with --count {args.count:,})"
        )
        table_sizes_print()
        return

    started = time.perf_counter()
    totals = seed(count=args.count, batch=args.batch, rng=random.Random(args.seed))
    elapsed = time.perf_counter() - started
    print(
        f"seeded {totals['breakpoints']:,} breakpoints, {totals['feedback']:,} feedback, "
        f"{totals['events']:,} events in {elapsed:.1f}s "
        f"({totals['breakpoints'] / elapsed:,.0f} breakpoints/s)"
    )
    started = time.perf_counter()
    vacuum_analyze()
    print(f"vacuum/analyze: {time.perf_counter() - started:.1f}s")
    table_sizes_print()
    print(f"peak RSS: {peak_rss_mib():.0f} MiB")


def reviewer_and_groups_ensure() -> None:
    """The reviewer the benchmarks log in as, and the groups routed breakpoints name."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    from core.actors import REVIEWERS_GROUP

    User = get_user_model()
    user, created = User.objects.get_or_create(username=REVIEWER, defaults={"is_staff": True})
    if created:
        user.set_unusable_password()  # benchmarks log in with force_login or a token
        user.save(update_fields=["password"])
    user.groups.add(Group.objects.get_or_create(name=REVIEWERS_GROUP)[0])
    user.groups.add(Group.objects.get_or_create(name=EXPERT_GROUPS[0])[0])
    sre = Group.objects.get_or_create(name=EXPERT_GROUPS[1])[0]
    member, _ = User.objects.get_or_create(username="bench-sre", defaults={"is_staff": True})
    member.groups.add(sre)


def benchmark_rows_delete() -> int:
    """Delete the benchmark agents' breakpoints with their children, in set-based DELETEs.

    (QuerySet.delete() would first load every breakpoint, payload included, to cascade.)
    The children are every model with a foreign key to Breakpoint, found from the models,
    so a table added later is not missed.
    """
    from django.db import connection, transaction

    from accounts.models import ApiToken
    from breakpoints.models import Breakpoint

    children = breakpoint_children()
    others = Breakpoint.objects.exclude(agent_id__startswith=AGENT_PREFIX).exists()
    if connection.vendor == "postgresql" and not others:
        # Only benchmark rows: TRUNCATE leaves no dead tuples behind to skew the next plans.
        deleted = Breakpoint.objects.count()
        models = [model for model, _ in children] + [Breakpoint]
        tables = ", ".join(connection.ops.quote_name(m._meta.db_table) for m in models)
        with connection.cursor() as cursor:
            cursor.execute(f"TRUNCATE {tables}")
        ApiToken.objects.filter(name=TOKEN_NAME).delete()
        return deleted
    with transaction.atomic():
        for model, field in children:
            model.objects.filter(**{f"{field}__agent_id__startswith": AGENT_PREFIX}).delete()
        with connection.cursor() as cursor:
            table = connection.ops.quote_name(Breakpoint._meta.db_table)
            cursor.execute(f"DELETE FROM {table} WHERE agent_id LIKE %s", [AGENT_PREFIX + "%"])
            deleted = cursor.rowcount
        ApiToken.objects.filter(name=TOKEN_NAME).delete()
    return deleted


def breakpoint_children() -> list[tuple[type, str]]:
    """(model, foreign key name) of every model that references Breakpoint.

    Their rows go with their breakpoint (on_delete=CASCADE); a reference that would outlive
    it (SET_NULL, PROTECT, ...) stops the reset with its name rather than being guessed at.
    """
    from django.db.models import CASCADE

    from breakpoints.models import Breakpoint

    children = []
    # Hidden ones too (related_name="+", as policies.ShadowFire's): their rows go as well.
    relations = [
        field
        for field in Breakpoint._meta.get_fields(include_hidden=True)
        if field.auto_created and not field.concrete and (field.one_to_many or field.one_to_one)
    ]
    for relation in relations:
        if relation.on_delete is not CASCADE:
            raise SystemExit(
                f"{relation.related_model._meta.label}.{relation.field.name} references "
                "Breakpoint without on_delete=CASCADE: teach benchmarks/seed.py to reset it."
            )
        children.append((relation.related_model, relation.field.name))
    return children


def seed(*, count: int, batch: int, rng: random.Random) -> dict[str, int]:
    from django.db import transaction
    from django.utils import timezone

    from audit.models import Event
    from breakpoints.models import Breakpoint, Feedback

    now = timezone.now()
    times = created_times(rng, count, now)
    runs = Runs()
    totals = {"breakpoints": 0, "feedback": 0, "events": 0}
    # One transaction: a seed either lands whole, indexes built, or not at all.
    with transaction.atomic(), indexes_deferred((Breakpoint, Feedback, Event)):
        for start in range(0, count, batch):
            bps, feedback, events = [], [], []
            for created in times[start : start + batch]:
                bp, bp_feedback, bp_events = breakpoint_rows(rng, created, now, runs)
                bps.append(bp)
                feedback.extend(bp_feedback)
                events.extend(bp_events)
            totals["breakpoints"] += rows_write(Breakpoint, bps)
            totals["feedback"] += rows_write(Feedback, feedback)
            totals["events"] += rows_write(Event, events)
            done = start + len(bps)
            if done % (batch * 5) == 0 or done == count:
                print(f"  {done:,}/{count:,}", flush=True)
        indexes_started = time.perf_counter()
    print(f"  indexes and foreign keys built in {time.perf_counter() - indexes_started:.1f}s")
    return totals


def vacuum_analyze() -> None:
    """Fresh statistics (and a visibility map) so plans are the ones production would get."""
    from django.db import connection

    from audit.models import Event
    from breakpoints.models import Breakpoint, Feedback

    with connection.cursor() as cursor:
        for model in (Breakpoint, Feedback, Event):
            table = connection.ops.quote_name(model._meta.db_table)
            if connection.vendor == "postgresql":
                cursor.execute(f"VACUUM (ANALYZE) {table}")
            else:
                cursor.execute(f"ANALYZE {table}")


def table_sizes_print() -> None:
    from django.db import connection

    from audit.models import Event
    from breakpoints.models import Breakpoint, Feedback

    rows = []
    with connection.cursor() as cursor:
        for model in (Breakpoint, Feedback, Event):
            table = model._meta.db_table
            count = model.objects.count()
            if connection.vendor == "postgresql":
                cursor.execute(
                    "SELECT pg_size_pretty(pg_table_size(%s)), pg_size_pretty(pg_indexes_size(%s))",
                    [table, table],
                )
                heap, indexes = cursor.fetchone()
            else:
                heap = indexes = "-"
            rows.append((table, f"{count:,}", heap, indexes))
    print_table(("table", "rows", "table size", "index size"), rows)


if __name__ == "__main__":
    main()
