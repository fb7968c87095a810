"""`make run`'s supervisor starts a process that died again; a clean exit still stops all;
a web process that died because its port was taken is not started again.

The supervisor runs as a real subprocess on a small Procfile of shell commands; the test
kills one of them with SIGKILL, as the OOM killer or a crash would.
"""

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.net import free_port

REPO_ROOT = Path(__file__).resolve().parents[2]
DEADLINE_SECONDS = 30.0

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG (Linux)"),
]

# Each prints its pid, then becomes `sleep` (same pid) until it is stopped.
LONG_RUNNING = "sh -c 'echo up $$; exec sleep 120'"


def supervise(
    folder: Path, procfile: str, delays: tuple[float, ...], port: int | None = None
) -> subprocess.Popen[str]:
    (folder / "Procfile").write_text(procfile)
    code = (
        "import sys; from pathlib import Path; "
        "from devtools.supervisor import Supervisor, parse_procfile; "
        "sys.exit(Supervisor(parse_procfile(Path('Procfile').read_text()), cwd=Path('.'), "
        f"restart_delays={delays!r}, port={port!r}).run())"
    )
    port_env = {} if port is None else {"BPM_PORT": str(port)}
    return subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=folder,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT), **port_env},
        stdout=(folder / "out.log").open("w"),
        stderr=subprocess.STDOUT,
        text=True,
    )


def output(folder: Path) -> str:
    return (folder / "out.log").read_text(errors="replace")


def pids(folder: Path, name: str, word: str = "up") -> list[int]:
    return [int(pid) for pid in re.findall(rf"{name}\.1 *\| {word} (\d+)", output(folder))]


def wait_for(folder: Path, predicate, what: str):
    deadline = time.monotonic() + DEADLINE_SECONDS
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    pytest.fail(f"timed out waiting for {what}:\n{output(folder)}")


def running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in {"Z", "X"}


def test_a_killed_process_is_started_again_and_the_others_keep_running(tmp_path):
    supervisor = supervise(tmp_path, f"steady: {LONG_RUNNING}\nvictim: {LONG_RUNNING}\n", (0.5,))
    try:
        [steady] = wait_for(tmp_path, lambda: pids(tmp_path, "steady"), "steady to start")
        [victim] = wait_for(tmp_path, lambda: pids(tmp_path, "victim"), "victim to start")

        os.kill(victim, signal.SIGKILL)
        both = wait_for(
            tmp_path, lambda: len(pids(tmp_path, "victim")) == 2, "victim to be started again"
        )
        assert both
        restarted = pids(tmp_path, "victim")[1]
        assert restarted != victim and running(restarted)
        assert "victim.1 died (rc=-9); starting it again in 0.5s" in output(tmp_path)
        assert pids(tmp_path, "steady") == [steady] and running(steady)  # untouched
        assert supervisor.poll() is None

        supervisor.send_signal(signal.SIGTERM)
        assert supervisor.wait(timeout=DEADLINE_SECONDS) == 0
        assert not running(restarted) and not running(steady)
    finally:
        if supervisor.poll() is None:
            supervisor.kill()
            supervisor.wait()


def test_a_process_that_keeps_dying_stops_everything_with_its_exit_code(tmp_path):
    supervisor = supervise(
        tmp_path, f"steady: {LONG_RUNNING}\ncrasher: sh -c 'echo boom; exit 3'\n", (0.1, 0.2)
    )
    assert supervisor.wait(timeout=DEADLINE_SECONDS) == 3
    text = output(tmp_path)
    assert text.count("crasher.1 | boom") == 3  # the first run and two restarts
    assert "crasher.1 exited: stopping all processes" in text
    assert not running(pids(tmp_path, "steady")[0])


def test_a_process_that_exits_cleanly_stops_everything_without_a_restart(tmp_path):
    supervisor = supervise(tmp_path, f"steady: {LONG_RUNNING}\ndone: sh -c 'exit 0'\n", (0.1,))
    assert supervisor.wait(timeout=DEADLINE_SECONDS) == 0
    text = output(tmp_path)
    assert "done.1 exited: stopping all processes" in text
    assert "starting it again" not in text
    assert not running(pids(tmp_path, "steady")[0])


# A web process: waits for the file `go`, then listens on BPM_PORT as uvicorn does (exit 1
# and uvicorn's words when the port is taken); with `crash-once`, it first exits with 3.
WEB_SERVER = """
import os, socket, sys, time
from pathlib import Path
while not Path("go").exists():
    time.sleep(0.05)
if Path("crash-once").exists():
    Path("crash-once").unlink()
    sys.exit(3)
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    server.bind(("127.0.0.1", int(os.environ["BPM_PORT"])))
except OSError as error:
    print("error while attempting to bind:", error.strerror.lower(), flush=True)
    sys.exit(1)
server.listen()
print("listening", os.getpid(), flush=True)
time.sleep(120)
"""


def web_procfile(folder: Path) -> str:
    (folder / "web.py").write_text(WEB_SERVER)
    return f"web: {sys.executable} web.py\nsteady: {LONG_RUNNING}\n"


def test_a_web_process_that_lost_its_port_stops_everything_with_one_line_naming_bpm_port(
    tmp_path,
):
    """The port was free when the supervisor started and taken before the web process
    listened: starting it again would fail the same way, so everything stops at once."""
    port = free_port()
    supervisor = supervise(tmp_path, web_procfile(tmp_path), (0.1, 0.1, 0.1, 0.1), port=port)
    squatter = socket.socket()
    try:
        wait_for(tmp_path, lambda: "web.1 started" in output(tmp_path), "web to start")
        [steady] = wait_for(tmp_path, lambda: pids(tmp_path, "steady"), "steady to start")
        squatter.bind(("127.0.0.1", port))
        squatter.listen()
        (tmp_path / "go").touch()
        assert supervisor.wait(timeout=DEADLINE_SECONDS) == 1
        text = output(tmp_path)
        assert f"port {port} is in use: set BPM_PORT=" in text
        assert "(and BPM_URL=http://127.0.0.1:" in text
        assert "starting it again" not in text
        assert text.count("web.1 started") == 1
        assert not running(steady)
    finally:
        squatter.close()
        if supervisor.poll() is None:
            supervisor.kill()
            supervisor.wait()


def test_a_web_process_that_crashed_with_its_port_free_is_started_again(tmp_path):
    port = free_port()
    (tmp_path / "crash-once").touch()
    (tmp_path / "go").touch()
    supervisor = supervise(tmp_path, web_procfile(tmp_path), (0.1,), port=port)
    try:
        wait_for(tmp_path, lambda: pids(tmp_path, "web", "listening"), "web to listen")
        text = output(tmp_path)
        assert "web.1 died (rc=3); starting it again in 0.1s" in text
        assert "is in use" not in text
        assert supervisor.poll() is None
        supervisor.send_signal(signal.SIGTERM)
        assert supervisor.wait(timeout=DEADLINE_SECONDS) == 0
    finally:
        if supervisor.poll() is None:
            supervisor.kill()
            supervisor.wait()


def test_a_taken_port_stops_the_supervisor_before_it_starts_anything(tmp_path):
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        supervisor = supervise(tmp_path, web_procfile(tmp_path), (0.1,), port=port)
        assert supervisor.wait(timeout=DEADLINE_SECONDS) == 1
    assert "started" not in output(tmp_path)
    assert f"port {port} is in use: set BPM_PORT=" in output(tmp_path)
