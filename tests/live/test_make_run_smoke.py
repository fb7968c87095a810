"""`make run` on a fresh checkout: SQLite, embedded broker, a real HTTP server that takes a breakpoint.

Boots a clean copy of the project in a temporary folder the way `make run` does (migrate,
then the `web` line of Procfile.dev: the ASGI server) with no DATABASE_URL/REDIS_URL, so it
never touches the outer test database.
"""

import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.support.make_run import (
    NOT_PROJECT_FILES,
    REPO_ROOT,
    fresh_env,
    http,
    manage,
    procfile_web_command,
)
from tests.support.net import free_port

BOOT_TIMEOUT_SECONDS = 60


def wait_until_healthy(base: str, server: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + BOOT_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        assert server.poll() is None, f"the web server exited early:\n{log.read_text()}"
        try:
            with urllib.request.urlopen(f"{base}/healthz", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    pytest.fail(f"/healthz did not answer within {BOOT_TIMEOUT_SECONDS}s:\n{log.read_text()}")


def test_fresh_copy_migrates_serves_and_accepts_a_breakpoint_on_sqlite(tmp_path):
    app = tmp_path / "app"
    shutil.copytree(REPO_ROOT, app, ignore=NOT_PROJECT_FILES)
    assert not (app / "db.sqlite3").exists()
    env = fresh_env(tmp_path / "var")

    manage(app, env, "migrate", "--noinput")
    token = manage(app, env, "create_agent_token", "smoke-agent").stdout.strip().splitlines()[-1]
    assert token.startswith("bpma_")  # an agent token (accounts.tokens)

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "web.log"
    server_env = {
        **env,
        "BPM_PORT": str(port),
        "PATH": f"{Path(sys.executable).parent}:{env.get('PATH', '')}",
    }
    with log.open("w") as log_file:
        server = subprocess.Popen(
            ["bash", "-c", f"exec {procfile_web_command()}"],
            cwd=app,
            env=server_env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_until_healthy(base, server, log)

            status, body = http(
                "POST",
                f"{base}/api/breakpoints",
                {"payload": {"question": "Ship it?", "title": "Smoke Test"}},
                token=token,
            )
            assert status == 201, body
            assert body["status"] == "waiting"
            assert body["agentId"] == "smoke-agent"
            assert body["key"] == "smoke-test"

            status, polled = http(
                "GET", f"{base}/api/breakpoints/{body['breakpointId']}/status", token=token
            )
            assert status == 200
            assert polled["status"] == "waiting"

            status, refused = http("GET", f"{base}/api/breakpoints")
            assert status == 401
            assert refused["error"]["code"] == "not_authenticated"

            # The console's own assets are served (no runserver here: WhiteNoise serves them).
            with urllib.request.urlopen(f"{base}/static/admin/css/base.css", timeout=10) as css:
                assert css.status == 200

            # A waiting agent hears of a release made by another process (no NOTIFY on
            # SQLite: the server's re-check finds it).
            waited: dict = {}
            url = f"{base}/api/breakpoints/{body['breakpointId']}/status?wait=30"
            waiter = threading.Thread(
                target=lambda: waited.update(answer=http("GET", url, token=token, timeout=40))
            )
            waiter.start()
            time.sleep(0.5)
            manage(
                app,
                env,
                "shell",
                "-c",
                "from core.actors import Actor; from breakpoints.services import "
                f"breakpoint_cancel; breakpoint_cancel(breakpoint_id='{body['breakpointId']}', "
                "actor=Actor.for_agent('smoke-agent'), reason='changed my mind')",
            )
            waiter.join(timeout=45)
            status, answer = waited["answer"]
            assert status == 200
            assert answer["status"] == "cancelled"
            assert answer["result"]["feedback"] == "changed my mind"
            assert answer["pollAfterMs"] is None
        finally:
            server.terminate()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait(timeout=10)

    assert (app / "db.sqlite3").is_file(), "make run must default to SQLite in the project folder"
    assert (app / "db.sqlite3").stat().st_size > 0
