"""Production settings: refuse to start without SECRET_KEY; `check --deploy` clean when configured."""

import os
import subprocess
import sys

from tests.support.project import ROOT

PRODUCTION_ENV = {
    "DEBUG": "0",
    "SECRET_KEY": "x" * 20 + "production-like-secret-key-with-entropy-0123456789",
    "ALLOWED_HOSTS": "bpm.example.com",
    "SECURE_SSL_REDIRECT": "1",
    "SECURE_HSTS_SECONDS": "31536000",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS": "1",
    "SECURE_HSTS_PRELOAD": "1",
}


def _manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    # tests/live/e2e/conftest.py sets DJANGO_ALLOW_ASYNC_UNSAFE for the whole session; production
    # never has it, and check --deploy warns about it.
    unset = {*PRODUCTION_ENV, "DJANGO_ALLOW_ASYNC_UNSAFE"}
    base = {k: v for k, v in os.environ.items() if k not in unset}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_deploy_is_clean_with_production_settings():
    result = _manage("check", "--deploy", "--fail-level", "WARNING", env=PRODUCTION_ENV)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_production_refuses_to_start_without_secret_key():
    env = {**PRODUCTION_ENV, "SECRET_KEY": ""}
    result = _manage("check", env=env)
    assert result.returncode != 0
    assert "SECRET_KEY must be set" in result.stderr


def test_bare_manage_py_without_configuration_runs_in_development_mode():
    """No DEBUG and no SECRET_KEY at all: a local checkout, so commands just work."""
    result = _manage("check", env={})
    assert result.returncode == 0, result.stderr
    assert "no issues" in result.stdout


def test_production_web_server_refuses_to_start_without_secret_key():
    """Only manage.py has the development default; wsgi does not."""
    base = {k: v for k, v in os.environ.items() if k not in ("DEBUG", "SECRET_KEY")}
    result = subprocess.run(
        [sys.executable, "-c", "import config.wsgi"],
        cwd=ROOT,
        env=base,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert "SECRET_KEY must be set" in result.stderr


def _public_url(env: dict[str, str]) -> str:
    unset = {"BPM_PORT", "BPM_PUBLIC_URL"}
    base = {k: v for k, v in os.environ.items() if k not in unset}
    result = subprocess.run(
        [sys.executable, "-c", "from django.conf import settings; print(settings.BPM_PUBLIC_URL)"],
        cwd=ROOT,
        env={**base, "DJANGO_SETTINGS_MODULE": "config.settings", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_links_follow_the_port_make_run_serves_on_unless_a_public_url_is_set():
    assert _public_url({}) == "http://127.0.0.1:8000"
    assert _public_url({"BPM_PORT": "8600"}) == "http://127.0.0.1:8600"
    public = {"BPM_PORT": "8600", "BPM_PUBLIC_URL": "https://bpm.example.com"}
    assert _public_url(public) == "https://bpm.example.com"
