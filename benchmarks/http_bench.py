"""HTTP benchmarks of the status poll and the waiting path, against a floor, over loopback.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bpm_bench python benchmarks/http_bench.py
    python benchmarks/http_bench.py --only floor --seconds 3 --client-procs 1   # a quick look

Each figure is printed beside its target, with PASS/FAIL, and again in a summary:

- floor: a bare Django view (benchmarks/floor_app.py: no DRF, no middleware) doing the
  short poll's work (SHA-256 token lookup, primary-key read of the status columns), served
  like the project (gunicorn + uvicorn workers, same count; also under sync WSGI workers
  for reference), then the project's GET /status beside it: saturation throughput
  (closed loop) and p99 at half of that rate (open loop, constant arrival rate, latency
  from when each request was due). Targets: >= 70 % of the floor; p99 < 25 ms.
- lists: the same for a reviewer's list: a bare view (floor_app.py: the personal token
  verified by its hash, one page of 20 waiting rows with every column the list shows) and
  the project's GET /api/breakpoints?status=waiting&pageSize=20 beside it, served alike;
  target >= 50 % of the floor. Then every API list filter and search (the cases of
  lists_at_scale.py) on the seeded rows, closed loop with 1 and with 8 connections, p95
  against < 30 ms and < 100 ms.
- writes: a create and a reviewer's release against the write floors of floor_app.py
  (raw SQL through Django's connection), the floors and the project served at once and
  measured in turn, in --write-rounds interleaved rounds. Targets: >= 50 % of the floor.
- drf: DRF's ordinary endpoints under ASGI (as served now) and under WSGI (gunicorn
  gthread, as the old Procfile), req/s side by side.
- wake: release -> waiting agent answered, p50/p99, with 1 and with 1,000 concurrent
  waiters (distinct breakpoints; one random release at a time). Target p99 < 50 ms.
- capacity: 10,000 long-polls (?wait=60, re-issued when one ends) held by one web process;
  its RSS (master + worker) and threads; a reviewer release and a plain GET timed while
  they wait (p99 < 100 ms / < 50 ms); then all of them expired at once by the TTL sweep
  (the real service) and the time until the last waiter is answered. Target < 300 MiB.

Load comes from this benchmark's own asyncio client (benchmarks/http_client.py) on
127.0.0.1, in spawned client processes for throughput runs; no CPU pinning (server,
PostgreSQL and client share the cores; client and server CPU are printed so a client
bottleneck would show). Servers are started here and stopped at the end, even on error;
every loop is bounded in count and time. The rows it needs (agents `bench-agent-http-<pid>-*`,
their tokens, a reviewer `bench-http-reviewer-<pid>`) are created here and deleted at the
end, with everything that refers to them; nothing else is touched. The database's name
must contain "bench" (or --force).
"""

import argparse
import asyncio
import contextlib
import json
import os
import random
import resource
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from multiprocessing import get_context
from pathlib import Path

from _common import (
    AGENT_PREFIX,
    CREATE_BODY,
    RELEASE_BODY,
    ROOT,
    bootstrap,
    database_label,
    guard_database,
    percentile,
    print_table,
)
from http_client import (
    Connection,
    HTTPError,
    LoadResult,
    LoadSpec,
    Response,
    build_request,
    new_event_loop,
    run_load,
)
from http_servers import ConnectionWatch, CpuMeter, Server, ServerSpec, proc_status

BENCH_DIR = Path(__file__).resolve().parent
SECTIONS = ("floor", "lists", "writes", "drf", "wake", "capacity")
UVICORN = "web.webserver.BalancedUvicornWorker"
WAITERS_PER_TOKEN = 250  # the project caps open waits per token and process (429 beyond)
# The mass expiry moves only rows whose expiresAt is set to this instant: nobody else's.
SWEEP_CUTOFF = datetime(2000, 1, 1, tzinfo=UTC)

TARGET_FLOOR_RATIO = 1.00  # the status poll stays at or above its floor
TARGET_LIST_FLOOR_RATIO = 0.50  # of the raw-SQL list floor
TARGET_WRITE_FLOOR_RATIO = 0.50  # create and release, each of its raw-SQL floor
TARGET_LIST_P95_MS = {1: 30, 8: 100}  # per list filter: one client, eight clients
LIST_QUERY = "status=waiting&pageSize=20"  # a reviewer's queue page
TARGET_POLL_P99_MS = 25
TARGET_WAKE_P99_MS = 50
TARGET_RSS_MIB = 300
TARGET_RELEASE_P99_MS = 100
TARGET_GET_P99_MS = 50


# --- set-up and clean-up -------------------------------------------------------------


@dataclass
class Agent:
    agent_id: str
    token: str
    ids: list[str] = field(default_factory=list)


class Fixtures:
    """This run's agents, tokens, reviewer and breakpoints; `delete()` removes them all."""

    def __init__(self) -> None:
        run = f"http-{os.getpid()}"
        self.agent_prefix = f"{AGENT_PREFIX}{run}-"
        self.token_name = f"benchmark {run} (temporary)"
        self.token_ids: list[int] = []
        self.reviewer = None
        self.reviewer_token = ""
        self.group_created = None
        self.agents: list[Agent] = []
        self.webhook = None

    def subscribe(self) -> None:
        """A webhook for every event, so that each write has its outbox row, as the floors'.
        Never delivered: no worker reads this database's deliveries, and its URL is a
        closed port on 127.0.0.1."""
        from notifications.models import Webhook

        self.webhook = Webhook.objects.create(url="http://127.0.0.1:9/bench-http", secret="s")

    def unsubscribe(self) -> None:
        if self.webhook is not None:
            self.webhook.delete()  # with its deliveries
            self.webhook = None

    def setup_reviewer(self) -> None:
        from django.contrib.auth import get_user_model
        from django.contrib.auth.models import Group

        from accounts.tokens import token_create_for_user
        from core.actors import REVIEWERS_GROUP

        group, created = Group.objects.get_or_create(name=REVIEWERS_GROUP)
        self.group_created = group if created else None
        user = get_user_model().objects.create(
            username=f"bench-http-reviewer-{os.getpid()}", is_staff=True
        )
        user.groups.add(group)
        self.reviewer = user
        token, self.reviewer_token = token_create_for_user(user=user, name=self.token_name)
        self.token_ids.append(token.pk)

    def agent(self) -> Agent:
        from accounts.tokens import token_create_for_agent

        agent_id = f"{self.agent_prefix}{len(self.agents):04d}"
        token, raw = token_create_for_agent(agent_id=agent_id, name=self.token_name)
        self.token_ids.append(token.pk)
        self.agents.append(Agent(agent_id, raw))
        return self.agents[-1]

    def agents_with_rows(self, count: int, *, per_agent: int = WAITERS_PER_TOKEN) -> list[Agent]:
        """`count` waiting breakpoints (expiring in a day), spread over fresh agents."""
        agents = []
        while count > 0:
            agent = self.agent()
            agent.ids = rows_create(agent.agent_id, min(per_agent, count))
            count -= len(agent.ids)
            agents.append(agent)
        return agents

    def delete(self) -> None:
        from django.db import connection, transaction

        from accounts.models import ApiToken
        from breakpoints.models import Breakpoint

        # Exact agent ids (every one is recorded before its rows exist): index lookups.
        agent_ids = [agent.agent_id for agent in self.agents]
        mine = Breakpoint.objects.filter(agent_id__in=agent_ids)
        with transaction.atomic():
            for relation in Breakpoint._meta.related_objects:
                relation.related_model.objects.filter(
                    **{f"{relation.field.name}__in": mine.values("pk")}
                ).delete()
            with connection.cursor() as cursor:
                # Set-based: QuerySet.delete() would load every row to cascade.
                table = connection.ops.quote_name(Breakpoint._meta.db_table)
                cursor.execute(f"DELETE FROM {table} WHERE agent_id = ANY(%s)", [agent_ids])
            ApiToken.objects.filter(pk__in=self.token_ids).delete()
            self.unsubscribe()
            if self.reviewer is not None:
                self.reviewer.delete()
            if self.group_created is not None and not self.group_created.user_set.exists():
                self.group_created.delete()


def rows_create(agent_id: str, count: int, *, released_share: float = 0.0) -> list[str]:
    """Breakpoints of one agent, inserted in bulk (creation is another benchmark's figure)."""
    from django.utils import timezone

    from breakpoints.models import Breakpoint
    from breakpoints.models.breakpoint import new_breakpoint_id

    now = timezone.now()
    rng = random.Random(agent_id)
    rows = []
    for n in range(count):
        released = rng.random() < released_share
        payload = {"title": "HTTP benchmark", "question": f"Proceed with step {n}?"}
        rows.append(
            Breakpoint(
                id=new_breakpoint_id(),
                status="released" if released else "waiting",
                agent_id=agent_id,
                run_id=f"run-{agent_id}",
                title=payload["title"],
                key="http-benchmark",
                question=payload["question"],
                payload=payload,
                tags=["benchmark"],
                ttl_seconds=86400,
                expires_at=now + timedelta(days=1),
                released_at=now if released else None,
                result=(
                    {"approved": True, "response": "ok", "feedback": "ok", "respondedBy": "bench"}
                    if released
                    else None
                ),
            )
        )
    Breakpoint.objects.bulk_create(rows, batch_size=1000)
    return [row.id for row in rows]


def raise_open_files(wanted: int) -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


# --- figures -------------------------------------------------------------------------

VERDICTS: list[tuple[str, str, str, str]] = []


def verdict(name: str, figure: str, target: str, ok: bool | None) -> None:
    mark = "INFO" if ok is None else ("PASS" if ok else "FAIL")
    VERDICTS.append((mark, name, figure, target))
    print(f"  {mark}  {name}: {figure}  (target {target})", flush=True)


def ms(values: list[float], pct: float) -> float:
    return percentile(values, pct) * 1000 if values else float("nan")


def rate(result: LoadResult) -> float:
    return result.completed / result.window if result.window else 0.0


def errors_text(result: LoadResult, expected: int = 200) -> str:
    other = {code: n for code, n in result.statuses.items() if code != expected}
    parts = [f"{code}: {n:,}" for code, n in sorted(other.items())]
    parts += [f"{kind}: {n:,}" for kind, n in result.errors.items()]
    return ", ".join(parts) or "-"


class Loader:
    """Runs load shapes in spawned client processes (no Django there) and adds them up."""

    def __init__(self, procs: int):
        self.pool = ProcessPoolExecutor(max_workers=procs, mp_context=get_context("spawn"))
        list(self.pool.map(time.sleep, [0.5] * procs))  # start them all now, not in a run

    def close(self) -> None:
        self.pool.shutdown(cancel_futures=True)

    def run(self, spec: LoadSpec, procs: int, server: Server | None) -> tuple[LoadResult, CpuMeter]:
        per_proc = max(1, spec.connections // procs)
        start_at = time.time() + 0.3
        specs = [
            LoadSpec(
                **{
                    **spec.__dict__,
                    "connections": per_proc,
                    "rate": spec.rate / procs if spec.rate else None,
                    "max_requests": spec.max_requests // procs,
                    "start_at": start_at,
                    "seed": spec.seed * 100 + n,
                    # Requests sent once each: every process its own share.
                    "requests": spec.requests[n::procs] if spec.once else spec.requests,
                }
            )
            for n in range(procs)
        ]
        meter = CpuMeter(server)
        futures = [self.pool.submit(run_load, s) for s in specs]
        time.sleep(max(0.0, start_at + spec.warmup - time.time()))
        meter.start()
        results = [f.result(timeout=spec.warmup + spec.seconds + spec.grace + 60) for f in futures]
        meter.stop()
        if server is not None:
            server.check()
        total = results[0]
        for other in results[1:]:
            total.merge(other)
        return total, meter


# --- 1. short poll against the floor -------------------------------------------------


@dataclass
class PollCase:
    label: str
    server: str
    saturation: dict[int, float] = field(default_factory=dict)  # client procs -> req/s
    best: LoadResult | None = None
    best_meter: CpuMeter | None = None
    half: LoadResult | None = None
    half_rate: float = 0.0

    @property
    def best_rate(self) -> float:
        return max(self.saturation.values(), default=0.0)


def measure_poll(
    args, loader: Loader, server: Server, label: str, paths: list[str], token: str
) -> PollCase:
    case = PollCase(label, server.spec.describe())
    requests = [build_request("GET", p, port=server.port, token=token) for p in paths]
    spec = LoadSpec(
        port=server.port,
        requests=requests,
        seconds=args.seconds,
        connections=args.connections,
        warmup=args.warmup,
    )
    for procs in args.client_procs:
        result, meter = loader.run(spec, procs, server)
        case.saturation[procs] = rate(result)
        print(
            f"    {label}: {rate(result):,.0f} req/s with {procs} client process(es), "
            f"p99 {ms(result.latencies, 99):.1f} ms, server {meter.server_cores():.2f} cores, "
            f"client {result.cpu_seconds / (spec.warmup + spec.seconds):.2f} cores, machine "
            f"{meter.machine_pct():.0f}% busy; errors {errors_text(result)}",
            flush=True,
        )
        if case.best is None or rate(result) > rate(case.best):
            case.best, case.best_meter = result, meter
    case.half_rate = case.best_rate / 2
    if case.half_rate >= 1:
        open_spec = LoadSpec(**{**spec.__dict__, "rate": case.half_rate, "connections": 512})
        case.half, _ = loader.run(open_spec, 1, server)
        print(
            f"    {label}: open loop at {case.half_rate:,.0f} req/s (answered "
            f"{rate(case.half):,.0f}/s): p50 "
            f"{ms(case.half.latencies, 50):.1f} ms, p99 {ms(case.half.latencies, 99):.1f} ms, "
            f"max {ms(case.half.latencies, 100):.1f} ms; errors {errors_text(case.half)}",
            flush=True,
        )
    return case


def section_floor(args, fx: Fixtures, loader: Loader, watch: ConnectionWatch) -> None:
    print("\n=== 1. short poll: the floor, then the project's GET /status ===", flush=True)
    agent = fx.agent()
    agent.ids = rows_create(agent.agent_id, args.poll_rows, released_share=0.5)
    floor_env = {"FLOOR_DB_POOL_MAX": str(args.pool_max)}
    cases: list[PollCase] = []

    asgi = ServerSpec("floor-asgi", "floor_app:asgi_application", UVICORN, args.workers)
    with started(asgi, args, watch, cwd=BENCH_DIR, env=floor_env) as server:
        for view in ("sync", "async"):
            paths = [f"/floor/{view}/{i}" for i in agent.ids]
            cases.append(
                measure_poll(args, loader, server, f"floor, {view} view", paths, agent.token)
            )
    floor = max(cases, key=lambda c: c.best_rate)

    wsgi = ServerSpec("floor-wsgi", "floor_app:wsgi_application", "sync", args.sync_workers)
    with started(wsgi, args, watch, cwd=BENCH_DIR, env={"FLOOR_DB_POOL_MAX": "0"}) as server:
        paths = [f"/floor/sync/{i}" for i in agent.ids]
        cases.append(measure_poll(args, loader, server, "floor, sync workers", paths, agent.token))

    project = ServerSpec("project-asgi", "config.asgi:application", UVICORN, args.workers)
    with started(project, args, watch) as server:
        paths = [f"/api/breakpoints/{i}/status" for i in agent.ids]
        status = measure_poll(args, loader, server, "project /status", paths, agent.token)
        cases.append(status)

    print()
    procs = args.client_procs
    print_table(
        (
            "case",
            "server",
            *(f"req/s {p} client" for p in procs),
            "closed p99 ms",
            "half rate",
            "p50 ms",
            "p99 ms",
            "max ms",
            "errors",
        ),
        [
            (
                c.label,
                c.server,
                *(f"{c.saturation.get(p, 0):,.0f}" for p in procs),
                ms(c.best.latencies, 99) if c.best else float("nan"),
                f"{c.half_rate:,.0f}",
                ms(c.half.latencies, 50) if c.half else float("nan"),
                ms(c.half.latencies, 99) if c.half else float("nan"),
                ms(c.half.latencies, 100) if c.half else float("nan"),
                errors_text(c.half) if c.half else "-",
            )
            for c in cases
        ],
    )
    print(
        f"(closed loop: {args.connections} connections, {args.seconds:g} s after "
        f"{args.warmup:g} s warm-up; half rate: open loop at half the best saturation, "
        "latency from each request's due time)"
    )
    ratio = status.best_rate / floor.best_rate if floor.best_rate else 0.0
    verdict(
        "short poll throughput vs floor",
        f"{status.best_rate:,.0f} / {floor.best_rate:,.0f} req/s ({floor.label}) = {ratio:.0%}",
        f">= {TARGET_FLOOR_RATIO:.0%}",
        ratio >= TARGET_FLOOR_RATIO,
    )
    sync_floor = cases[2]
    verdict(
        "short poll vs the floor under sync workers (reference)",
        f"{status.best_rate:,.0f} / {sync_floor.best_rate:,.0f} req/s = "
        f"{status.best_rate / sync_floor.best_rate if sync_floor.best_rate else 0:.0%}",
        "printed",
        None,
    )
    p99 = ms(status.half.latencies, 99) if status.half else float("nan")
    verdict(
        f"short poll p99 at half saturation ({status.half_rate:,.0f} req/s)",
        f"{p99:.1f} ms",
        f"< {TARGET_POLL_P99_MS} ms",
        p99 < TARGET_POLL_P99_MS and status.half is not None and errors_text(status.half) == "-",
    )


# --- 1b. a reviewer's list against its floor, and every list filter -----------------


def section_lists(args, fx: Fixtures, loader: Loader, watch: ConnectionWatch) -> None:
    print("\n=== 1b. lists: the floor, then the project's GET /api/breakpoints ===", flush=True)
    from lists_at_scale import a_run_id, api_list_queries

    token = fx.reviewer_token
    floor_env = {"FLOOR_DB_POOL_MAX": str(args.pool_max)}
    cases: list[PollCase] = []
    asgi = ServerSpec("floor-asgi", "floor_app:asgi_application", UVICORN, args.workers)
    with started(asgi, args, watch, cwd=BENCH_DIR, env=floor_env) as server:
        for view in ("sync", "async", "raw"):
            paths = [f"/floor/list/{view}?{LIST_QUERY}"]
            cases.append(measure_poll(args, loader, server, f"list floor, {view}", paths, token))
    orm_floor = max(cases[:2], key=lambda c: c.best_rate)
    floor = cases[2]  # raw SQL: the floor the target is measured against
    project = ServerSpec("project-asgi", "config.asgi:application", UVICORN, args.workers)
    with started(project, args, watch) as server:
        paths = [f"/api/breakpoints?{LIST_QUERY}"]
        api = measure_poll(args, loader, server, "project list", paths, token)
        cases.append(api)
        filters = list_filters_measure(args, loader, server, api_list_queries(a_run_id()), token)
    print()
    print_table(
        ("case", "req/s", "closed p50 ms", "closed p99 ms", "half rate", "p50 ms", "p99 ms"),
        [
            (
                c.label,
                f"{c.best_rate:,.0f}",
                ms(c.best.latencies, 50) if c.best else float("nan"),
                ms(c.best.latencies, 99) if c.best else float("nan"),
                f"{c.half_rate:,.0f}",
                ms(c.half.latencies, 50) if c.half else float("nan"),
                ms(c.half.latencies, 99) if c.half else float("nan"),
            )
            for c in cases
        ],
    )
    ratio = api.best_rate / floor.best_rate if floor.best_rate else 0.0
    verdict(
        f"list (?{LIST_QUERY}) throughput vs its raw-SQL floor",
        f"{api.best_rate:,.0f} / {floor.best_rate:,.0f} req/s ({floor.label}) = {ratio:.0%}",
        f">= {TARGET_LIST_FLOOR_RATIO:.0%}",
        ratio >= TARGET_LIST_FLOOR_RATIO and api.best is not None and errors_text(api.best) == "-",
    )
    orm_ratio = api.best_rate / orm_floor.best_rate if orm_floor.best_rate else 0.0
    verdict(
        "list throughput vs the ORM list floor (reference)",
        f"{api.best_rate:,.0f} / {orm_floor.best_rate:,.0f} req/s ({orm_floor.label}) = "
        f"{orm_ratio:.0%}",
        "printed",
        None,
    )
    list_filters_report(filters)


def list_filters_measure(args, loader: Loader, server: Server, queries, token: str) -> list:
    """Each list filter, closed loop, with every connection count of TARGET_LIST_P95_MS."""
    from urllib.parse import urlencode

    measured = []
    for name, query in queries:
        request = build_request(
            "GET", f"/api/breakpoints?{urlencode(query)}", port=server.port, token=token
        )
        for connections in TARGET_LIST_P95_MS:
            spec = LoadSpec(
                port=server.port,
                requests=[request],
                seconds=args.list_seconds,
                connections=connections,
                warmup=min(args.warmup, 1.0),
            )
            result, _ = loader.run(spec, 1, server)
            measured.append((name, connections, result))
            print(
                f"    {name}, {connections} client(s): {rate(result):,.0f} req/s, p50 "
                f"{ms(result.latencies, 50):.1f} ms, p95 {ms(result.latencies, 95):.1f} ms; "
                f"errors {errors_text(result)}",
                flush=True,
            )
    return measured


def list_filters_report(measured: list) -> None:
    for connections, target in TARGET_LIST_P95_MS.items():
        runs = [(name, result) for name, n, result in measured if n == connections]
        slow = [
            name
            for name, result in runs
            if not ms(result.latencies, 95) < target or errors_text(result) != "-"
        ]
        worst = max(runs, key=lambda run: ms(run[1].latencies, 95), default=None)
        figure = f"{len(runs) - len(slow)} of {len(runs)} under" + (
            f"; worst {worst[0]} {ms(worst[1].latencies, 95):.1f} ms" if worst else ""
        )
        verdict(
            f"every list filter p95, {connections} client(s)",
            figure
            + (
                f" (over or failing: {', '.join(slow[:3])}{', ...' if len(slow) > 3 else ''})"
                if slow
                else ""
            ),
            f"< {target} ms",
            bool(runs) and not slow,
        )


# --- 1c. the write paths against their floors ----------------------------------------


@dataclass
class WriteCase:
    label: str
    server: str
    saturation: dict[int, LoadResult] = field(default_factory=dict)  # client procs -> runs

    def add(self, procs: int, result: LoadResult) -> None:
        """Another run (a round) with `procs` client processes: its requests and its window
        are added to those of the earlier rounds."""
        total = self.saturation.setdefault(procs, LoadResult())
        window = total.window + result.window
        total.merge(result)
        total.window = window

    @property
    def best(self) -> LoadResult | None:
        return max(self.saturation.values(), key=rate, default=None)

    @property
    def best_rate(self) -> float:
        return rate(self.best) if self.best is not None else 0.0


def measure_write(
    args,
    loader: Loader,
    server: Server,
    label: str,
    requests,
    once: bool,
    *,
    procs: int,
    seconds: float,
    warmup: float,
) -> LoadResult:
    """One closed-loop run: `requests` sent in turn (`once`: each once, in order, for
    releases: every one needs its own waiting row)."""
    spec = LoadSpec(
        port=server.port,
        requests=requests,
        seconds=seconds,
        connections=args.connections,
        warmup=warmup,
        once=once,
    )
    result, meter = loader.run(spec, procs, server)
    print(
        f"    {label}: {rate(result):,.0f} req/s with {procs} client process(es), p50 "
        f"{ms(result.latencies, 50):.1f} ms, p99 {ms(result.latencies, 99):.1f} ms, server "
        f"{meter.server_cores():.2f} cores, machine {meter.machine_pct():.0f}% busy; "
        f"errors {errors_text(result, 201)}",
        flush=True,
    )
    return result


WRITE_SERVERS = (
    # (label, app, worker class, is a floor)
    ("floor-asgi", "floor_app:asgi_application", UVICORN, True),
    ("floor-wsgi", "floor_app:wsgi_application", "sync", True),
    ("project-asgi", "config.asgi:application", UVICORN, False),
)


def section_writes(args, fx: Fixtures, loader: Loader, watch: ConnectionWatch) -> None:
    """The floors and the project served at once, measured in turn: `--write-rounds` rounds,
    each a run of every server (in a rotated order), its --seconds split among the rounds.
    The machine's speed drifts over tens of seconds (a shared VM); measured one after the
    other, a floor and the project could land on different sides of a drift. Interleaved,
    each figure is the sum of runs spread over the same span of time."""
    print(
        "\n=== 1c. writes: create and release, the floors and the project in turn ===", flush=True
    )
    agent = fx.agent()
    fx.subscribe()
    cases: dict[tuple[str, str], WriteCase] = {}
    try:
        with contextlib.ExitStack() as stack:
            servers = []
            for label, app, worker_class, is_floor in WRITE_SERVERS:
                workers = args.sync_workers if worker_class == "sync" else args.workers
                spec = ServerSpec(label, app, worker_class, workers)
                pool = "0" if worker_class == "sync" else str(args.pool_max)
                where = {"cwd": BENCH_DIR, "env": {"FLOOR_DB_POOL_MAX": pool}} if is_floor else {}
                server = stack.enter_context(started(spec, args, None, **where))
                servers.append((server, is_floor))
            watch.watch_all([server for server, _ in servers])
            try:
                writes_measure(args, fx, loader, servers, agent, cases)
            finally:
                print(f"  peak database connections {watch.peak}", flush=True)
                watch.watch(None)
    finally:
        fx.unsubscribe()
    writes_report(args, cases)


def writes_measure(
    args,
    fx: Fixtures,
    loader: Loader,
    servers: list[tuple[Server, bool]],
    agent: Agent,
    cases: dict[tuple[str, str], WriteCase],
) -> None:
    """Each server's creates (an agent's, one body, repeated), then each server's releases
    of fresh waiting rows (a reviewer's, each released once), round after round."""
    rounds = max(1, args.write_rounds)
    seconds = args.seconds / rounds
    create_body, release_body = json.dumps(CREATE_BODY).encode(), json.dumps(RELEASE_BODY).encode()
    for path in ("create", "release"):
        for server, _ in servers:
            cases[(server.spec.label, path)] = WriteCase(
                f"{server.spec.label} {path}", server.spec.describe()
            )
        for procs in args.client_procs:
            for round_number in range(rounds):
                turn = round_number % len(servers)
                for server, is_floor in servers[turn:] + servers[:turn]:
                    port = server.port
                    if path == "create":
                        url = "/floor/create" if is_floor else "/api/breakpoints"
                        token = agent.token
                        requests = [
                            build_request("POST", url, port=port, token=token, body=create_body)
                        ]
                    else:
                        template = (
                            "/floor/release/{}" if is_floor else "/api/breakpoints/{}/feedback"
                        )
                        ids = rows_create(agent.agent_id, args.write_rows)
                        requests = [
                            build_request(
                                "POST",
                                template.format(bp_id),
                                port=port,
                                token=fx.reviewer_token,
                                body=release_body,
                            )
                            for bp_id in ids
                        ]
                    # A server's first run warms it up; later ones only refill the connections.
                    warmup = args.warmup if round_number == 0 else min(args.warmup, 0.5)
                    label = f"{server.spec.label} {path} (round {round_number + 1}/{rounds})"
                    result = measure_write(
                        args,
                        loader,
                        server,
                        label,
                        requests,
                        path == "release",
                        procs=procs,
                        seconds=seconds,
                        warmup=warmup,
                    )
                    cases[(server.spec.label, path)].add(procs, result)


def writes_report(args, cases: dict[tuple[str, str], WriteCase]) -> None:
    print()
    print_table(
        ("case", "server", "req/s", "p50 ms", "p99 ms", "errors"),
        [
            (
                case.label,
                case.server,
                f"{case.best_rate:,.0f}",
                ms(case.best.latencies, 50) if case.best else float("nan"),
                ms(case.best.latencies, 99) if case.best else float("nan"),
                errors_text(case.best, 201) if case.best else "-",
            )
            for case in cases.values()
        ],
    )
    print(
        f"(closed loop: {args.connections} connections, {args.seconds:g} s after "
        f"{args.warmup:g} s warm-up, in {args.write_rounds} interleaved rounds, the best of "
        f"{args.client_procs} client processes; the floor is the faster of its two servers)"
    )
    for path, name in (("create", "create POST /api/breakpoints"), ("release", "release")):
        floors = [cases[(label, path)] for label, *_, is_floor in WRITE_SERVERS if is_floor]
        floor = max(floors, key=lambda case: case.best_rate)
        project = cases[("project-asgi", path)]
        ratio = project.best_rate / floor.best_rate if floor.best_rate else 0.0
        p50 = ms(project.best.latencies, 50) if project.best else float("nan")
        clean = project.best is not None and errors_text(project.best, 201) == "-"
        verdict(
            f"{name} throughput vs its floor",
            f"{project.best_rate:,.0f} / {floor.best_rate:,.0f} req/s ({floor.label}) = "
            f"{ratio:.0%}, p50 {p50:.1f} ms",
            f">= {TARGET_WRITE_FLOOR_RATIO:.0%}",
            ratio >= TARGET_WRITE_FLOOR_RATIO and clean,
        )


# --- 2. DRF endpoints: ASGI against WSGI ---------------------------------------------


def section_drf(args, fx: Fixtures, loader: Loader, watch: ConnectionWatch) -> None:
    print("\n=== 2. DRF endpoints: ASGI (uvicorn workers) against WSGI (gthread) ===", flush=True)
    agent = fx.agent()
    agent.ids = rows_create(agent.agent_id, args.poll_rows, released_share=0.5)
    endpoints = [
        ("GET /api/breakpoints/{id}", [f"/api/breakpoints/{i}" for i in agent.ids], agent.token),
        ("GET /api/breakpoints (page 1)", ["/api/breakpoints"], fx.reviewer_token),
        (
            "GET /api/breakpoints/{id}/status",
            [f"/api/breakpoints/{i}/status" for i in agent.ids],
            agent.token,
        ),
    ]
    servers = [
        ServerSpec("project-asgi", "config.asgi:application", UVICORN, args.workers),
        ServerSpec(
            "project-wsgi",
            "config.wsgi:application",
            "gthread",
            args.wsgi_workers,
            threads=args.wsgi_threads,
        ),
    ]
    figures: dict[tuple[str, str], LoadResult] = {}
    for spec in servers:
        with started(spec, args, watch) as server:
            for name, paths, token in endpoints:
                requests = [build_request("GET", p, port=server.port, token=token) for p in paths]
                load = LoadSpec(
                    port=server.port,
                    requests=requests,
                    seconds=args.seconds,
                    connections=args.connections,
                    warmup=args.warmup,
                )
                result, _ = loader.run(load, 1, server)
                figures[(spec.label, name)] = result
                print(
                    f"    {spec.label} {name}: {rate(result):,.0f} req/s, p99 "
                    f"{ms(result.latencies, 99):.1f} ms, client "
                    f"{result.cpu_seconds / (load.warmup + load.seconds):.2f} cores; "
                    f"errors {errors_text(result)}",
                    flush=True,
                )
    print()
    rows = []
    for name, _, _ in endpoints:
        a, w = figures[("project-asgi", name)], figures[("project-wsgi", name)]
        rows.append(
            (
                name,
                f"{rate(a):,.0f}",
                ms(a.latencies, 50),
                ms(a.latencies, 99),
                f"{rate(w):,.0f}",
                ms(w.latencies, 50),
                ms(w.latencies, 99),
                f"{rate(a) / rate(w):.0%}" if rate(w) else "-",
                errors_text(a) + " / " + errors_text(w),
            )
        )
    print_table(
        (
            "endpoint",
            "ASGI req/s",
            "p50 ms",
            "p99 ms",
            "WSGI req/s",
            "p50 ms",
            "p99 ms",
            "ASGI/WSGI",
            "errors ASGI / WSGI",
        ),
        rows,
    )
    print(
        f"(ASGI: {servers[0].describe()}; WSGI: {servers[1].describe()}, as the old Procfile; "
        f"closed loop, {args.connections} connections, 1 client process)"
    )
    for name, _, _ in endpoints[:2]:
        a, w = figures[("project-asgi", name)], figures[("project-wsgi", name)]
        verdict(f"{name} ASGI vs WSGI", f"{rate(a):,.0f} vs {rate(w):,.0f} req/s", "printed", None)


# --- waiting: shared pieces ----------------------------------------------------------


@dataclass
class Answer:
    status: str | None  # the breakpoint's status in the answer; None when not a 200
    http: int
    at: float  # time.monotonic() when the answer was read
    reissued: int


async def long_poll(connection: Connection, request: bytes, *, until: float) -> Answer:
    """Ask with ?wait=, again whenever a wait ends still waiting, until `until` (monotonic)."""
    reissued = 0
    while True:
        response: Response = await connection.request(request)
        at = time.monotonic()
        if response.status != 200:
            return Answer(None, response.status, at, reissued)
        status = json.loads(response.body)["status"]
        if status != "waiting" or at >= until:
            return Answer(status, 200, at, reissued)
        reissued += 1


def wait_request(port: int, bp_id: str, token: str, wait: int = 60) -> bytes:
    return build_request(
        "GET", f"/api/breakpoints/{bp_id}/status?wait={wait}", port=port, token=token
    )


class Releaser:
    """Releases through the real service on one thread, timing the commit."""

    def __init__(self, reviewer) -> None:
        from core.actors import Actor

        self.actor = Actor.for_user(reviewer)
        self.thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bench-release")

    def release(self, bp_id: str) -> tuple[float, float]:
        """(service started, COMMIT sent): monotonic times; the wake-up follows the COMMIT."""
        from django.db import transaction

        from breakpoints.services import feedback_add

        started = time.monotonic()
        with transaction.atomic():  # so that we know the instant of the COMMIT
            feedback_add(breakpoint_id=bp_id, actor=self.actor, comment="ok", release=True)
            committing = time.monotonic()
        return started, committing

    async def __call__(self, bp_id: str) -> tuple[float, float]:
        return await asyncio.get_running_loop().run_in_executor(self.thread, self.release, bp_id)

    def close(self) -> None:
        from django.db import connections

        self.thread.submit(connections.close_all).result()
        self.thread.shutdown()


def waits_are_thin() -> bool:
    """False while config.asgi serves everything through Django's own ASGI handler, where
    each waiting request holds a thread and a database connection for its whole wait."""
    from django.core.handlers.asgi import ASGIHandler

    import config.asgi

    return not isinstance(config.asgi.application, ASGIHandler)


# --- 3. wake latency -----------------------------------------------------------------


def section_wake(args, fx: Fixtures, watch: ConnectionWatch) -> None:
    print("\n=== 3. wake latency: release -> waiting agent answered ===", flush=True)
    spec = ServerSpec("project-asgi", "config.asgi:application", UVICORN, args.workers)
    releaser = Releaser(fx.reviewer)
    try:
        with started(spec, args, watch) as server:
            for waiters in (1, args.waiters):
                if waiters > 1 and not waits_are_thin():
                    verdict(
                        f"wake p99, {waiters:,} waiters",
                        "not run: config.asgi is Django's own handler (a thread and a "
                        "database connection per waiter)",
                        f"< {TARGET_WAKE_P99_MS} ms",
                        False,
                    )
                    continue
                agents = fx.agents_with_rows(waiters + args.wakes)
                with asyncio.Runner(loop_factory=new_event_loop) as runner:
                    lat, service, problems = runner.run(
                        wake_run(args, server, agents, waiters, releaser)
                    )
                print(
                    f"    {waiters:,} waiter(s): {len(lat)} wakes, p50 {ms(lat, 50):.1f} ms, p99 "
                    f"{ms(lat, 99):.1f} ms, max {ms(lat, 100):.1f} ms; release service p50 "
                    f"{ms(service, 50):.1f} ms; problems: {problems or '-'}",
                    flush=True,
                )
                verdict(
                    f"wake p50/p99, {waiters:,} waiter(s), {len(lat)} wakes",
                    f"{ms(lat, 50):.1f} / {ms(lat, 99):.1f} ms",
                    f"p99 < {TARGET_WAKE_P99_MS} ms",
                    ms(lat, 99) < TARGET_WAKE_P99_MS and len(lat) >= args.wakes and not problems,
                )
    finally:
        releaser.close()
    print(
        "(latency: from the release's COMMIT, sent by this process through the real "
        "service, to the waiter's answer read by the client)"
    )


async def wake_run(args, server: Server, agents: list[Agent], waiters: int, releaser: Releaser):
    rng = random.Random(7)
    port = server.port
    pairs = [(bp_id, agent.token) for agent in agents for bp_id in agent.ids]
    spare = pairs[waiters:]
    until = time.monotonic() + 600
    open_since: dict[str, float] = {}
    tasks: dict[str, asyncio.Task] = {}
    connections: list[Connection] = []
    connect = asyncio.Semaphore(200)
    latencies: list[float] = []
    service: list[float] = []
    problems: dict[str, int] = {}

    async def waiter(bp_id: str, token: str) -> Answer:
        connection = Connection(port)
        connections.append(connection)
        async with connect:
            await connection.open()
        open_since[bp_id] = time.monotonic()
        try:
            return await long_poll(connection, wait_request(port, bp_id, token), until=until)
        finally:
            connection.close()

    def start(bp_id: str, token: str) -> None:
        tasks[bp_id] = asyncio.create_task(waiter(bp_id, token))

    def problem(kind: str) -> None:
        problems[kind] = problems.get(kind, 0) + 1

    for bp_id, token in pairs[:waiters]:
        start(bp_id, token)
    give_up = time.monotonic() + 60
    while len(open_since) < waiters and time.monotonic() < give_up:
        await asyncio.sleep(0.05)
    await asyncio.sleep(1.0 + waiters / 2000)  # let the server take in the last of them
    deadline = time.monotonic() + 120 + 2 * args.wakes  # bounded whatever the server does
    try:
        for _ in range(args.wakes):
            if time.monotonic() > deadline:
                problem("time bound reached")
                break
            # One waiter: released at a random moment of its wait; many: any random one
            # whose wait the server has surely taken in.
            age = rng.uniform(0.05, 0.25) if waiters == 1 else 0.5
            give_up = time.monotonic() + 10
            while True:
                settled = time.monotonic() - age
                candidates = [i for i, t in open_since.items() if t < settled and i in tasks]
                if candidates or time.monotonic() > give_up:
                    break
                await asyncio.sleep(0.005)
            if not candidates:
                problem("no waiter open")
                continue
            bp_id = rng.choice(candidates)
            task = tasks.pop(bp_id)
            if task.done():
                problem("answered before its release")
                continue
            began, committing = await releaser(bp_id)
            service.append(committing - began)
            try:
                answer = await asyncio.wait_for(task, timeout=10)
            except TimeoutError:
                problem("not answered within 10 s")
                continue
            except (OSError, asyncio.IncompleteReadError, HTTPError, ValueError) as error:
                problem(type(error).__name__)
                continue
            if answer.status != "released":
                problem(f"answered {answer.status or answer.http}")
                continue
            latencies.append(answer.at - committing)
            if spare:
                start(*spare.pop())  # keep the count of waiters up
            if waiters > 1:
                await asyncio.sleep(rng.uniform(0.01, 0.05))
    finally:
        for task in tasks.values():
            task.cancel()
        await asyncio.gather(*tasks.values(), return_exceptions=True)
        for connection in connections:
            connection.close()
    return latencies, service, problems


# --- 4. capacity ---------------------------------------------------------------------


def section_capacity(args, fx: Fixtures, watch: ConnectionWatch) -> None:
    count = args.capacity
    print(f"\n=== 4. capacity: {count:,} long-polls held by one web process ===", flush=True)
    if not waits_are_thin():
        verdict(
            f"{count:,} waiters",
            "not run: config.asgi is Django's own handler (a thread and a database "
            "connection per waiter)",
            f"< {TARGET_RSS_MIB} MiB",
            False,
        )
        return
    agents = fx.agents_with_rows(count)
    probe = fx.agent()
    probe.ids = rows_create(probe.agent_id, args.probes)
    spec = ServerSpec("project-capacity", "config.asgi:application", UVICORN, 1)
    with started(spec, args, watch) as server:
        with asyncio.Runner(loop_factory=new_event_loop) as runner:
            runner.run(capacity_run(args, fx, server, agents, probe))


async def capacity_run(args, fx: Fixtures, server: Server, agents: list[Agent], probe: Agent):
    port = server.port
    count = sum(len(a.ids) for a in agents)
    all_ids = [bp_id for agent in agents for bp_id in agent.ids]
    # Warm the process (first requests import and connect) before its baseline: the
    # status path, and Django's feedback path (a comment, which releases nothing).
    warm = Connection(port)
    for bp_id in all_ids[:20]:
        await warm.request(
            build_request(
                "GET", f"/api/breakpoints/{bp_id}/status", port=port, token=agents[0].token
            )
        )
    for _ in range(3):
        await warm.request(
            build_request(
                "POST",
                f"/api/breakpoints/{probe.ids[0]}/feedback",
                port=port,
                token=fx.reviewer_token,
                body=json.dumps({"comment": "warm-up", "release": False}).encode(),
            )
        )
    warm.close()
    base_rss, base_threads = server.rss_mib(), server.threads()
    print(
        f"    web process before: RSS {base_rss:.0f} MiB ({rss_parts(server)}), "
        f"{base_threads} threads"
    )

    until = time.monotonic() + args.capacity_timeout
    opened = [0]
    connect = asyncio.Semaphore(500)
    connections: list[Connection] = []
    failures: dict[str, int] = {}

    async def waiter(bp_id: str, token: str) -> Answer | None:
        connection = Connection(port)
        connections.append(connection)
        try:
            async with connect:
                await connection.open()
            opened[0] += 1
            return await long_poll(connection, wait_request(port, bp_id, token), until=until)
        except (OSError, asyncio.IncompleteReadError, HTTPError, ValueError) as error:
            failures[type(error).__name__] = failures.get(type(error).__name__, 0) + 1
            return None
        finally:
            connection.close()

    began = time.monotonic()
    tasks = [
        asyncio.create_task(waiter(bp_id, agent.token)) for agent in agents for bp_id in agent.ids
    ]
    while opened[0] + sum(failures.values()) < count and time.monotonic() - began < 120:
        await asyncio.sleep(0.05)
    sent = time.monotonic() - began
    settled = await settle(server, count)
    held = time.monotonic() - began
    early = sum(1 for t in tasks if t.done())
    rss, threads, files = server.rss_mib(), server.threads(), server.open_files()
    print(
        f"    {opened[0]:,} waits sent in {sent:.1f} s; server settled after {held:.1f} s "
        f"({'idle' if settled else 'still busy'}); {early:,} answered early; "
        f"connect failures: {failures or '-'}"
    )
    print(
        f"    web process holding them: RSS {rss:.0f} MiB ({rss_parts(server)}; "
        f"{(rss - base_rss) * 1024 / max(1, count):.1f} KiB per waiter), {threads} threads, "
        f"{files:,} open files"
    )
    verdict(
        f"{count:,} waiters: web RSS (master + worker)",
        f"{rss:.0f} MiB, {threads} threads, {count - early:,} held",
        f"< {TARGET_RSS_MIB} MiB",
        rss < TARGET_RSS_MIB and early == 0 and not failures,
    )

    # While they wait: a reviewer's releases and plain status GETs, one at a time.
    releases, gets, probe_errors = await probes(args, fx, port, probe, all_ids, agents)
    print(
        f"    while waiting: {len(releases)} releases p50 {ms(releases, 50):.1f} / p99 "
        f"{ms(releases, 99):.1f} / max {ms(releases, 100):.1f} ms; {len(gets)} GETs p50 "
        f"{ms(gets, 50):.1f} / p99 {ms(gets, 99):.1f} / max {ms(gets, 100):.1f} ms; "
        f"errors {probe_errors or '-'}"
    )
    verdict(
        f"reviewer release p99 during {count:,} waits",
        f"{ms(releases, 99):.1f} ms",
        f"< {TARGET_RELEASE_P99_MS} ms",
        ms(releases, 99) < TARGET_RELEASE_P99_MS and not probe_errors,
    )
    verdict(
        f"plain GET /status p99 during {count:,} waits",
        f"{ms(gets, 99):.1f} ms",
        f"< {TARGET_GET_P99_MS} ms",
        ms(gets, 99) < TARGET_GET_P99_MS and not probe_errors,
    )
    still = sum(1 for t in tasks if not t.done())

    # All of them at once: the TTL sweep (the real service) expires every one.
    sweep = await mass_expire(all_ids, fx.agent_prefix)
    if sweep is None:
        verdict("mass expiry", "not run: other rows share the cut-off", "all answered", False)
        results = []
    else:
        sweep_began, sweep_ended, expired = sweep
        done, pending = await asyncio.wait(tasks, timeout=max(1.0, until - time.monotonic()))
        for task in pending:
            task.cancel()
        results = [t.result() for t in done if not t.cancelled()]
        answered = [a for a in results if a is not None and a.status == "expired"]
        last = max((a.at for a in answered), default=float("nan"))
        other = len(results) - len(answered)
        print(
            f"    mass expiry: the sweep expired {expired:,} in {sweep_ended - sweep_began:.2f} s; "
            f"{len(answered):,} of {still:,} waiting agents answered 'expired', the last "
            f"{last - sweep_began:.2f} s after the sweep began ({last - sweep_ended:.2f} s after "
            f"it ended); other answers {other}, unanswered {len(pending)}; waits re-issued "
            f"after their 60 s: {sum(a.reissued for a in answered):,}"
        )
        verdict(
            f"all {count:,} answered after a mass expiry",
            f"{len(answered):,} answered, last {last - sweep_began:.2f} s after the sweep began",
            f"all {still:,}",
            len(answered) == still and not pending,
        )
    for connection in connections:
        connection.close()
    await asyncio.gather(*tasks, return_exceptions=True)


def rss_parts(server: Server) -> str:
    sizes = [proc_status(pid).get("VmRSS", 0) / 1024 for pid in server.pids()]
    return "master " + " + worker ".join(f"{size:.0f}" for size in sizes)


async def settle(server: Server, count: int, limit: float = 60) -> bool:
    """Wait until the server holds every connection and its CPU goes quiet (waits taken in)."""
    give_up = time.monotonic() + limit
    last = server.cpu_seconds()
    while time.monotonic() < give_up:
        await asyncio.sleep(0.5)
        now = server.cpu_seconds()
        if server.open_files() >= count and now - last < 0.05:
            return True
        last = now
    return False


async def probes(args, fx: Fixtures, port: int, probe: Agent, ids: list[str], agents: list[Agent]):
    rng = random.Random(11)
    token_of = {bp_id: agent.token for agent in agents for bp_id in agent.ids}
    reviewer, agent = Connection(port), Connection(port)
    releases, gets, errors = [], [], {}
    body = json.dumps({"comment": "ok", "release": True}).encode()
    deadline = time.monotonic() + 120
    try:
        for bp_id in probe.ids:
            if time.monotonic() > deadline:
                raise TimeoutError
            request = build_request(
                "POST",
                f"/api/breakpoints/{bp_id}/feedback",
                port=port,
                token=fx.reviewer_token,
                body=body,
            )
            began = time.perf_counter()
            response = await asyncio.wait_for(reviewer.request(request), timeout=10)
            releases.append(time.perf_counter() - began)
            if response.status != 201:
                errors[f"release {response.status}"] = (
                    errors.get(f"release {response.status}", 0) + 1
                )
        for _ in range(args.probes):
            if time.monotonic() > deadline:
                raise TimeoutError
            bp_id = rng.choice(ids)
            request = build_request(
                "GET", f"/api/breakpoints/{bp_id}/status", port=port, token=token_of[bp_id]
            )
            began = time.perf_counter()
            response = await asyncio.wait_for(agent.request(request), timeout=10)
            gets.append(time.perf_counter() - began)
            if response.status != 200:
                errors[f"GET {response.status}"] = errors.get(f"GET {response.status}", 0) + 1
    except (OSError, TimeoutError, asyncio.IncompleteReadError) as error:
        errors[type(error).__name__] = errors.get(type(error).__name__, 0) + 1
    finally:
        reviewer.close()
        agent.close()
    return releases, gets, errors


async def mass_expire(ids: list[str], prefix: str) -> tuple[float, float, int] | None:
    """Move our breakpoints' expiresAt to SWEEP_CUTOFF, then run the TTL sweep up to it.

    The sweep runs in a process of its own (as beat's worker would), so this client's
    reading of the answers does not share an interpreter lock with it.
    """
    cutoff = SWEEP_CUTOFF + timedelta(seconds=1)
    if not await asyncio.to_thread(expiry_move, ids, prefix, cutoff):
        return None
    loop = asyncio.get_running_loop()
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
        sweep = loop.run_in_executor(pool, sweep_process, cutoff.isoformat(), time.time() + 5)
        return await asyncio.wait_for(sweep, timeout=600)


def expiry_move(ids: list[str], prefix: str, cutoff: datetime) -> bool:
    """Set our waiting breakpoints' expiresAt to SWEEP_CUTOFF (no wake-up: nothing changed
    for a waiter yet); False if anybody else's row would be due by `cutoff`."""
    from django.db import connection

    from breakpoints.models import Breakpoint

    try:
        due = Breakpoint.objects.filter(status="waiting", expires_at__lte=cutoff)
        if due.exclude(agent_id__startswith=prefix).exists():
            return False
        for start in range(0, len(ids), 5000):
            Breakpoint.objects.filter(pk__in=ids[start : start + 5000], status="waiting").update(
                expires_at=SWEEP_CUTOFF
            )
        return True
    finally:
        connection.close()


def sweep_process(cutoff: str, start_at: float) -> tuple[float, float, int]:
    """In a spawned process: the real TTL sweep, up to `cutoff`. Monotonic start/end."""
    bootstrap()
    from django.db import connections

    from breakpoints.services import breakpoints_expire_due

    time.sleep(max(0.0, start_at - time.time()))
    began = time.monotonic()
    expired = breakpoints_expire_due(now=datetime.fromisoformat(cutoff))
    ended = time.monotonic()
    connections.close_all()
    return began, ended, expired


# --- driver --------------------------------------------------------------------------


@contextlib.contextmanager
def started(
    spec: ServerSpec, args, watch: ConnectionWatch | None, *, cwd: Path = ROOT, env=None
) -> Iterator[Server]:
    """A server for one part of the run, always stopped; watched for database connections
    (None: the caller watches it, with others: ConnectionWatch.watch_all)."""
    spec.cwd = cwd
    spec.env = {**(env or {}), **project_env(args)} if cwd == ROOT else dict(env or {})
    spec.access_log = args.access_log
    peak = None
    with Server(spec) as server:
        if watch is not None:
            watch.watch(server)
        print(
            f"  [{spec.label}] {spec.describe()} on 127.0.0.1:{server.port}, pids {server.pids()}",
            flush=True,
        )
        try:
            yield server
        finally:
            if watch is not None:
                peak = watch.peak
                watch.watch(None)
    peaks = f"; peak database connections {peak}" if peak is not None else ""
    print(f"  [{spec.label}] stopped{peaks}", flush=True)


def project_env(args) -> dict[str, str]:
    return {"DATABASE_POOL_MAX": str(args.pool_max)}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only", default=",".join(SECTIONS), help="comma-separated: " + ", ".join(SECTIONS)
    )
    parser.add_argument("--seconds", type=float, default=10, help="measured window per load run")
    parser.add_argument("--warmup", type=float, default=2, help="unmeasured seconds before each")
    parser.add_argument("--connections", type=int, default=32, help="closed-loop concurrency")
    parser.add_argument(
        "--client-procs", default="1,2", help="client processes to try for saturation (best wins)"
    )
    parser.add_argument("--workers", type=int, default=2, help="ASGI workers (floor and project)")
    parser.add_argument("--sync-workers", type=int, default=5, help="floor under sync workers")
    parser.add_argument(
        "--wsgi-workers", type=int, default=2, help="gthread workers (old Procfile)"
    )
    parser.add_argument(
        "--wsgi-threads", type=int, default=4, help="gthread threads (old Procfile)"
    )
    parser.add_argument("--pool-max", type=int, default=8, help="database pool per process")
    parser.add_argument(
        "--poll-rows", type=int, default=1000, help="breakpoints the polls spread over"
    )
    parser.add_argument(
        "--write-rows",
        type=int,
        default=8000,
        help="waiting breakpoints made for each release run (each is released once)",
    )
    parser.add_argument(
        "--write-rounds",
        type=int,
        default=3,
        help="the write runs interleaved: each server measured this many times, in turn",
    )
    parser.add_argument(
        "--list-seconds", type=float, default=3, help="measured window per list filter run"
    )
    parser.add_argument("--wakes", type=int, default=200, help="wakes per waiter count")
    parser.add_argument(
        "--waiters", type=int, default=1000, help="concurrent waiters for the 2nd wake run"
    )
    parser.add_argument("--capacity", type=int, default=10_000, help="long-polls held at once")
    parser.add_argument(
        "--capacity-timeout", type=float, default=300, help="bound of the capacity run"
    )
    parser.add_argument("--probes", type=int, default=100, help="releases and GETs timed meanwhile")
    parser.add_argument(
        "--no-access-log",
        dest="access_log",
        action="store_false",
        help="servers without gunicorn's access log (the Procfile has one; here to /dev/null)",
    )
    parser.add_argument(
        "--max-db-connections", type=int, default=40, help="stop a server beyond (ours only)"
    )
    parser.add_argument("--force", action="store_true", help="allow a database without 'bench'")
    args = parser.parse_args()
    args.sections = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = set(args.sections) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections: {', '.join(sorted(unknown))}")
    args.client_procs = sorted({max(1, int(p)) for p in args.client_procs.split(",")})
    args.seconds = max(1.0, min(args.seconds, 120.0))
    args.warmup = max(0.0, min(args.warmup, 30.0))
    args.connections = max(1, min(args.connections, 1024))
    args.list_seconds = max(0.5, min(args.list_seconds, 60.0))
    args.wakes = max(1, min(args.wakes, 5000))
    args.waiters = max(2, min(args.waiters, 20_000))
    args.capacity = max(1, min(args.capacity, 20_000))
    args.probes = max(1, min(args.probes, 1000))
    return args


def main() -> None:
    args = parse_args()
    # A plain SIGTERM (e.g. from `timeout`) must still stop the servers and delete the rows.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    # Our connections (this process, its servers, the sweep) carry this name: counted apart.
    application = os.environ["PGAPPNAME"] = f"bench-http-{os.getpid()}"
    limit = raise_open_files(args.capacity + args.waiters + 4096)
    bootstrap()
    guard_database(args.force)

    from django.conf import settings
    from django.db import connection

    if connection.vendor != "postgresql":
        sys.exit("The HTTP benchmarks run on PostgreSQL (DATABASE_URL=postgres://...).")
    if limit < args.capacity + 1000:
        print(f"warning: open-file limit {limit} is low for {args.capacity:,} waiters")
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    import config.asgi

    print(
        f"database: {database_label()}  cores: {os.cpu_count()}  load avg: "
        f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}  open-file limit: {limit}\n"
        f"code: {head} + working tree; config.asgi.application is "
        f"{type(config.asgi.application).__module__}.{type(config.asgi.application).__name__}; "
        f"REDIS_URL {'set' if settings.REDIS_URL else 'unset'}; pool per server process "
        f"{args.pool_max}; access log {'on' if args.access_log else 'off'}"
    )
    dsn = os.environ["DATABASE_URL"]
    fx = Fixtures()
    loader = None
    incomplete = []
    started_at = time.monotonic()
    try:
        fx.setup_reviewer()
        with ConnectionWatch(dsn, application, args.max_db_connections) as watch:
            if {"floor", "lists", "writes", "drf"} & set(args.sections):
                loader = Loader(max(args.client_procs))
            parts = {
                "floor": lambda: section_floor(args, fx, loader, watch),
                "lists": lambda: section_lists(args, fx, loader, watch),
                "writes": lambda: section_writes(args, fx, loader, watch),
                "drf": lambda: section_drf(args, fx, loader, watch),
                "wake": lambda: section_wake(args, fx, watch),
                "capacity": lambda: section_capacity(args, fx, watch),
            }
            for name in SECTIONS:
                if name not in args.sections:
                    continue
                try:
                    parts[name]()
                except Exception as error:  # the other parts still run; cleanup still happens
                    traceback.print_exc()
                    incomplete.append(name)
                    verdict(
                        f"{name}: did not complete", f"{type(error).__name__}: {error}", "-", False
                    )
            if watch.tripped:
                print(f"!! {watch.tripped}")
    finally:
        if loader is not None:
            loader.close()
        connection.close()
        fx.delete()
    print(f"\n=== targets ({time.monotonic() - started_at:.0f} s) ===")
    print_table(("", "figure", "value", "target"), VERDICTS)
    if incomplete:  # figures are not asserted on, but a part that broke fails the run
        sys.exit(f"did not complete: {', '.join(incomplete)}")


if __name__ == "__main__":
    main()
