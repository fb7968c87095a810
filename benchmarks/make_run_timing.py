"""How long `make run` takes until the system is healthy (/readyz answers 200), cold and warm.

    .venv/bin/python benchmarks/make_run_timing.py [--user-caches] [--keep]

Clones this repository (its committed HEAD, or --ref) into a temporary folder and runs
`make run` there as a developer would on a fresh machine: no DATABASE_URL or REDIS_URL
(SQLite, the embedded broker), a free BPM_PORT. Cold: no .venv yet, and empty uv and pip
caches (unless --user-caches: the caches of this user, as on a second checkout). Warm:
`make run` again in the same folder, nothing changed (--warm-runs times, 3: the median
counts). Each run is timed from `make run` until /readyz answers 200, then stopped as
Ctrl-C stops it. The script prints each figure beside its target (cold 45 s, warm 15 s)
and where the time went: install (the virtualenv), migrate (the BPM_PORT check, the
database, the migrations), start (until /readyz answers); then removes the folder (unless
--keep). Other work on the machine slows every figure: the load average is printed too,
and the CPU seconds each run took (all its processes), which other work hardly changes.
"""

import argparse
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# A line of make's output that marks the start of a phase (the first line that contains it):
# devtools/migrate.py's first line, then the supervisor's first process started.
PHASE_MARKERS = (("migrate", "database: migrating"), ("start", " started (pid="))
# Variables of this shell that a developer's fresh one would not have.
NOT_A_DEVELOPERS = ("BPM_", "DJANGO_", "CELERY_", "UV_", "VIRTUAL_ENV")
NOT_A_DEVELOPERS_NAMES = {"DATABASE_URL", "REDIS_URL", "SECRET_KEY", "PYTHONPATH", "DEBUG"}


@dataclass
class Timing:
    total: float
    cpu: float  # user + system seconds of every process of the run, until it stopped
    phases: dict[str, float] = field(default_factory=dict)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def developer_env(folder: Path, port: int, user_caches: bool) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(NOT_A_DEVELOPERS) and key not in NOT_A_DEVELOPERS_NAMES
    }
    env["BPM_PORT"] = str(port)
    if not user_caches:
        env["UV_CACHE_DIR"] = str(folder / "uv-cache")
        env["PIP_CACHE_DIR"] = str(folder / "pip-cache")
    return env


def ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def phases_seen(log: Path, seen: dict[str, float], started: float) -> None:
    text = log.read_text(errors="replace")
    for phase, marker in PHASE_MARKERS:
        if phase not in seen and marker in text:
            seen[phase] = time.monotonic() - started


def stop(make: subprocess.Popen) -> None:
    """Ctrl-C: SIGINT to make's process group (make and the supervisor)."""
    if make.poll() is None:
        os.killpg(make.pid, signal.SIGINT)
    try:
        make.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(make.pid, signal.SIGKILL)
        make.wait(timeout=10)


def timed_make_run(app: Path, env: dict[str, str], port: int, log: Path, timeout: float):
    """Seconds from `make run` until /readyz answers 200, when each phase began, and the
    CPU seconds it took (until it stopped: a little more than until healthy)."""
    seen: dict[str, float] = {}
    cpu_before = children_cpu()
    with log.open("w") as out:
        started = time.monotonic()
        make = subprocess.Popen(
            ["make", "--no-print-directory", "run"],
            cwd=app,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            while not ready(port):
                phases_seen(log, seen, started)
                if make.poll() is not None or time.monotonic() - started > timeout:
                    tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
                    sys.exit(f"make run was not healthy (rc={make.poll()}):\n{tail}")
                time.sleep(0.1)
            total = time.monotonic() - started
            phases_seen(log, seen, started)
        finally:
            stop(make)
    return total, seen, children_cpu() - cpu_before


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def breakdown(total: float, seen: dict[str, float]) -> dict[str, float]:
    """Seconds per phase: install (until migrate began), migrate, start (until healthy)."""
    marks = [("install", 0.0), *((name, seen[name]) for name, _ in PHASE_MARKERS if name in seen)]
    ends = [at for _, at in marks[1:]] + [total]
    return {name: end - at for (name, at), end in zip(marks, ends, strict=True)}


def report(label: str, timing: Timing, target: float) -> None:
    verdict = "PASS" if timing.total < target else "FAIL"
    parts = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in timing.phases.items())
    parts += f"; CPU {timing.cpu:.1f} s"
    print(f"{label:<32} {timing.total:6.1f} s   target < {target:.0f} s   {verdict}   ({parts})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--user-caches", action="store_true", help="keep uv's and pip's caches")
    parser.add_argument("--keep", action="store_true", help="leave the clone in place")
    parser.add_argument("--ref", default="HEAD", help="the commit to time (to compare)")
    parser.add_argument("--cold-target", type=float, default=45.0)
    parser.add_argument("--warm-target", type=float, default=15.0)
    parser.add_argument("--warm-runs", type=int, default=3, help="warm runs (the median counts)")
    parser.add_argument("--timeout", type=float, default=600.0, help="per run, seconds")
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="bpm-make-run-"))
    app = folder / "app"
    try:
        subprocess.run(["git", "clone", "--quiet", str(ROOT), str(app)], check=True)
        subprocess.run(["git", "-C", str(app), "checkout", "--quiet", args.ref], check=True)
        port = free_port()
        env = developer_env(folder, port, args.user_caches)
        load = os.getloadavg()[0]
        runs = ["cold", *(f"warm-{number}" for number in range(1, args.warm_runs + 1))]
        timings = []
        for run in runs:
            total, seen, cpu = timed_make_run(app, env, port, folder / f"{run}.log", args.timeout)
            timings.append(Timing(total, cpu, breakdown(total, seen)))
    finally:
        if args.keep:
            print(f"kept {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)
    caches = "this user's uv and pip caches" if args.user_caches else "empty uv and pip caches"
    print(f"make run until /readyz answers 200 (clone of {ROOT.name} {args.ref}, port {port})")
    cold, *warm = timings
    print(f"cold: no .venv, {caches}; warm: make run again, nothing changed")
    report("cold", cold, args.cold_target)
    if warm:
        median = sorted(warm, key=lambda timing: timing.total)[(len(warm) - 1) // 2]
        each = ", ".join(f"{timing.total:.1f}" for timing in warm)
        report(f"warm (median of {each} s)", median, args.warm_target)
    print(f"load average (1 min) at the start: {load:.2f} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
