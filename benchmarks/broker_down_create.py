"""A create's time with the broker (Redis) up, and with it gone.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bpm_bench python benchmarks/broker_down_create.py

Why it exists: with Redis down a create took 2.1-2.4 s (0.1 s normally): the request published
its outbox rows itself, after its commit, and waited for the broker's connect timeout. Now
a thread of the web process publishes them (infra/publishing.py) and the request answers at
once. Both are measured in the same run: the server as the Procfile serves it, once as it
is and once with BPM_PUBLISH_INLINE=1 (the request publishes: the way it was). Each case
times --creates creates with Redis up (the floor), stops Redis, times as many again, and
starts it again. Printed: p50 and p99 of each beside the target (with Redis down, a
create's p50 within 2x its p50 with Redis up).

Redis is a redis-server this script starts on a free loopback port (the live tests'
RedisServer) (so nothing else
sees the outage); one webhook (to a closed loopback port: nothing is sent, no worker runs)
makes every create write an outbox row to publish. Its rows, tokens and the webhook are
deleted at the end. The database's name must contain "bench" (or --force).
"""

import argparse
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

import httpx
from _common import bootstrap, database_ensure, database_label, guard_database, percentile
from http_bench import Fixtures
from http_servers import Server, ServerSpec, free_port

UVICORN = "web.webserver.BalancedUvicornWorker"
TARGET_RATIO = 2.0


def timed_creates(client: httpx.Client, count: int) -> list[float]:
    seconds = []
    for number in range(count):
        started = time.perf_counter()
        response = client.post("/api/breakpoints", json={"payload": {"question": f"#{number}?"}})
        seconds.append(time.perf_counter() - started)
        response.raise_for_status()
    return seconds


def run_case(label: str, inline: bool, redis, token: str, count: int) -> None:
    env = {
        "REDIS_URL": redis.url,
        "BPM_WEBHOOK_ALLOWED_HOSTS": "127.0.0.1",
        "BPM_PUBLISH_INLINE": "1" if inline else "0",
    }
    with Server(ServerSpec(label, "config.asgi:application", UVICORN, 1, env=env)) as server:
        with httpx.Client(
            base_url=f"http://127.0.0.1:{server.port}",
            headers={"Authorization": f"Bearer {token}"},
            timeout=60,
        ) as client:
            timed_creates(client, 3)  # warm up: connections, the broker's
            up = timed_creates(client, count)
            redis.stop()
            try:
                down = timed_creates(client, count)
            finally:
                redis.start()
    up50, down50 = percentile(up, 50), percentile(down, 50)
    ratio = down50 / up50
    verdict = "PASS" if ratio <= TARGET_RATIO else "FAIL"
    print(
        f"{label:<34} Redis up: p50 {up50 * 1000:7.1f} ms  p99 {percentile(up, 99) * 1000:7.1f} ms"
        f" | down: p50 {down50 * 1000:7.1f} ms  p99 {percentile(down, 99) * 1000:7.1f} ms"
        f" | down/up p50 {ratio:5.2f} (target <= {TARGET_RATIO:g}) {verdict}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--creates", type=int, default=20, help="creates per phase (<= 500)")
    parser.add_argument("--force", action="store_true", help="any database name")
    args = parser.parse_args()
    if not 1 <= args.creates <= 500:
        parser.error("--creates is 1 to 500")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    bootstrap()
    guard_database(args.force)
    database_ensure()
    from django.core.management import call_command
    from django.test import override_settings

    from notifications.subscriptions import webhook_add
    from tests.support.system import RedisServer  # the live tests' own, stoppable

    call_command("migrate", verbosity=0)
    print(f"database: {database_label()}; {args.creates} creates per phase, one web worker")
    redis_dir = tempfile.mkdtemp(prefix="bpm-bench-redis-")
    fx, redis = Fixtures(), RedisServer(Path(redis_dir))
    with override_settings(BPM_WEBHOOK_ALLOWED_HOSTS=["127.0.0.1"]):
        webhook = webhook_add(url=f"http://127.0.0.1:{free_port()}/closed", event_types=["created"])
    try:
        redis.start()
        agent = fx.agent()
        run_case("publisher thread (now)", False, redis, agent.token, args.creates)
        run_case("in the request (before, INLINE=1)", True, redis, agent.token, args.creates)
    finally:
        if redis.process.alive:
            redis.stop()
        shutil.rmtree(redis_dir, ignore_errors=True)
        webhook.delete()  # its deliveries go with it
        fx.delete()


if __name__ == "__main__":
    main()
