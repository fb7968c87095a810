"""`make run`'s supervisor starts a process that died again; a clean exit still stops all.

The supervisor runs as a real subprocess on a small Procfile of shell commands; the test
kills one of them with SIGKILL, as the OOM killer or a crash would.
"""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
DEADLINE_SECONDS = 30.0

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG (Linux)"),
]

# Each prints its pid, then becomes `sleep` (same pid) until it is stopped.
LONG_RUNNING = "sh -c 'echo up $$; exec sleep 120'"


def supervise(folder: Path, procfile: str, delays: tuple[float, ...]) -> subprocess.Popen[str]:
    (folder / "Procfile").write_text(procfile)
    code = (
        "import sys; from pathlib import Path; "
        "from config.supervisor import Supervisor, parse_procfile; "
        "sys.exit(Supervisor(parse_procfile(Path('Procfile').read_text()), cwd=Path('.'), "
        f"restart_delays={delays!r}).run())"
    )
    return subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=folder,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        stdout=(folder / "out.log").open("w"),
        stderr=subprocess.STDOUT,
        text=True,
    )


def output(folder: Path) -> str:
    return (folder / "out.log").read_text(errors="replace")


def pids(folder: Path, name: str) -> list[int]:
    return [int(pid) for pid in re.findall(rf"{name}\.1 *\| up (\d+)", output(folder))]


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
