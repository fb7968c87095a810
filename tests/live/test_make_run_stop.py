"""Stopping `make run` stops the whole system: nothing outlives it (issue 9, defect 8).

Boots a clean copy of the project in a temporary folder through the Makefile's own `run`
target (SQLite, DEBUG=1, embedded broker, a free BPM_PORT; `.venv` links to this checkout's),
waits for the web server, the Celery worker and beat, records every process of the tree from
/proc, then stops it the way a developer does: Ctrl-C (SIGINT to the terminal's foreground
process group), a closed terminal (SIGHUP to that group), `kill` (SIGTERM to make), or a
SIGKILL of the supervisor itself or of make. Meanwhile an agent waits for a decision (a
long-poll). Every recorded process must be gone within 10 s, and no process may be left
running in the project folder.
"""

import os
import re
import shutil
import signal
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from devtools.supervisor import GRACE_SECONDS
from tests.support.make_run import NOT_PROJECT_FILES, fresh_env, http, manage
from tests.support.net import free_port

REPO_ROOT = Path(__file__).resolve().parents[2]
BOOT_TIMEOUT_SECONDS = 90
# The supervisor's grace before SIGKILL, and a little for the kill itself.
STOP_DEADLINE_SECONDS = GRACE_SECONDS + 3
WORKER_READY = "ready."
BEAT_READY = "beat: Starting"

pytestmark = [
    pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux)"),
    pytest.mark.skipif(shutil.which("make") is None, reason="needs make"),
]


def stat(pid: int) -> tuple[str, int, int, int] | None:
    """(state, ppid, pgid, start time) of a process, or None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return fields[0], int(fields[1]), int(fields[2]), int(fields[19])


def all_pids() -> list[int]:
    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]


def descendants(root: int) -> dict[int, int]:
    """pid -> start time of ``root`` and every process below it."""
    parents: dict[int, int] = {}
    starts: dict[int, int] = {}
    for pid in all_pids():
        info = stat(pid)
        if info is not None:
            parents[pid], starts[pid] = info[1], info[3]
    tree = {root}
    grew = True
    while grew:
        below = {pid for pid, ppid in parents.items() if ppid in tree} - tree
        tree |= below
        grew = bool(below)
    return {pid: starts[pid] for pid in tree if pid in starts}


def alive(pid: int, start: int) -> bool:
    info = stat(pid)
    return info is not None and info[3] == start and info[0] not in {"Z", "X"}


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def running_in(folder: Path) -> dict[int, str]:
    """Live processes whose working directory is ``folder``: anything `make run` started."""
    found = {}
    for pid in all_pids():
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        info = stat(pid)
        if cwd == str(folder) and info is not None and info[0] not in {"Z", "X"}:
            found[pid] = cmdline(pid)
    return found


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> tuple[Path, str]:
    """A clean, migrated copy of the project using this checkout's virtualenv; an agent token."""
    app = tmp_path_factory.mktemp("make-run-stop") / "app"
    shutil.copytree(REPO_ROOT, app, ignore=NOT_PROJECT_FILES)
    (app / ".venv").symlink_to(REPO_ROOT / ".venv")
    env = {**fresh_env(app.parent / "var"), "PYTHONPATH": str(app)}
    manage(app, env, "migrate", "--noinput")
    token = manage(app, env, "create_agent_token", "stop-agent").stdout.strip().splitlines()[-1]
    return app, token


def wait_until_up(base: str, make: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + BOOT_TIMEOUT_SECONDS
    healthy = False
    while time.monotonic() < deadline:
        assert make.poll() is None, f"make run exited early:\n{log.read_text()}"
        if not healthy:
            try:
                with urllib.request.urlopen(f"{base}/healthz", timeout=2) as response:
                    healthy = response.status == 200
            except OSError:
                pass
        output = log.read_text(errors="replace")
        if healthy and WORKER_READY in output and BEAT_READY in output:
            return
        time.sleep(0.3)
    pytest.fail(
        f"web, worker and beat were not up within {BOOT_TIMEOUT_SECONDS}s:\n{log.read_text()}"
    )


def find(tree: dict[int, int], *words: str) -> int:
    for pid in tree:
        if all(word in cmdline(pid) for word in words):
            return pid
    raise AssertionError(f"no process running {words} in {[cmdline(pid) for pid in tree]}")


@pytest.mark.parametrize(
    "how", ["ctrl-c", "closed-terminal", "sigterm", "sigkill-supervisor", "sigkill-make"], ids=str
)
def test_stopping_make_run_leaves_no_process_behind(project, tmp_path, how):
    project, token = project
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {
        **fresh_env(tmp_path / "var"),
        "BPM_PORT": str(port),
        # The copy's own modules, not the editable install's (this checkout's).
        "PYTHONPATH": str(project),
    }
    log = tmp_path / "make-run.log"
    tree: dict[int, int] = {}
    waiter: threading.Thread | None = None
    with log.open("w") as log_file:
        # A session of its own stands in for the terminal: make leads its foreground group.
        # -o: never reinstall into the shared virtualenv (its stamp may predate pyproject).
        make = subprocess.Popen(
            ["make", "--no-print-directory", "-o", ".venv/.installed", "run"],
            cwd=project,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            wait_until_up(base, make, log)
            status, created = http(
                "POST", f"{base}/api/breakpoints", {"payload": {"question": "Stop?"}}, token=token
            )
            assert status == 201, created
            url = f"{base}/api/breakpoints/{created['breakpointId']}/status?wait=30"
            waiter = threading.Thread(
                target=lambda: _ignore_errors(http, "GET", url, token=token, timeout=40),
                daemon=True,
            )
            waiter.start()
            time.sleep(0.5)  # the long-poll is open
            tree = descendants(make.pid)
            web = find(tree, "uvicorn")
            find(tree, "celery", "worker")
            find(tree, "celery", "beat")
            supervisor = stat(web)[1]  # type: ignore[index]
            assert supervisor in tree and supervisor != make.pid

            if how == "ctrl-c":
                os.killpg(make.pid, signal.SIGINT)
            elif how == "closed-terminal":
                os.killpg(make.pid, signal.SIGHUP)
            elif how == "sigterm":
                os.kill(make.pid, signal.SIGTERM)
            elif how == "sigkill-supervisor":
                os.kill(supervisor, signal.SIGKILL)
            else:
                os.kill(make.pid, signal.SIGKILL)

            deadline = time.monotonic() + STOP_DEADLINE_SECONDS
            left = dict(tree)
            while time.monotonic() < deadline:
                make.poll()  # reaps make, our own child
                left = {pid: start for pid, start in tree.items() if alive(pid, start)}
                if not left:
                    break
                time.sleep(0.1)
            assert not left, (
                f"still running {STOP_DEADLINE_SECONDS}s after {how}: "
                f"{ {pid: cmdline(pid) for pid in left} }\n{log.read_text(errors='replace')}"
            )
            assert make.poll() is not None
            assert not running_in(project), running_in(project)
            output = log.read_text(errors="replace")
            if how in ("ctrl-c", "closed-terminal", "sigterm"):
                # Every process stopped on its own: no SIGKILL, the worker included.
                assert "sending SIGKILL" not in output, output
            assert_quiet(output)
        finally:
            for pid, start in tree.items():
                if pid != os.getpid() and alive(pid, start):
                    os.kill(pid, signal.SIGKILL)
            for pid in running_in(project):
                os.kill(pid, signal.SIGKILL)
            if make.poll() is None:
                make.kill()
            make.wait(timeout=10)
            if waiter is not None:
                waiter.join(timeout=45)


def assert_quiet(output: str) -> None:
    """make run's output: one timestamp a line, no banner or warning that says nothing,
    no line per routine task (sweeps run every few seconds)."""
    for noise in ("No hostname was supplied", "AXES: BEGIN", "Sending due task", "succeeded in"):
        assert noise not in output, f"{noise!r} in:\n{output}"
    stamped_twice = re.compile(r"^\d\d:\d\d:\d\d \S+\s+\| \d{4}-\d\d-\d\d", re.MULTILINE)
    assert not stamped_twice.search(output), output


def _ignore_errors(function, *args, **kwargs) -> None:
    try:
        function(*args, **kwargs)
    except Exception:  # the server went away under it: expected
        pass
