"""Production startup checks: the servers refuse an environment that would fail quietly later.

Management commands and the suite are not refused (an operator can still migrate); the web
servers (ASGI and WSGI) and the Celery worker are. Health probes answer on any Host.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
NO_REDIS = "REDIS_URL is not set"
NO_HOSTS = "ALLOWED_HOSTS is not set"


def production_env(tmp_path: Path, **overrides: str) -> dict[str, str]:
    """DEBUG off with a key, on a throwaway SQLite database, nothing else configured."""
    unset = {"REDIS_URL", "ALLOWED_HOSTS", "DATABASE_URL", "DJANGO_ALLOW_ASYNC_UNSAFE"}
    env = {k: v for k, v in os.environ.items() if k not in unset and not k.startswith("BPM_")}
    env.update(
        {"DEBUG": "0", "SECRET_KEY": "startup-test-key", "BPM_VAR_DIR": str(tmp_path / "var")}
    )
    env.update(overrides)
    return env


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        args,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
        stdin=subprocess.DEVNULL,
    )


def test_the_asgi_server_refuses_to_start_without_redis_or_allowed_hosts(tmp_path):
    result = run(
        [str(BIN / "uvicorn"), "config.asgi:application", "--port", "0"], production_env(tmp_path)
    )

    assert result.returncode != 0
    assert NO_REDIS in result.stderr
    assert NO_HOSTS in result.stderr


def test_the_wsgi_application_refuses_to_load_without_redis(tmp_path):
    env = production_env(tmp_path, ALLOWED_HOSTS="bpm.example.com")

    refused = run([sys.executable, "-c", "import config.wsgi"], env)
    embedded = run(
        [sys.executable, "-c", "import config.wsgi"], {**env, "BPM_EMBEDDED_BROKER": "1"}
    )

    assert refused.returncode != 0
    assert NO_REDIS in refused.stderr
    assert NO_HOSTS not in refused.stderr
    assert embedded.returncode == 0, embedded.stderr


def test_the_celery_worker_refuses_to_start_without_redis(tmp_path):
    result = run(
        [str(BIN / "celery"), "-A", "config", "worker", "--loglevel", "INFO"],
        production_env(tmp_path),
    )

    assert result.returncode != 0
    assert NO_REDIS in result.stdout + result.stderr


def test_management_commands_still_run_with_an_incomplete_environment(tmp_path):
    result = run([sys.executable, "manage.py", "check"], production_env(tmp_path))

    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
def test_health_probes_answer_on_any_host(client, db, path):
    response = client.get(path, HTTP_HOST="10.244.3.17:8000")

    assert response.status_code == 200


def test_other_paths_still_check_the_host(client, db):
    response = client.get("/api/breakpoints", HTTP_HOST="10.244.3.17:8000")

    assert response.status_code == 400
