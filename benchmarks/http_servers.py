"""Web servers for the HTTP benchmarks: gunicorn on loopback, watched through /proc, stopped.

A `Server` starts gunicorn in a session of its own on 127.0.0.1 and a free port, waits
for /healthz, and is stopped (SIGTERM to its process group, then SIGKILL) when its
`with` block ends, even on error. Its processes' RSS, threads, open files and CPU time
are read from /proc. `ConnectionWatch` samples the database's connection count in a
thread and stops the server if it ever exceeds a limit: the database is shared.
"""

import http.client
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE_KIB = os.sysconf("SC_PAGE_SIZE") // 1024

PROJECT_ROOT = Path(__file__).resolve().parent.parent


@dataclass
class ServerSpec:
    label: str
    app: str  # "config.asgi:application"
    worker_class: str  # "web.webserver.BalancedUvicornWorker", "gthread", "sync"
    workers: int
    threads: int = 1
    cwd: Path = Path(".")
    env: dict[str, str] = field(default_factory=dict)
    access_log: bool = False  # as the Procfile: "-" (to /dev/null here)

    def describe(self) -> str:
        kind = {"web.webserver.BalancedUvicornWorker": "uvicorn worker (ASGI)"}.get(
            self.worker_class, f"{self.worker_class} (WSGI)"
        )
        threads = f" x {self.threads} threads" if self.threads > 1 else ""
        return f"gunicorn {self.app} {self.workers} x {kind}{threads}"


# After every worker has loaded its application, before the first request is sent.
WORKER_STARTUP_SECONDS = 2.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    def __init__(self, spec: ServerSpec):
        self.spec = spec
        self.port = free_port()
        self.process: subprocess.Popen | None = None
        self.stopped = False
        self.log = tempfile.NamedTemporaryFile(
            prefix=f"bpm-bench-{spec.label}-", suffix=".log", delete=False
        )
        # A file per worker whose application is loaded (gunicorn_ready.conf.py).
        self.ready_dir = tempfile.TemporaryDirectory(prefix=f"bpm-bench-{spec.label}-ready-")

    def __enter__(self) -> "Server":
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self) -> None:
        spec = self.spec
        command = [
            sys.executable,
            "-m",
            "gunicorn",
            spec.app,
            "--bind",
            f"127.0.0.1:{self.port}",
            "--workers",
            str(spec.workers),
            "--worker-class",
            spec.worker_class,
            "--threads",
            str(spec.threads),
            "--log-level",
            "warning",
            "--graceful-timeout",
            "5",  # stopping with thousands of open waits must not take 30 s
            "--backlog",
            "4096",  # as the Procfile
            "--keep-alive",
            "75",  # as the Procfile
            "--config",
            str(Path(__file__).resolve().parent / "gunicorn_ready.conf.py"),
        ]
        if spec.access_log:
            command += ["--access-logfile", "-"]
        env = {
            **os.environ,
            "ALLOWED_HOSTS": "127.0.0.1",
            # The project's root, for its worker class (the floor runs from benchmarks/).
            "PYTHONPATH": os.pathsep.join(
                filter(None, [str(PROJECT_ROOT), os.environ.get("PYTHONPATH")])
            ),
            "PYTHONWARNINGS": "ignore:No directory at:UserWarning",  # no collectstatic needed
            "BPM_BENCH_READY_DIR": self.ready_dir.name,
            **spec.env,
        }
        # A session of its own: stopping it reaches its workers and nothing else.
        self.process = subprocess.Popen(
            command,
            cwd=spec.cwd,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=self.log,
            start_new_session=True,
        )
        self._wait_until_up()

    def _wait_until_up(self, timeout: float = 60) -> None:
        assert self.process is not None
        give_up = time.monotonic() + timeout
        while time.monotonic() < give_up:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"{self.spec.label}: gunicorn exited with {self.process.returncode}\n"
                    + self.log_tail()
                )
            if self.healthy() and self.workers_ready():
                # post_worker_init comes before the ASGI lifespan's startup (the waiting
                # path's listener), and a worker accepts only after it: let them finish.
                time.sleep(WORKER_STARTUP_SECONDS)
                return
            time.sleep(0.2)
        raise RuntimeError(
            f"{self.spec.label}: no answer on /healthz in {timeout:g}s\n{self.log_tail()}"
        )

    def workers_ready(self) -> bool:
        """Every worker is up and has loaded its application."""
        pids = self.worker_pids()
        ready = set(os.listdir(self.ready_dir.name))
        return len(pids) >= self.spec.workers and all(str(pid) in ready for pid in pids)

    def healthy(self) -> bool:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
        try:
            connection.request("GET", "/healthz")
            return connection.getresponse().status == 200
        except OSError:
            return False
        finally:
            connection.close()

    def stop(self) -> None:
        process = self.process
        if process is not None and process.poll() is not None and not self.stopped:
            # Gone before we stopped it: say so, with its log (kept on disk).
            print(
                f"!! {self.spec.label}: gunicorn exited by itself with {process.returncode}; "
                f"log {self.log.name}:\n{self.log_tail(15)}",
                file=sys.stderr,
                flush=True,
            )
            self.stopped = True
            self.log.close()
            return
        self.stopped = True
        if process is not None and process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGTERM)
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
            except ProcessLookupError:
                pass
        self.log.close()
        self.ready_dir.cleanup()
        if process is None or process.returncode in (0, -signal.SIGTERM, None):
            Path(self.log.name).unlink(missing_ok=True)

    def check(self) -> None:
        """Raise if the server is gone (crashed, or stopped by the connection watch)."""
        if self.process is None or self.process.poll() is not None:
            code = self.process.returncode if self.process else None
            raise RuntimeError(f"{self.spec.label} is not running (exit {code})")

    def log_tail(self, lines: int = 30) -> str:
        self.log.flush()
        text = Path(self.log.name).read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    # --- /proc --------------------------------------------------------------------------

    def pids(self) -> list[int]:
        """The master and its workers."""
        if self.process is None or self.process.poll() is not None:
            return []
        return [self.process.pid, *self.worker_pids()]

    def worker_pids(self) -> list[int]:
        assert self.process is not None
        return children(self.process.pid)

    def rss_mib(self) -> float:
        return sum(proc_status(pid).get("VmRSS", 0) for pid in self.pids()) / 1024

    def threads(self) -> int:
        return sum(proc_status(pid).get("Threads", 0) for pid in self.pids())

    def open_files(self) -> int:
        total = 0
        for pid in self.pids():
            try:
                total += len(os.listdir(f"/proc/{pid}/fd"))
            except OSError:
                pass
        return total

    def cpu_seconds(self) -> float:
        return sum(proc_cpu_seconds(pid) for pid in self.pids())


def children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # The command name may hold spaces and parentheses: fields follow the last ")".
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid:
            found.append(int(entry))
    return sorted(found)


def proc_status(pid: int) -> dict[str, int]:
    """VmRSS (KiB) and Threads of a process, 0 when it is gone."""
    values = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            name, _, value = line.partition(":")
            if name in ("VmRSS", "Threads"):
                values[name] = int(value.split()[0])
    except OSError:
        pass
    return values


def proc_cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime + stime


def machine_busy() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine so far, from /proc/stat."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    total = sum(fields[:8])
    return (total - idle) / CLOCK_TICKS, total / CLOCK_TICKS


class CpuMeter:
    """CPU used by a server, the machine, between start() and stop()."""

    def __init__(self, server: Server | None):
        self.server = server
        self.server_seconds = self.machine_busy = self.machine_total = self.wall = 0.0

    def start(self) -> None:
        self._server0 = self.server.cpu_seconds() if self.server else 0.0
        self._busy0, self._total0 = machine_busy()
        self._wall0 = time.perf_counter()

    def stop(self) -> None:
        self.wall = time.perf_counter() - self._wall0
        self.server_seconds = (self.server.cpu_seconds() if self.server else 0.0) - self._server0
        busy, total = machine_busy()
        self.machine_busy, self.machine_total = busy - self._busy0, total - self._total0

    def server_cores(self) -> float:
        return self.server_seconds / self.wall if self.wall else 0.0

    def machine_pct(self) -> float:
        return 100 * self.machine_busy / self.machine_total if self.machine_total else 0.0


class ConnectionWatch:
    """Samples this benchmark's database connections; past `limit`, stops the running server.

    The PostgreSQL server is shared with other people's work: a benchmark must never
    exhaust its connections. Counts the connections whose application_name is
    `application` (set through PGAPPNAME for this process and the servers it starts).
    """

    def __init__(self, dsn: str, application: str, limit: int, interval: float = 0.5):
        self.dsn, self.application = dsn, application
        self.limit, self.interval = limit, interval
        self.servers: list[Server] = []
        self.peak = 0
        self.tripped = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "ConnectionWatch":
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def watch(self, server: Server | None) -> None:
        self.watch_all([server] if server is not None else [])

    def watch_all(self, servers: list[Server]) -> None:
        """Several servers running at once: past the limit, all of them are stopped."""
        self.servers, self.peak = list(servers), 0

    def _run(self) -> None:
        import psycopg

        try:
            connection = psycopg.connect(
                self.dsn, autocommit=True, application_name=f"{self.application}-watch"
            )
        except psycopg.Error as error:
            self.tripped = f"cannot watch connections: {error}"
            return
        with connection:
            while not self._stop.wait(self.interval):
                count = connection.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                    [self.application],
                ).fetchone()[0]
                self.peak = max(self.peak, count)
                servers = self.servers
                if count > self.limit and servers:
                    self.tripped = (
                        f"{count} connections to the database (limit {self.limit}): "
                        f"stopped {', '.join(server.spec.label for server in servers)}"
                    )
                    print(f"!! {self.tripped}", file=sys.stderr, flush=True)
                    for server in servers:
                        server.stop()
