"""The web server's access log, from a real uvicorn serving the ASGI app: no secrets in it."""

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.support.net import free_port

ROOT = Path(__file__).resolve().parents[2]


def test_the_web_servers_access_log_has_no_url_secret(tmp_path):
    """uvicorn serving the real ASGI app: its access lines show the path, not the decision
    token, nor the JIRA secret whatever the case or encoding of its query key."""
    port = free_port()
    env = {
        **os.environ,
        "DEBUG": "0",
        "SECRET_KEY": "logging-test-only-key",
        "ALLOWED_HOSTS": "127.0.0.1",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "BPM_VAR_DIR": str(tmp_path),
        "BPM_EMBEDDED_BROKER": "1",
    }
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "config.asgi:application", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        status = _get_when_up(f"http://127.0.0.1:{port}/decide/tok-SECRET42")
        jira = f"http://127.0.0.1:{port}/integrations/jira/webhook"
        for query in ("SECRET=JIRASECRET42", "%73ecret=JIRASECRET43"):
            httpx.post(f"{jira}?{query}", json={}, timeout=10)
    finally:
        server.terminate()
        output = server.communicate(timeout=30)[0]
    assert status is not None, output
    assert "SECRET42" not in output
    assert "SECRET43" not in output
    assert "/decide/[redacted]" in output
    assert "/integrations/jira/webhook?SECRET=[redacted]" in output
    assert "/integrations/jira/webhook?%73ecret=[redacted]" in output


def _get_when_up(url: str, deadline_seconds: float = 60) -> int | None:
    """GET url once the server accepts connections; its status, or None if it never did."""
    deadline = time.monotonic() + deadline_seconds
    while time.monotonic() < deadline:
        try:
            return httpx.get(url, timeout=5).status_code
        except httpx.TransportError:
            time.sleep(0.2)
    return None
