"""A bounded load test of the status poll over real HTTP, on loopback only.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bpm_bench python benchmarks/load_poll.py
    python benchmarks/load_poll.py --clients 16 --seconds 20

Starts gunicorn (`config.wsgi`, gthread workers, as the Procfile's web process) on
127.0.0.1 and a free port, then N client threads (httpx, one keep-alive connection
each) poll random breakpoints of one agent for T seconds or until the request cap,
whichever comes first. Prints requests/s and latency percentiles, then stops the server
it started. The clients share the machine's cores with the server: on a small machine
the figures are a floor, not the server's capacity. Run benchmarks/seed.py first.
"""

import argparse
import os
import random
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter

from _common import (
    POLL_AGENT,
    ROOT,
    TOKEN_NAME,
    bootstrap,
    database_label,
    guard_database,
    peak_rss_mib,
    print_table,
    summary_ms,
)

MAX_SECONDS = 120
MAX_REQUESTS = 500_000
MAX_CLIENTS = 64


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--clients", type=int, default=8, help=f"concurrent clients (<= {MAX_CLIENTS})"
    )
    parser.add_argument("--seconds", type=float, default=10, help=f"duration (<= {MAX_SECONDS})")
    parser.add_argument("--max-requests", type=int, default=50_000, help="request cap")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers")
    parser.add_argument("--threads", type=int, default=4, help="gunicorn threads per worker")
    parser.add_argument("--force", action="store_true", help="allow a database without 'bench'")
    args = parser.parse_args()
    clients = max(1, min(args.clients, MAX_CLIENTS))
    seconds = max(1.0, min(args.seconds, MAX_SECONDS))
    cap = max(1, min(args.max_requests, MAX_REQUESTS))

    bootstrap()
    guard_database(args.force)

    import httpx

    from accounts.models import ApiToken
    from accounts.tokens import token_create_for_agent
    from breakpoints.models import Breakpoint

    ids = list(Breakpoint.objects.filter(agent_id=POLL_AGENT).values_list("pk", flat=True))
    if not ids:
        raise SystemExit("No benchmark rows: run benchmarks/seed.py first.")
    _, raw = token_create_for_agent(agent_id=POLL_AGENT, name=TOKEN_NAME)
    port = _free_port()
    server = _server_start(port, args.workers, args.threads)
    try:
        base = f"http://127.0.0.1:{port}"
        _wait_until_up(base, server)
        print(
            f"database: {database_label()}  server: gunicorn {args.workers} workers x "
            f"{args.threads} threads on 127.0.0.1:{port}  clients: {clients}  "
            f"bound: {seconds:g}s or {cap:,} requests  load avg: {_loadavg()}"
        )
        headers = {"Authorization": f"Bearer {raw}"}
        latencies: list[list[float]] = [[] for _ in range(clients)]
        codes: list[Counter] = [Counter() for _ in range(clients)]
        issued = [0]
        lock = threading.Lock()
        start = threading.Barrier(clients + 1)
        deadline = [0.0]

        def client(n: int) -> None:
            rng = random.Random(n)
            with httpx.Client(base_url=base, headers=headers, timeout=10) as http:
                try:  # connect and warm up; a failure shows in the counts below
                    http.get(f"/api/breakpoints/{rng.choice(ids)}/status")
                except httpx.HTTPError:
                    pass
                start.wait()
                while time.perf_counter() < deadline[0]:
                    with lock:
                        if issued[0] >= cap:
                            return
                        issued[0] += 1
                    began = time.perf_counter()
                    try:
                        status = http.get(f"/api/breakpoints/{rng.choice(ids)}/status").status_code
                    except httpx.HTTPError as error:
                        status = type(error).__name__
                    latencies[n].append(time.perf_counter() - began)
                    codes[n][status] += 1

        threads = [threading.Thread(target=client, args=(n,), daemon=True) for n in range(clients)]
        for thread in threads:
            thread.start()
        deadline[0] = time.perf_counter() + 3600  # set for real once every client is ready
        start.wait(timeout=30)
        began = time.perf_counter()
        deadline[0] = began + seconds
        for thread in threads:
            thread.join(timeout=seconds + 30)
        elapsed = time.perf_counter() - began
    finally:
        _server_stop(server)
        ApiToken.objects.filter(name=TOKEN_NAME).delete()

    every = [s for per_client in latencies for s in per_client]
    status_counts = sum(codes, Counter())
    figures = summary_ms(every)
    print()
    print_table(
        ("requests", "seconds", "req/s", "p50 ms", "p95 ms", "p99 ms", "max ms", "responses"),
        [
            (
                f"{len(every):,}",
                elapsed,
                f"{len(every) / elapsed:,.0f}",
                figures["p50"],
                figures["p95"],
                figures["p99"],
                figures["max"],
                ", ".join(
                    f"{code}: {count:,}" for code, count in sorted(status_counts.items(), key=str)
                ),
            )
        ],
    )
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(
        f"\nclient process: {usage.ru_utime + usage.ru_stime:.1f} s CPU "
        f"(the clients' share of {os.cpu_count()} cores), peak RSS {peak_rss_mib():.0f} MiB"
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _server_start(port: int, workers: int, threads: int) -> subprocess.Popen:
    env = {
        **os.environ,
        "ALLOWED_HOSTS": "127.0.0.1",
        "PYTHONWARNINGS": "ignore:No directory at:UserWarning",  # no collectstatic needed
    }
    command = [
        sys.executable,
        "-m",
        "gunicorn",
        "config.wsgi:application",
        "--bind",
        f"127.0.0.1:{port}",
        "--workers",
        str(workers),
        "--threads",
        str(threads),
        "--access-logfile",
        "-",  # as in the Procfile; the lines go to /dev/null
        "--log-level",
        "warning",
    ]
    # Its own session, so stopping it reaches its workers and nothing else.
    return subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, start_new_session=True
    )


def _wait_until_up(base: str, server: subprocess.Popen) -> None:
    import httpx

    give_up = time.monotonic() + 30
    while time.monotonic() < give_up:
        if server.poll() is not None:
            raise SystemExit(f"gunicorn exited with {server.returncode}")
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit("gunicorn did not answer /healthz within 30 s")


def _server_stop(server: subprocess.Popen) -> None:
    if server.poll() is not None:
        return
    os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()


def _loadavg() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


if __name__ == "__main__":
    main()
