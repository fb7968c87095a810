"""Where the write paths' time goes: queries and a profile of create and release, in-process.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bpm_bench python benchmarks/write_paths.py
    python benchmarks/write_paths.py --profile 25 --top 30      # the cProfile lines too

Runs `POST /api/breakpoints` (an agent: a small payload with one markdown file and a tag)
and `POST /api/breakpoints/{id}/feedback {release: true}` (a reviewer) through the whole
Django stack with the test Client, as the web server would (DEBUG off), with one webhook
subscribed so that every create and release writes its outbox row, as the floors do
(benchmarks/floor_app.py). For each path it prints p50/p95 latency, the queries of one
request with their SQL (CaptureQueriesContext) and, with --profile N, the cProfile of N
requests sorted by cumulative time. Its agent, reviewer, tokens and webhook are created
here and deleted at the end with every row they wrote; the database's name must contain
"bench" (or --force).
"""

import argparse
import cProfile
import io
import os
import pstats
import time

from _common import (
    AGENT_PREFIX,
    CREATE_BODY,
    RELEASE_BODY,
    bootstrap,
    database_label,
    guard_database,
    summary_ms,
)

SORT = os.environ.get("PROFILE_SORT", "cumulative")  # or tottime
CPU = os.environ.get("PROFILE_CLOCK", "wall") == "cpu"  # the profile's clock
DUMP = os.environ.get("PROFILE_DUMP")  # a directory: each path's stats, for pstats or snakeviz


class Fixtures:
    """An agent, a reviewer, their tokens and a webhook; `delete()` removes what they wrote."""

    def __init__(self) -> None:
        from django.contrib.auth import get_user_model
        from django.contrib.auth.models import Group

        from accounts.tokens import token_create_for_agent, token_create_for_user
        from core.actors import REVIEWERS_GROUP
        from notifications.models import Webhook

        run = f"writes-{os.getpid()}"
        self.agent_id = f"{AGENT_PREFIX}{run}"
        group, created = Group.objects.get_or_create(name=REVIEWERS_GROUP)
        self.group_created = group if created else None
        self.user = get_user_model().objects.create(username=f"bench-{run}", is_staff=True)
        self.user.groups.add(group)
        agent_token, self.agent_token = token_create_for_agent(agent_id=self.agent_id, name=run)
        user_token, self.user_token = token_create_for_user(user=self.user, name=run)
        self.token_ids = [agent_token.pk, user_token.pk]
        # Never delivered (no worker reads this run's deliveries; the URL is a closed port).
        self.webhook = Webhook.objects.create(url="http://127.0.0.1:9/bench-writes", secret="s")

    def delete(self) -> None:
        from django.db import transaction

        from accounts.models import ApiToken
        from breakpoints.models import Breakpoint

        mine = Breakpoint.objects.filter(agent_id=self.agent_id)
        with transaction.atomic():
            for relation in Breakpoint._meta.related_objects:
                relation.related_model.objects.filter(
                    **{f"{relation.field.name}__in": mine.values("pk")}
                ).delete()
            mine.delete()
            self.webhook.delete()
            ApiToken.objects.filter(pk__in=self.token_ids).delete()
            self.user.delete()
            if self.group_created is not None and not self.group_created.user_set.exists():
                self.group_created.delete()


def client_for(token: str):
    from django.test import Client

    return Client(HTTP_AUTHORIZATION=f"Bearer {token}")


def create(agent) -> str:
    response = agent.post("/api/breakpoints", CREATE_BODY, content_type="application/json")
    if response.status_code != 201:
        raise SystemExit(f"create answered {response.status_code}: {response.content[:300]!r}")
    return response.json()["breakpointId"]


def release(reviewer, bp_id: str) -> None:
    response = reviewer.post(
        f"/api/breakpoints/{bp_id}/feedback", RELEASE_BODY, content_type="application/json"
    )
    if response.status_code != 201:
        raise SystemExit(f"release answered {response.status_code}: {response.content[:300]!r}")


def queries_of(call) -> list[dict]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        call()
    return list(captured.captured_queries)


def print_queries(name: str, queries: list[dict], width: int) -> None:
    print(f"\n--- {name}: {len(queries)} queries ---")
    for n, query in enumerate(queries, 1):
        sql = " ".join(query["sql"].split())
        print(f"{n:3d}. {float(query['time']) * 1000:6.2f} ms  {sql[:width]}")


def timed(calls, count: int) -> list[float]:
    seconds = []
    for call in calls[:count]:
        began = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - began)
    return seconds


def profiled(name: str, calls, top: int) -> None:
    # CPU time (process_time), not wall time: what a saturated server spends per request.
    profile = cProfile.Profile(time.process_time) if CPU else cProfile.Profile()
    profile.enable()
    for call in calls:
        call()
    profile.disable()
    if DUMP:
        profile.dump_stats(os.path.join(DUMP, f"{name.split()[0]}.prof"))
    out = io.StringIO()
    stats = pstats.Stats(profile, stream=out).strip_dirs().sort_stats(SORT)
    stats.print_stats(top)
    clock = "CPU" if CPU else "wall"
    print(f"\n--- {name}: cProfile ({clock} clock) of {len(calls)} requests, by {SORT} ---")
    print(out.getvalue().split("\n", 4)[-1].rstrip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=200, help="timed requests per path")
    parser.add_argument("--profile", type=int, default=0, help="requests profiled per path")
    parser.add_argument("--top", type=int, default=40, help="profile lines printed")
    parser.add_argument("--width", type=int, default=160, help="characters of SQL per query")
    parser.add_argument("--force", action="store_true", help="allow a database without 'bench'")
    args = parser.parse_args()
    bootstrap()
    guard_database(args.force)
    print(f"database: {database_label()}")
    fx = Fixtures()
    try:
        agent, reviewer = client_for(fx.agent_token), client_for(fx.user_token)
        for _ in range(5):  # warm-up: imports, caches, connections
            release(reviewer, create(agent))
        created: list[str] = []
        create_queries = queries_of(lambda: created.append(create(agent)))
        release_queries = queries_of(lambda: release(reviewer, created[0]))
        ids: list[str] = []
        creates = timed([lambda: ids.append(create(agent))] * args.iterations, args.iterations)
        releases = timed([lambda i=i: release(reviewer, i) for i in ids], args.iterations)
        for name, seconds, queries in (
            ("create POST /api/breakpoints", creates, create_queries),
            ("release POST /api/breakpoints/{id}/feedback", releases, release_queries),
        ):
            figures = summary_ms(seconds)
            print(
                f"\n=== {name}: {len(seconds)} requests: p50 {figures['p50']:.2f} ms, p95 "
                f"{figures['p95']:.2f} ms, {len(queries)} queries ==="
            )
            print_queries(name, queries, args.width)
        if args.profile:
            more: list[str] = []
            profiled("create", [lambda: more.append(create(agent))] * args.profile, args.top)
            profiled("release", [lambda i=i: release(reviewer, i) for i in more], args.top)
    finally:
        fx.delete()


if __name__ == "__main__":
    main()
