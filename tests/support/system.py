"""The whole system as real processes, for tests/live: redis-server, the web server (gunicorn
with a uvicorn worker), a Celery worker and beat, on the test database.

`System` starts and stops them; `Process` is one subprocess in its own process group with
its output in a log file; `RedisServer` is a dedicated redis-server that a test may stop,
kill and restart; `start_system` and `running_system` start one for a test. The fixtures that
hand them out are in tests/live/conftest.py (and tests/live/clients/conftest.py).
"""

import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
import redis
from django.conf import settings
from django.db import connection

from tests.support.net import free_port

PROJECT_DIR = Path(__file__).resolve().parents[2]
DEADLINE_SECONDS = 30.0
SWEEP_SECONDS = 1  # BPM_OUTBOX_SWEEP_SECONDS and BPM_TTL_SWEEP_SECONDS in the subprocesses
LEASE_SECONDS = 3  # BPM_WEBHOOK_LEASE_SECONDS in the subprocesses
# The worker as the Procfile runs it (make_system(**PROCFILE_WORKER)): more than one pool
# process; mingle, gossip and heartbeat on (their broker channels take part in a reconnect).
# By default tests start one pool process without them: quicker, easier to reason about.
PROCFILE_WORKER = {"worker_concurrency": 2, "worker_chatter": True}
WITHOUT_CHATTER = ["--without-mingle", "--without-gossip", "--without-heartbeat"]


# The test database is PostgreSQL under either name (infra.environment swaps Django's backend
# for infra.postgres, its subclass).
POSTGRESQL_ENGINES = {"django.db.backends.postgresql", "infra.postgres"}


def missing_requirement(*, postgres: bool = True) -> str | None:
    """Why the system cannot run here, or None. `postgres=False`: a SQLite test database
    will do, if it is a file the subprocesses can open (not an in-memory one)."""
    engine = settings.DATABASES["default"]["ENGINE"]
    if postgres and engine not in POSTGRESQL_ENGINES:
        return (
            "integration tests need PostgreSQL: web, worker and beat subprocesses share the "
            "test database (set DATABASE_URL=postgres://...)"
        )
    if engine == "django.db.backends.sqlite3" and not _sqlite_file():
        return "the live server needs the SQLite test database in a file, not in memory"
    if shutil.which("redis-server") is None:
        return "integration tests need `redis-server` on PATH (a dedicated one is started)"
    return None


# --- processes -----------------------------------------------------------------------------


class Process:
    """One subprocess in its own session (process group), its output in a log file."""

    def __init__(
        self,
        name: str,
        args: list[str],
        env: dict[str, str],
        log_dir: Path,
        open_files: int | None = None,
    ):
        self.name = name
        self.args = args
        self.env = env
        self.open_files = open_files  # its open-file limit (soft and hard), if set
        self.log_path = log_dir / f"{name}.log"
        self.popen: subprocess.Popen | None = None
        self.expected_alive = True  # False once a test kills it on purpose
        self._terminated = False
        self._log = None

    def start(self) -> "Process":
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.popen = subprocess.Popen(
            self.args,
            cwd=PROJECT_DIR,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=self._limit_open_files if self.open_files else None,
        )
        return self

    def _limit_open_files(self) -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (self.open_files, self.open_files))

    @property
    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def _signal_group(self, sig: int) -> None:
        try:
            os.killpg(self.popen.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def kill(self) -> int:
        """SIGKILL the whole process group (e.g. a worker and its pool children)."""
        self._signal_group(signal.SIGKILL)
        return self.popen.wait(timeout=10)

    def terminate(self) -> None:
        """Ask the whole group to shut down (SIGTERM) without waiting."""
        if self.alive and not self._terminated:
            self._terminated = True
            self._signal_group(signal.SIGTERM)

    def stop(self, timeout: float = 8.0) -> None:
        """Terminate and wait; SIGKILL what is left after `timeout` seconds."""
        if self.popen is None:
            return
        if self.popen.poll() is None:
            self.terminate()
            try:
                self.popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self._signal_group(signal.SIGKILL)
                self.popen.wait(timeout=10)
        self._signal_group(signal.SIGKILL)  # any child left behind in the group
        self._terminated = False
        if self._log is not None:
            self._log.close()
            self._log = None

    def output(self, last: int = 6000) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""
        return text[-last:]


class RedisServer:
    """A dedicated redis-server (no persistence) that tests may stop and restart."""

    def __init__(self, log_dir: Path):
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process = Process(
            "redis",
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            dict(os.environ),
            log_dir,
        )

    def ping(self) -> bool:
        client = redis.Redis.from_url(self.url, socket_connect_timeout=0.5, socket_timeout=0.5)
        try:
            return bool(client.ping())
        except redis.RedisError:
            return False
        finally:
            client.close()

    def start(self) -> None:
        self.process.start()
        wait_until(self.ping, what="redis-server to answer PING", logs=[self.process])

    def stop(self) -> None:
        self.process.stop()
        assert not self.ping(), "redis-server still answers after stop"

    def kill(self) -> None:
        """SIGKILL, as a crashed or OOM-killed Redis: no shutdown, nothing saved."""
        self.process.kill()
        self.process.stop()  # closes the log; the process is gone already
        assert not self.ping(), "redis-server still answers after SIGKILL"

    def ensure_running(self) -> None:
        if not self.process.alive:
            self.start()

    def flush(self) -> None:
        client = redis.Redis.from_url(self.url)
        try:
            client.flushall()
        finally:
            client.close()


def wait_until(
    predicate: Callable[[], Any],
    *,
    what: str,
    timeout: float = DEADLINE_SECONDS,
    interval: float = 0.1,
    logs: list[Process] | None = None,
) -> Any:
    """Poll until predicate() is truthy; on timeout fail with the processes' logs."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        for process in logs or []:
            if process.expected_alive and process.popen is not None and not process.alive:
                pytest.fail(
                    f"{process.name} exited ({process.popen.returncode}) while waiting "
                    f"for {what}:\n{process.output()}"
                )
        if time.monotonic() >= deadline:
            pytest.fail(f"Timed out after {timeout}s waiting for {what}.\n{format_logs(logs)}")
        time.sleep(interval)


def format_logs(processes: list[Process] | None) -> str:
    return "\n".join(
        f"----- {p.name} (exit {p.popen.poll() if p.popen else None}) -----\n{p.output()}"
        for p in processes or []
    )


def _sqlite_file() -> str | None:
    """The SQLite test database's file (None when it is in memory)."""
    name = str(connection.settings_dict["NAME"])
    return None if "mode=memory" in name or name == ":memory:" else name


def database_url(via_port: int | None = None) -> str:
    """The test database's URL for the subprocesses; `via_port`: through 127.0.0.1 there."""
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{_sqlite_file()}"
    user = quote(db.get("USER") or "", safe="")
    password = quote(db.get("PASSWORD") or "", safe="")
    credentials = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    host = "127.0.0.1" if via_port else quote(db.get("HOST") or "localhost", safe="")
    port = f":{via_port or db.get('PORT') or ''}".rstrip(":")
    return f"postgres://{credentials}{host}{port}/{quote(db['NAME'], safe='')}"


def _celery_command() -> list[str]:
    beside = Path(sys.executable).parent / "celery"
    return [str(beside)] if beside.exists() else [sys.executable, "-m", "celery"]


class System:
    """Web, worker and beat against the dedicated Redis and the test database."""

    def __init__(
        self,
        redis_server: RedisServer,
        tmp_path: Path,
        env: dict[str, str] | None = None,
        worker_concurrency: int = 1,
        worker_chatter: bool = False,
        web_open_files: int | None = None,
        worker_queues: str | None = None,
    ):
        self.redis = redis_server
        # The queues the worker consumes (--queues; None: every queue, as make run's
        # worker did before it had a `triggers` worker beside it).
        self.worker_queues = worker_queues
        self.web_open_files = web_open_files
        self.worker_concurrency = worker_concurrency
        self.worker_chatter = worker_chatter
        self.tmp_path = tmp_path
        self.web_port = free_port()
        self.base_url = f"http://127.0.0.1:{self.web_port}"
        var_dir = tmp_path / "var"
        var_dir.mkdir(exist_ok=True)
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("CELERY_", "BPM_"))},
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "PYTHONUNBUFFERED": "1",
            "DEBUG": "0",
            "SECRET_KEY": "integration-test-only-key",
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "DATABASE_URL": database_url(),
            "REDIS_URL": redis_server.url,
            "BPM_VAR_DIR": str(var_dir),
            "BPM_WEBHOOK_ALLOWED_HOSTS": "127.0.0.1",
            "BPM_OUTBOX_SWEEP_SECONDS": str(SWEEP_SECONDS),
            "BPM_TTL_SWEEP_SECONDS": str(SWEEP_SECONDS),
            "BPM_WEBHOOK_RETRY_BASE_SECONDS": "0.5",
            "BPM_WEBHOOK_LEASE_SECONDS": str(LEASE_SECONDS),
            "LOG_LEVEL": "INFO",
            "DATABASE_POOL_MAX": "4",
            **(env or {}),
        }
        self.processes: list[Process] = []
        self.web: Process | None = None
        self.worker: Process | None = None
        self.beat: Process | None = None
        self._workers_started = 0

    # --- starting ---------------------------------------------------------------------

    def _process(self, name: str, args: list[str], open_files: int | None = None) -> Process:
        process = Process(name, args, self.env, self.tmp_path, open_files)
        self.processes.append(process)
        return process.start()

    def _start_web(self) -> Process:
        """The production web server: gunicorn with one uvicorn (ASGI) worker."""
        return self._process(
            "web",
            [
                str(Path(sys.executable).parent / "gunicorn"),
                "config.asgi:application",
                "--worker-class",
                "web.webserver.BalancedUvicornWorker",
                "--workers",
                "1",
                "--bind",
                f"127.0.0.1:{self.web_port}",
                "--graceful-timeout",
                "3",
            ],
            open_files=self.web_open_files,
        )

    def _start_worker(self, queues: str | None = None) -> Process:
        self._workers_started += 1
        number = self._workers_started
        queues = queues or self.worker_queues
        return self._process(
            f"worker-{number}",
            [
                *_celery_command(),
                "-A",
                "config",
                "worker",
                "--loglevel",
                "INFO",
                "--concurrency",
                str(self.worker_concurrency),
                "--pool",
                "prefork",
                *([] if self.worker_chatter else WITHOUT_CHATTER),
                *(["--queues", queues] if queues else []),
                "--hostname",
                f"worker{number}@%h",
            ],
        )

    def _start_beat(self) -> Process:
        return self._process(
            "beat",
            [
                *_celery_command(),
                "-A",
                "config",
                "beat",
                "--loglevel",
                "INFO",
                "--pidfile",
                str(self.tmp_path / "beat.pid"),
            ],
        )

    def start(self, *, beat: bool = True) -> "System":
        self.redis.ensure_running()
        self.redis.flush()  # no messages left over from another test
        self.web = self._start_web()
        self.worker = self._start_worker()
        self.beat = self._start_beat() if beat else None
        self.wait_web_ready()
        self.wait_worker_ready(self.worker)
        if self.beat is not None:
            self.wait_log(self.beat, "beat: Starting")
        return self

    def start_worker(self, queues: str | None = None) -> Process:
        """A fresh worker (e.g. after the previous one was killed), once it is ready;
        `queues`: those it consumes (--queues), else the System's."""
        self.worker = self._start_worker(queues)
        self.wait_worker_ready(self.worker)
        return self.worker

    # --- readiness --------------------------------------------------------------------

    def _healthy(self) -> bool:
        try:
            return httpx.get(f"{self.base_url}/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def wait_web_ready(self) -> None:
        wait_until(self._healthy, what="the web server's /healthz", logs=[self.web])

    def wait_log(self, process: Process, needle: str) -> None:
        wait_until(
            lambda: needle in process.output(last=200_000),
            what=f"{process.name} to log {needle!r}",
            logs=[process],
        )

    def wait_worker_ready(self, worker: Process) -> None:
        self.wait_log(worker, " ready.")

    def wait_until(self, predicate: Callable[[], Any], *, what: str, **kwargs) -> Any:
        return wait_until(predicate, what=what, logs=self.live_processes(), **kwargs)

    def live_processes(self) -> list[Process]:
        return [p for p in self.processes if p.expected_alive]

    def logs(self) -> str:
        return format_logs(self.processes)

    # --- stopping ---------------------------------------------------------------------

    def restart_web(self, *, down_seconds: float = 0.0) -> None:
        """Stop the web server, stay down `down_seconds`, start it again on the same port."""
        old = self.web
        old.expected_alive = False
        old.stop()
        time.sleep(down_seconds)
        self.web = self._start_web()
        self.wait_web_ready()

    def kill_worker(self) -> int:
        worker = self.worker
        worker.expected_alive = False
        return worker.kill()

    def stop(self) -> None:
        for process in self.processes:  # all at once, then wait for each
            process.terminate()
        for process in reversed(self.processes):
            process.stop()


# --- starting one for tests ------------------------------------------------------------


def start_system(
    redis_server: RedisServer,
    tmp_path: Path,
    static_root: Path,
    *,
    beat: bool = True,
    env: dict[str, str] | None = None,
    worker_concurrency: int = 1,
    worker_chatter: bool = False,
    web_open_files: int | None = None,
    worker_queues: str | None = None,
) -> System:
    """A System on `redis_server`, its logs in `tmp_path`, started (web, worker, beat)."""
    system = System(
        redis_server,
        tmp_path,
        {"STATIC_ROOT": str(static_root), **(env or {})},
        worker_concurrency=worker_concurrency,
        worker_chatter=worker_chatter,
        web_open_files=web_open_files,
        worker_queues=worker_queues,
    )
    try:
        return system.start(beat=beat)
    except BaseException:
        system.stop()
        raise


@contextmanager
def running_system(tmp_path_factory, static_root: Path, **options) -> Iterator[System]:
    """A system on a Redis of its own (so that a test's own `make_system` beside it shares
    nothing but the database), stopped with its Redis at the end."""
    redis = RedisServer(tmp_path_factory.mktemp("redis"))
    redis.start()
    try:
        system = start_system(redis, tmp_path_factory.mktemp("system"), static_root, **options)
        try:
            yield system
        finally:
            system.stop()
    finally:
        redis.process.stop()
