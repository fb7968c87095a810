"""`make run` and `make web` serve on BPM_PORT; a port that is taken is one line naming
BPM_PORT and a non-zero exit, at once: nothing installed, migrated or started, and no web
process started again and again on "address already in use" (issue 31, defect 3).

A clean copy of the project (SQLite, DEBUG=1, `.venv` linked to this checkout's, never
installed into: `-o .venv/.installed`) runs the Makefile's own targets.
"""

import shutil
import socket
import time
import urllib.request

import pytest

from tests.support.make_run import make, project_env, stop
from tests.support.net import free_port

pytest_plugins = ["tests.support.make_run"]  # project: a clean copy, one per module

# Deadlines for a process to end or answer, never asserted durations.
EXIT_DEADLINE_SECONDS = 120
BOOT_TIMEOUT_SECONDS = 90

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


@pytest.mark.parametrize("target", ["run", "web"])
def test_a_taken_port_stops_make_at_once_with_one_line_naming_bpm_port(project, tmp_path, target):
    log = tmp_path / "make.log"
    with socket.socket() as squatter:  # another server, or another `make run`
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        process = make(project, target, project_env(project, tmp_path, port), log)
        try:
            code = process.wait(timeout=EXIT_DEADLINE_SECONDS)
        finally:
            stop(process)
    output = log.read_text(errors="replace")
    assert code != 0, output
    [line] = [line for line in output.splitlines() if "BPM_PORT" in line]
    assert line.startswith(f"port {port} is in use: set BPM_PORT="), output
    suggested = int(line.split("BPM_PORT=")[1].split()[0])
    assert suggested != port
    assert line.endswith(f"(and BPM_URL=http://127.0.0.1:{suggested})"), output
    assert "migrate" not in output and "started" not in output, output
    assert "starting it again" not in output, output


def test_make_web_serves_only_the_web_process_on_bpm_port(project, tmp_path):
    port = free_port()
    log = tmp_path / "make-web.log"
    process = make(project, "web", project_env(project, tmp_path, port), log)
    try:
        deadline = time.monotonic() + BOOT_TIMEOUT_SECONDS
        healthy = False
        while not healthy and time.monotonic() < deadline:
            assert process.poll() is None, f"make web exited:\n{log.read_text()}"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as r:
                    healthy = r.status == 200
            except OSError:
                time.sleep(0.3)
        assert healthy, f"nothing answered on BPM_PORT={port}:\n{log.read_text()}"
        output = log.read_text(errors="replace")
        assert f"Uvicorn running on http://127.0.0.1:{port}" in output
        assert "worker.1" not in output and "beat.1" not in output
    finally:
        stop(process)
