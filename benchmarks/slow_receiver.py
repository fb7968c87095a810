"""How long one subscriber's webhooks wait while another subscriber answers slowly.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bpm_bench \\
        python benchmarks/slow_receiver.py --count 30 --delay 1.5

Two receivers on 127.0.0.1 (tests/support/webhook_receiver.py): A holds every answer --delay
seconds, B answers at once. Both subscribe to `created`; --count breakpoints are created
in this process, and a real Celery worker (the production default pool unless
--worker-concurrency) delivers through a redis-server of its own. The script prints each
subscriber's lag (arrival at the receiver minus the create's commit), p50 and max, beside
A's delay and the time A's deliveries take one after another: before the per-target cap
B's deliveries queued behind A's (p50 84 s with a 1.5 s receiver).

No beat runs (its TTL sweep would touch the seeded rows): nothing fails here, so the
outbox sweep has nothing to do. DATABASE_URL must name a database containing "bench"
(created when missing, migrated); the script deletes its breakpoints and subscriptions at the end.
"""

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis
from _common import (
    AGENT_PREFIX,
    ROOT,
    bootstrap,
    database_ensure,
    database_label,
    guard_database,
    percentile,
    print_table,
)

AGENT_ID = f"{AGENT_PREFIX}slow-receiver"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(predicate, what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            sys.exit(f"Timed out after {timeout:.0f} s waiting for {what}.")
        time.sleep(0.1)


def redis_answers(url: str) -> bool:
    client = redis.Redis.from_url(url, socket_connect_timeout=0.5)
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False
    finally:
        client.close()


def start(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen:
    with open(log, "ab") as out:
        return subprocess.Popen(
            args, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def stop(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, 15)
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, 9)
        process.wait(timeout=10)
    except ProcessLookupError:
        pass


def worker_args(concurrency: int | None) -> list[str]:
    celery = Path(sys.executable).parent / "celery"
    args = [str(celery), "-A", "config", "worker", "--loglevel", "INFO"]
    args += ["--without-mingle", "--without-gossip", "--without-heartbeat"]
    return args + (["--concurrency", str(concurrency)] if concurrency else [])


def lags(created_at: dict[str, float], received) -> list[float]:
    return [r.received_at - created_at[r.json()["data"]["breakpointId"]] for r in received]


def measure(count: int, delay: float) -> tuple[list[float], list[float]]:
    """Create `count` breakpoints; the lags of A's and B's `created` deliveries."""
    from breakpoints.services import breakpoint_create
    from core.actors import Actor
    from notifications import services as webhooks
    from tests.support.webhook_receiver import WebhookReceiver

    with WebhookReceiver(hold_first=10**9, hold_seconds=delay) as slow, WebhookReceiver() as fast:
        subscriptions = [
            webhooks.webhook_add(url=receiver.url, event_types=["created"])
            for receiver in (slow, fast)
        ]
        try:
            created_at = {}
            for number in range(count):
                bp, _ = breakpoint_create(
                    actor=Actor.for_agent(AGENT_ID), payload={"question": f"Step {number}?"}
                )
                created_at[bp.pk] = time.monotonic()
            timeout = count * delay + 120
            fast.wait_for(lambda got: len(got) >= count, timeout, "B's deliveries")
            slow.wait_for(lambda got: len(got) >= count, timeout, "A's deliveries")
            return lags(created_at, slow.received), lags(created_at, fast.received)
        finally:
            for webhook in subscriptions:
                webhook.delete()


def figures(values: list[float]) -> tuple[str, str]:
    return f"{percentile(values, 50):.2f}", f"{max(values):.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=30, help="breakpoints created")
    parser.add_argument("--delay", type=float, default=1.5, help="A's answer time, seconds")
    parser.add_argument("--worker-concurrency", type=int, help="default: the settings'")
    parser.add_argument("--force", action="store_true", help="allow a database without 'bench'")
    args = parser.parse_args()
    if shutil.which("redis-server") is None:
        sys.exit("This benchmark starts a redis-server of its own: none is on PATH.")

    workdir = Path(tempfile.mkdtemp(prefix="bpm-slow-receiver-"))
    redis_url = f"redis://127.0.0.1:{free_port()}/0"
    os.environ.update(REDIS_URL=redis_url, BPM_WEBHOOK_ALLOWED_HOSTS="127.0.0.1")
    bootstrap()
    guard_database(args.force)
    database_ensure()
    from django.core.management import call_command
    from django.db import connections

    from breakpoints.models import Breakpoint

    call_command("migrate", verbosity=0)  # after the guard, as seed.py does
    env = dict(os.environ)
    port = redis_url.rsplit(":", 1)[1].split("/")[0]
    broker = start(
        ["redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        workdir / "redis.log",
        env,
    )
    worker = None
    try:
        wait_until(lambda: redis_answers(redis_url), "redis-server", 30)
        worker = start(worker_args(args.worker_concurrency), workdir / "worker.log", env)
        wait_until(lambda: b" ready." in (workdir / "worker.log").read_bytes(), "the worker", 60)
        slow_lags, fast_lags = measure(args.count, args.delay)
    finally:
        for process in (worker, broker):
            if process is not None:
                stop(process)
        Breakpoint.objects.filter(agent_id=AGENT_ID).delete()
        connections.close_all()
    print(f"database {database_label()}; {args.count} breakpoints; worker log {workdir}")
    print_table(
        ("subscriber", "answers in s", "lag p50 s", "lag max s", "one after another s"),
        [
            (
                "A (slow)",
                f"{args.delay:.2f}",
                *figures(slow_lags),
                f"{args.count * args.delay:.1f}",
            ),
            ("B (fast)", "0.00", *figures(fast_lags), ""),
        ],
    )


if __name__ == "__main__":
    main()
