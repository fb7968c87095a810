"""Seed a benchmark database with N realistic breakpoints, their feedback and events.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bpm_bench python benchmarks/seed.py
    python benchmarks/seed.py --count 100000 --reset

Rows belong to agents `bench-agent-*` (so --reset finds exactly them); the reviewer
`bench-reviewer` and the groups experts are routed to are created when missing. The
database's name must contain "bench" unless --force. Migrates first (after that check).
Without --reset, an already seeded database is left as it is.
"""

import argparse
import base64
import contextlib
import random
import time
from datetime import datetime, timedelta

from _common import (
    AGENT_PREFIX,
    REVIEWER,
    TOKEN_NAME,
    bootstrap,
    database_label,
    guard_database,
    peak_rss_mib,
    print_table,
)

AGENT_WEIGHTS = [30, 20, 15, 10, 10, 8, 5, 2]  # bench-agent-01 .. -08
STATUS_WEIGHTS = {"waiting": 20, "released": 62, "expired": 9, "cancelled": 9}
TAG_WEIGHTS = {
    "deploy": 18,
    "plan": 12,
    "production": 10,
    "staging": 8,
    "database": 7,
    "migration": 6,
    "design": 6,
    "security": 5,
    "infra": 5,
    "cost": 4,
    "data": 4,
    "billing": 2,
    "compliance": 1,
}
# (key, title, question); "rollback" is rare on purpose (~0.5%): a selective search term.
KEYS = [
    ("deploy.production", "Production Deployment", "Deploy {svc} to production?", 15),
    ("deploy.staging", "Staging Deployment", "Deploy {svc} to staging?", 15),
    ("plan-review", "Plan Review", "Approve the plan for {svc}?", 20),
    ("db.migration", "Database Migration", "Run migration {n} on {svc}?", 10),
    ("spend.approval", "Spend Approval", "Spend ${n} on {svc} capacity?", 8),
    ("security.exception", "Security Exception", "Allow {svc} to open port {n}?", 6),
    ("data.delete", "Data Deletion", "Delete {n} stale records from {svc}?", 6),
    ("design.review", "Design Review", "Is the proposed design of {svc} acceptable?", 12),
    ("rollback", "Rollback", "Roll back {svc} to the previous release?", 0.5),
]
SERVICES = ["billing-api", "checkout", "search", "auth", "ledger", "reports", "gateway"]
REVIEWERS = ["alice", "bob", "carol", "dave", "erin", REVIEWER]
EXPERT_GROUPS = ["security", "sre"]
# Routed breakpoints (~15%): groups, a user, the project owner and a name nobody holds.
ROUTINGS = [["security"], ["sre"], ["owner"], ["security", "sre"], [REVIEWER], ["typo-team"]]
COMMENTS = [
    "Looks good to me.",
    "Please attach the rollback plan first.",
    "Approved; watch the error rate for an hour.",
    "Not during the freeze, sorry.",
    "Which tables does this touch?",
    "Fine, but keep the old index until Monday.",
]
LOREM = (
    "## Step\n- check the dashboards before and after\n- migrate in small batches\n"
    "- keep the previous release warm for a quick rollback\n"
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor.\n"
) * 800
HISTORY_DAYS = 90  # spread of created_at (the default retention)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=100_000, help="breakpoints (100000)")
    parser.add_argument("--batch", type=int, default=2_000, help="rows per bulk_create")
    parser.add_argument("--reset", action="store_true", help="delete benchmark rows first")
    parser.add_argument("--seed", type=int, default=42, help="random seed (reproducible data)")
    parser.add_argument("--force", action="store_true", help="allow a database without 'bench'")
    parser.add_argument("--no-migrate", action="store_true", help="skip manage.py migrate")
    args = parser.parse_args()

    bootstrap()
    guard_database(args.force)

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

    from breakpoints.actors import REVIEWERS_GROUP

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
    """
    from django.db import connection, transaction

    from audit.models import Event
    from breakpoints.models import ApiToken, Breakpoint, WebhookDelivery
    from reviews.models import Feedback

    mine = {"breakpoint__agent_id__startswith": AGENT_PREFIX}
    others = Breakpoint.objects.exclude(agent_id__startswith=AGENT_PREFIX).exists()
    if connection.vendor == "postgresql" and not others:
        # Only benchmark rows: TRUNCATE leaves no dead tuples behind to skew the next plans.
        deleted = Breakpoint.objects.count()
        tables = ", ".join(
            connection.ops.quote_name(m._meta.db_table)
            for m in (Event, Feedback, WebhookDelivery, Breakpoint)
        )
        with connection.cursor() as cursor:
            cursor.execute(f"TRUNCATE {tables}")
        ApiToken.objects.filter(name=TOKEN_NAME).delete()
        return deleted
    with transaction.atomic():
        for model in (Event, Feedback, WebhookDelivery):
            model.objects.filter(**mine).delete()
        with connection.cursor() as cursor:
            table = connection.ops.quote_name(Breakpoint._meta.db_table)
            cursor.execute(f"DELETE FROM {table} WHERE agent_id LIKE %s", [AGENT_PREFIX + "%"])
            deleted = cursor.rowcount
        ApiToken.objects.filter(name=TOKEN_NAME).delete()
    return deleted


@contextlib.contextmanager
def explicit_timestamps(*models):
    """Let bulk_create store our created_at/updated_at/timestamp (auto_now* would overwrite)."""
    saved = []
    for model in models:
        for field in model._meta.concrete_fields:
            if getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False):
                saved.append((field, field.auto_now, field.auto_now_add))
                field.auto_now = field.auto_now_add = False
    try:
        yield
    finally:
        for field, auto_now, auto_now_add in saved:
            field.auto_now, field.auto_now_add = auto_now, auto_now_add


def seed(*, count: int, batch: int, rng: random.Random) -> dict[str, int]:
    from django.db import transaction
    from django.utils import timezone

    from audit.models import Event
    from breakpoints.models import Breakpoint
    from reviews.models import Feedback

    now = timezone.now()
    # Rows arrive in time order, as in production (the heap correlates with created_at).
    span = HISTORY_DAYS * 86400
    offsets = sorted((rng.random() * span for _ in range(count)), reverse=True)
    runs: dict[str, list[int]] = {}  # agent -> [run number, breakpoints left in it]
    totals = {"breakpoints": 0, "feedback": 0, "events": 0}
    with explicit_timestamps(Breakpoint, Feedback, Event):
        for start in range(0, count, batch):
            bps, feedback, events = [], [], []
            for offset in offsets[start : start + batch]:
                created = now - timedelta(seconds=offset)
                bp, bp_feedback, bp_events = breakpoint_build(rng, created, now, runs)
                bps.append(bp)
                feedback.extend(bp_feedback)
                events.extend(bp_events)
            with transaction.atomic():
                Breakpoint.objects.bulk_create(bps, batch_size=batch)
                Feedback.objects.bulk_create(feedback, batch_size=batch)
                Event.objects.bulk_create(events, batch_size=batch)
            totals["breakpoints"] += len(bps)
            totals["feedback"] += len(feedback)
            totals["events"] += len(events)
            done = start + len(bps)
            if done % (batch * 10) == 0 or done == count:
                print(f"  {done:,}/{count:,}", flush=True)
    return totals


def _pick(rng: random.Random, weights: dict[str, float]) -> str:
    return rng.choices(list(weights), weights=list(weights.values()))[0]


def breakpoint_build(rng: random.Random, created: datetime, now: datetime, runs: dict):
    from audit.models import Event
    from breakpoints.models import Breakpoint
    from reviews.models import Feedback

    agent = f"{AGENT_PREFIX}{rng.choices(range(1, 9), weights=AGENT_WEIGHTS)[0]:02d}"
    run = runs.setdefault(agent, [0, 0])
    if run[1] <= 0:
        run[0], run[1] = run[0] + 1, rng.randint(1, 8)
    run[1] -= 1
    run_id = f"run-{agent[len(AGENT_PREFIX) :]}-{run[0]:05d}"

    key, title, question, _ = rng.choices(KEYS, weights=[k[3] for k in KEYS])[0]
    question = question.format(svc=rng.choice(SERVICES), n=rng.randint(2, 9999))
    tags = _tags(rng)
    experts = list(rng.choice(ROUTINGS)) if rng.random() < 0.15 else []
    strategy = "collect-all" if len(experts) > 1 else "single"
    status = _pick(rng, STATUS_WEIGHTS)
    bp_id = "bp_" + base64.urlsafe_b64encode(rng.randbytes(16)).rstrip(b"=").decode()

    ttl = None
    if status == "expired" or rng.random() < 0.3:
        ttl = rng.randint(600, 3 * 86400)
        if status == "waiting":  # still waiting: its expiry lies ahead (no read expires it)
            ttl += int((now - created).total_seconds()) + 3600
        elif status == "expired":
            ttl = min(ttl, max(60, int((now - created).total_seconds()) - 60))
    expires_at = created + timedelta(seconds=ttl) if ttl else None

    payload = {
        "title": title,
        "question": question,
        "breakpointId": key,
        "tags": tags,
        "context": {
            "runId": run_id,
            "files": [
                {"path": "artifacts/plan.md", "format": "markdown", "content": _content(rng)}
            ],
        },
    }
    if experts:
        payload["expert"] = experts if len(experts) > 1 else experts[0]
        payload["strategy"] = strategy

    feedback: list[Feedback] = []
    events = [
        Event(
            breakpoint_id=bp_id,
            type="created",
            actor=f"agent:{agent}",
            timestamp=created,
            metadata={"statusTo": "waiting", "key": key},
        )
    ]
    finished = None
    if status != "waiting":
        limit = (expires_at - created).total_seconds() if expires_at else 2 * 86400
        finished = min(now, created + timedelta(seconds=rng.uniform(30, max(60, limit))))
        if status == "expired":
            finished = min(now, expires_at + timedelta(seconds=rng.uniform(0, 10)))
    clock = created
    comments = 1 if rng.random() < (0.1 if status == "waiting" else 0.2) else 0
    for _ in range(comments + (1 if rng.random() < 0.3 and comments else 0)):
        clock = clock + timedelta(seconds=rng.uniform(5, 600))
        if finished and clock >= finished:
            break
        author = rng.choice(REVIEWERS)
        feedback.append(
            Feedback(
                breakpoint_id=bp_id, author=author, comment=rng.choice(COMMENTS), created_at=clock
            )
        )
        events.append(
            Event(breakpoint_id=bp_id, type="feedback", actor=author, timestamp=clock, metadata={})
        )

    result, votes, auto_approval = None, [], _verdict(False, "no rule matches")
    released_at = expired_at = cancelled_at = None
    if status == "released":
        released_at = finished
        if rng.random() < 0.1:  # released by an auto-approval rule at creation
            released_at = finished = created
            by = "rule:rule-bench001"
            auto_approval = _verdict(True, "rule rule-bench001 matches")
            result = {"approved": True, "response": "Auto-approved.", "respondedBy": by}
            events.append(
                Event(
                    breakpoint_id=bp_id,
                    type="auto_approved",
                    actor=by,
                    timestamp=created,
                    metadata={},
                )
            )
        else:
            author, approved = rng.choice(REVIEWERS), rng.random() < 0.85
            comment = rng.choice(COMMENTS)
            vote = {
                "respondedBy": author,
                "approved": approved,
                "feedback": comment,
                "respondedAt": finished.isoformat(),
            }
            if experts:
                vote["seat"] = experts[0]
            votes = [vote]
            result = {
                "approved": approved,
                "response": comment,
                "feedback": comment,
                "respondedBy": author,
                "allResponses": [vote],
            }
            feedback.append(
                Feedback(
                    breakpoint_id=bp_id,
                    author=author,
                    comment=comment,
                    releases=True,
                    approved=approved,
                    created_at=finished,
                )
            )
            events.append(
                Event(
                    breakpoint_id=bp_id,
                    type="feedback",
                    actor=author,
                    timestamp=finished,
                    metadata={},
                )
            )
        by = result["respondedBy"]
    elif status == "expired":
        expired_at, by = finished, "system:ttl"
        result = {"approved": False, "feedback": "Expired: its TTL ran out.", "respondedBy": by}
    elif status == "cancelled":
        cancelled_at, by = finished, f"agent:{agent}"
        result = {"approved": False, "feedback": "Cancelled: superseded.", "respondedBy": by}
    if status != "waiting":
        events.append(
            Event(
                breakpoint_id=bp_id,
                type=status,
                actor=by,
                timestamp=finished,
                metadata={"statusFrom": "waiting", "statusTo": status},
            )
        )
    idempotency_key = f"idem-{bp_id[3:15]}" if rng.random() < 0.4 else None
    bp = Breakpoint(
        id=bp_id,
        status=status,
        agent_id=agent,
        run_id=run_id,
        title=title,
        key=key,
        question=question,
        payload=payload,
        tags=tags,
        ttl_seconds=ttl,
        expires_at=expires_at,
        created_at=created,
        updated_at=finished or (feedback[-1].created_at if feedback else created),
        released_at=released_at,
        expired_at=expired_at,
        cancelled_at=cancelled_at,
        result=result,
        auto_approval=auto_approval,
        experts=experts,
        strategy=strategy,
        votes=votes,
        idempotency_key=idempotency_key,
        request_hash=f"{rng.getrandbits(256):064x}" if idempotency_key else None,
    )
    return bp, feedback, events


def _tags(rng: random.Random) -> list[str]:
    wanted = rng.choices([0, 1, 2, 3], weights=[15, 40, 30, 15])[0]
    tags: list[str] = []
    while len(tags) < wanted:
        tag = _pick(rng, TAG_WEIGHTS)
        if tag not in tags:
            tags.append(tag)
    if "deploy" in tags and "production" not in tags and rng.random() < 0.5:
        tags.append("production")  # tags co-occur, as they do in real use
    return tags


def _content(rng: random.Random) -> str:
    """Context file text: mostly 0.2-1.5 KB, some larger, a few big enough to be TOASTed."""
    roll = rng.random()
    size = (
        rng.randint(200, 1500)
        if roll < 0.85
        else rng.randint(1500, 6000)
        if roll < 0.98
        else rng.randint(20_000, 60_000)
    )
    start = rng.randint(0, 200)
    return LOREM[start : start + size]


def _verdict(recommended: bool, reason: str) -> dict:
    return {
        "recommended": recommended,
        "reason": reason,
        "matchedRule": "rule-bench001" if recommended else None,
        "consecutiveApprovals": 0,
    }


def vacuum_analyze() -> None:
    """Fresh statistics (and a visibility map) so plans are the ones production would get."""
    from django.db import connection

    from audit.models import Event
    from breakpoints.models import Breakpoint
    from reviews.models import Feedback

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
    from breakpoints.models import Breakpoint
    from reviews.models import Feedback

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
