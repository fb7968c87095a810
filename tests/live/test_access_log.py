"""The web server's access log, from the real ASGI app served as the Procfile serves it
(gunicorn, its worker class) and by uvicorn alone: no secrets in it."""

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.support.net import free_port

ROOT = Path(__file__).resolve().parents[2]


def _server_command(server: str, port: int) -> list[str]:
    """uvicorn alone, or gunicorn with the worker class and access log the Procfile gives it."""
    if server == "uvicorn":
        return [sys.executable, "-m", "uvicorn", "config.asgi:application", "--port", str(port)]
    return [
        *(sys.executable, "-m", "gunicorn", "config.asgi:application"),
        *("--worker-class", "web.webserver.BalancedUvicornWorker", "--workers", "1"),
        *("--bind", f"127.0.0.1:{port}", "--access-logfile", "-"),
    ]


@pytest.mark.parametrize("server", ["uvicorn", "gunicorn"])
def test_the_web_servers_access_log_has_no_url_secret(tmp_path, server):
    """The real ASGI app served as the Procfile serves it (and by uvicorn alone): its access
    lines show the path, not the decision token, nor the JIRA secret whatever the case or
    encoding of its query key, nor an OpenID Connect callback's authorization code and
    state (a code is a credential until it is redeemed)."""
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
    process = subprocess.Popen(
        _server_command(server, port),
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
        callback = f"http://127.0.0.1:{port}/oidc/callback/"
        httpx.get(f"{callback}?code=OIDCCODE44&state=OIDCSTATE45", timeout=10)
        httpx.get(f"{callback}?STATE=OIDCSTATE46&%63ode=OIDCCODE47", timeout=10)
    finally:
        process.terminate()
        output = process.communicate(timeout=30)[0]
    assert status is not None, output
    for secret in ("SECRET42", "SECRET43", "OIDCCODE44", "OIDCSTATE45", "OIDCSTATE46"):
        assert secret not in output, output
    assert "OIDCCODE47" not in output, output
    assert "/decide/[redacted]" in output
    assert "/integrations/jira/webhook?SECRET=[redacted]" in output
    assert "/integrations/jira/webhook?%73ecret=[redacted]" in output
    assert "/oidc/callback/?code=[redacted]&state=[redacted]" in output
    assert "/oidc/callback/?STATE=[redacted]&%63ode=[redacted]" in output


def _get_when_up(url: str, deadline_seconds: float = 60) -> int | None:
    """GET url once the server accepts connections; its status, or None if it never did."""
    deadline = time.monotonic() + deadline_seconds
    while time.monotonic() < deadline:
        try:
            return httpx.get(url, timeout=5).status_code
        except httpx.TransportError:
            time.sleep(0.2)
    return None
