"""The web server's start log has no ERROR line when nothing is wrong.

gunicorn is started as the Procfile starts it (the project's gunicorn.conf.py, read from
the working directory) on a tiny app (tests/standins/pid_app.py), with a HOME it cannot
write, as the image's user has (/app): an ERROR there would be the first thing an operator
reads, about nothing that matters.
"""

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.support.net import free_port

ROOT = Path(__file__).resolve().parents[2]


def test_gunicorn_logs_no_error_when_it_cannot_write_its_home(tmp_path):
    not_a_directory = tmp_path / "a-file"
    not_a_directory.write_text("")
    env = {key: value for key, value in os.environ.items() if key != "XDG_RUNTIME_DIR"}
    # Unwritable even for root: a directory under a regular file cannot be made.
    env.update(HOME=str(not_a_directory / "home"), PYTHONPATH=str(ROOT))
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "tests.standins.pid_app:app",
         "--worker-class", "web.webserver.BalancedUvicornWorker", "--workers", "1",
         "--bind", f"127.0.0.1:{port}", "--graceful-timeout", "10"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        start_new_session=True, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not answers(port):  # the worker serves: the master's start is over
            assert process.poll() is None, process.stderr.read()
            assert time.monotonic() < deadline, "gunicorn did not serve"
            time.sleep(0.1)
        process.send_signal(signal.SIGTERM)
        log = process.communicate(timeout=30)[1]
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 0, log
    assert "Booting worker" in log, log
    errors = [line for line in log.splitlines() if "[ERROR]" in line]
    assert errors == [], log


def answers(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False
