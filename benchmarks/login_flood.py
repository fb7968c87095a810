"""An authenticated API list from one address while another floods the console's sign-in.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bpm_bench REDIS_URL=redis://127.0.0.1:6379/0 \\
        python benchmarks/login_flood.py --seconds 20
    python benchmarks/login_flood.py --unguarded ...   # also the same flood with both limits off

Why it exists: with neither limit (--unguarded), 16 parallel POST /admin/login/ with random
usernames (a new one each time, so the per-username lockout never trips; each costs a
password hash of ~1-2 s) took every web thread, and a reviewer's GET /api/breakpoints from
another address waited 12.5-17.1 s.

The project is served as the Procfile serves it (gunicorn, --workers uvicorn workers of
BPM_WEB_THREADS threads, counters in Redis) with the production password hasher (PBKDF2, the
settings' default; the test suite's fast one plays no part here). First the floor: the list
alone, for --floor-seconds. Then --clients attackers on 127.0.0.1 (a spawned process; each
posts the next sign-in as soon as the last is answered, whatever it said, on a new
connection each time as a simple script would, for --seconds) while this process, bound
to 127.0.0.2 (another loopback address), times the list every --interval seconds. Printed: p50/p99/max of both beside the
1 s p99 target, and what the attackers got (200: a password checked and refused; 429: the
address's attempts spent; 503: every password check of the process taken).

Every loop is bounded in time; the server is stopped at the end, even on error. The rows
it needs (http_bench's fixtures: a reviewer `bench-http-reviewer-<pid>` with a token, --rows
breakpoints of agents `bench-agent-http-<pid>-*`) are created here and deleted at the end,
with the attackers' failed sign-ins (django-axes' records from 127.0.0.1 during the run).
The database's name must contain "bench" (or --force); it is migrated when needed.
"""

import argparse
import asyncio
import os
import random
import re
import shutil
import signal
import string
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from urllib.parse import urlencode

import httpx
from _common import ROOT, bootstrap, database_ensure, database_label, guard_database, percentile
from http_bench import Fixtures, verdict
from http_client import Connection
from http_servers import CpuMeter, Server, ServerSpec

UVICORN = "web.webserver.BalancedUvicornWorker"
TARGET_P99_SECONDS = 1.0
MEASURER_ADDRESS = "127.0.0.2"  # loopback, another address than the attackers' 127.0.0.1
LIST_PATH = "/api/breakpoints"


# --- the attackers (a spawned process: no Django) ----------------------------------------


def sign_in_form(port: int) -> tuple[str, str]:
    """The CSRF cookie and form token every attacker sends (one GET, as a browser would)."""
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
        page = client.get("/admin/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        if page.status_code != 200 or token is None or "csrftoken" not in client.cookies:
            raise RuntimeError(f"no sign-in form: {page.status_code} {page.text[:200]!r}")
        return client.cookies["csrftoken"], token.group(1)


def sign_in_request(port: int, cookie: str, token: str, rng: random.Random) -> bytes:
    """POST /admin/login/ with a username never sent before and a wrong password."""
    username = "".join(rng.choices(string.ascii_lowercase, k=12))
    body = urlencode(
        {"username": username, "password": "not-the-password", "csrfmiddlewaretoken": token}
    ).encode()
    head = (
        f"POST /admin/login/?next=/admin/ HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        "Connection: close\r\n"
        f"Cookie: csrftoken={cookie}\r\nReferer: http://127.0.0.1:{port}/admin/login/\r\n"
        "Content-Type: application/x-www-form-urlencoded\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode("latin-1") + body


async def _attacker(port: int, cookie: str, token: str, until: float, seed: int) -> Counter:
    rng = random.Random(f"{os.getpid()}-{time.time_ns()}-{seed}")  # new usernames every run
    connection = Connection(port)
    statuses: Counter = Counter()
    try:
        while time.monotonic() < until:
            try:
                answer = await asyncio.wait_for(
                    connection.request(sign_in_request(port, cookie, token, rng)),
                    timeout=max(0.1, until - time.monotonic() + 30),
                )
                statuses[answer.status] += 1
            except (OSError, asyncio.IncompleteReadError, TimeoutError) as error:
                statuses[type(error).__name__] += 1
                connection.close()
    finally:
        connection.close()
    return statuses


def flood(port: int, clients: int, seconds: float) -> tuple[dict, float]:
    """`clients` attackers for `seconds`: what they were answered, and the time it took."""
    cookie, token = sign_in_form(port)
    started = time.monotonic()
    until = started + seconds

    async def everyone() -> list[Counter]:
        return await asyncio.gather(
            *(_attacker(port, cookie, token, until, seed) for seed in range(clients))
        )

    total: Counter = Counter()
    for statuses in asyncio.run(everyone()):
        total.update(statuses)
    return dict(total), time.monotonic() - started


# --- the measurer ------------------------------------------------------------------------


def measure(client: httpx.Client, seconds: float, interval: float) -> tuple[list[float], Counter]:
    """The list, timed, every `interval` seconds for `seconds` (the next one is sent when the
    last is answered if that took longer)."""
    latencies: list[float] = []
    statuses: Counter = Counter()
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        started = time.perf_counter()
        try:
            statuses[client.get(LIST_PATH).status_code] += 1
        except httpx.TransportError as error:
            statuses[type(error).__name__] += 1
        latencies.append(time.perf_counter() - started)
        time.sleep(max(0.0, interval - (time.perf_counter() - started)))
    return latencies, statuses


def figures(latencies: list[float]) -> str:
    p50, p99 = percentile(latencies, 50), percentile(latencies, 99)
    return f"p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms, max {max(latencies) * 1000:.0f} ms"


def counts(statuses: Counter | dict) -> str:
    return ", ".join(f"{code}: {n:,}" for code, n in sorted(statuses.items(), key=str)) or "-"


# --- the runs ----------------------------------------------------------------------------


def attacker_counters_reset() -> None:
    """The attackers' address starts with its whole budget (a run a minute ago spent it)."""
    from django.core.cache import cache

    window = int(time.time()) // 60
    cache.delete_many([f"bpm:signin:127.0.0.1:{w}" for w in range(window - 2, window + 2)])


def collect_static(root: str) -> None:
    """collectstatic into `root`, as the release step does: the sign-in page needs its
    manifest with DEBUG off."""
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"],
        cwd=ROOT,
        env={**os.environ, "STATIC_ROOT": root},
        check=True,
        timeout=300,
    )


def server_spec(args, label: str, guarded: bool) -> ServerSpec:
    env = {
        "STATIC_ROOT": args.static_root,
        # Plain HTTP on loopback: the CSRF cookie must travel without TLS.
        "SESSION_COOKIE_SECURE": "0",
        "CSRF_COOKIE_SECURE": "0",
        "DATABASE_POOL_MAX": str(args.pool_max),
        "BPM_WEB_THREADS": str(args.threads),
    }
    if not guarded:  # the sign-in as it was before its limits: neither of them
        env |= {"BPM_LOGIN_ATTEMPT_RATE": "off", "BPM_LOGIN_CONCURRENCY": "100000"}
    return ServerSpec(label, "config.asgi:application", UVICORN, args.workers, env=env)


def run_case(args, label: str, guarded: bool, token: str, attackers: ProcessPoolExecutor) -> None:
    attacker_counters_reset()
    with Server(server_spec(args, label, guarded)) as server:
        transport = httpx.HTTPTransport(local_address=MEASURER_ADDRESS)
        with httpx.Client(
            base_url=f"http://127.0.0.1:{server.port}",
            headers={"Authorization": f"Bearer {token}"},
            transport=transport,
            timeout=120,
        ) as client:
            measure(client, 1.0, args.interval)  # warm up: connections, caches
            if args.floor_seconds > 0:
                floor, statuses = measure(client, args.floor_seconds, args.interval)
                print(
                    f"  floor (no flood): {figures(floor)}; {len(floor)} lists ({counts(statuses)})"
                )
            meter = CpuMeter(server)
            meter.start()
            attack = attackers.submit(flood, server.port, args.clients, args.seconds)
            time.sleep(args.ramp)
            during, statuses = measure(
                client, max(1.0, args.seconds - 2 * args.ramp), args.interval
            )
            answered, took = attack.result(timeout=args.seconds + 120)
            meter.stop()
        server.check()
    total = sum(n for code, n in answered.items() if isinstance(code, int))
    print(f"  during the flood: {figures(during)}; {len(during)} lists ({counts(statuses)})")
    print(
        f"  attackers: {total:,} sign-ins in {took:.1f} s ({total / took:,.0f}/s): "
        f"{counts(answered)}; server {meter.server_cores():.2f} cores, machine "
        f"{meter.machine_pct():.0f} % busy"
    )
    p99 = percentile(during, 99)
    verdict(
        f"{label}: list p99 with {args.clients} flooding clients",
        f"{p99 * 1000:.0f} ms",
        f"< {TARGET_P99_SECONDS * 1000:.0f} ms",
        (p99 < TARGET_P99_SECONDS) if guarded else None,
    )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="the flood's length")
    parser.add_argument("--floor-seconds", type=float, default=10.0, help="0: no floor")
    parser.add_argument("--ramp", type=float, default=1.0, help="flood before timing starts")
    parser.add_argument("--interval", type=float, default=0.1, help="between two lists")
    parser.add_argument("--clients", type=int, default=16, help="flooding clients")
    parser.add_argument("--workers", type=int, default=2, help="uvicorn workers (Procfile)")
    parser.add_argument("--threads", type=int, default=8, help="BPM_WEB_THREADS per worker")
    parser.add_argument("--pool-max", type=int, default=8, help="database pool per process")
    parser.add_argument("--rows", type=int, default=200, help="breakpoints created to list")
    parser.add_argument("--unguarded", action="store_true", help="also both limits off")
    parser.add_argument("--force", action="store_true", help="allow a database without 'bench'")
    args = parser.parse_args()
    if not 0 < args.seconds <= 600 or not 0 <= args.floor_seconds <= 600:
        parser.error("--seconds and --floor-seconds are bounded (600 s)")
    return args


def main() -> None:
    args = parse_args()
    # A plain SIGTERM (e.g. from `timeout`) must still stop the server and delete the rows.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    bootstrap()
    guard_database(args.force)
    database_ensure()
    from axes.models import AccessAttempt
    from django.conf import settings
    from django.core.management import call_command
    from django.utils import timezone

    if not settings.REDIS_URL:
        sys.exit("The web processes share their counters through Redis: set REDIS_URL.")
    call_command("migrate", verbosity=0)
    print(
        f"database: {database_label()}  cores: {os.cpu_count()}  load avg: "
        f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}\n"
        f"{args.workers} uvicorn workers x {args.threads} threads; {args.clients} clients "
        f"flood POST /admin/login/ from 127.0.0.1 for {args.seconds:g} s; GET {LIST_PATH} "
        f"from {MEASURER_ADDRESS} every {args.interval:g} s; password hasher: the settings' "
        f"default ({settings.PASSWORD_HASHERS[0].rsplit('.', 1)[-1]})"
    )
    fx = Fixtures()
    started = timezone.now()
    attackers = ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn"))
    args.static_root = tempfile.mkdtemp(prefix="bpm-bench-static-")
    try:
        collect_static(args.static_root)
        fx.setup_reviewer()
        fx.agents_with_rows(args.rows)
        cases = [("guarded", True)] + ([("unguarded", False)] if args.unguarded else [])
        for label, guarded in cases:
            print(
                f"\n{label}: BPM_LOGIN_ATTEMPT_RATE and BPM_LOGIN_CONCURRENCY "
                f"{'as configured' if guarded else 'off'}",
                flush=True,
            )
            run_case(args, label, guarded, fx.reviewer_token, attackers)
    finally:
        attackers.shutdown(cancel_futures=True)
        fx.delete()
        # The attackers' failed sign-ins, as the lockout recorded them.
        AccessAttempt.objects.filter(ip_address="127.0.0.1", attempt_time__gte=started).delete()
        shutil.rmtree(args.static_root, ignore_errors=True)


if __name__ == "__main__":
    main()
