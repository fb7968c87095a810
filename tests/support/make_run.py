"""A clean copy of the project for the `make run` tests (SQLite, DEBUG=1, `.venv` linked to
this checkout's): the copy (the module-scoped `project` fixture), its environment, and
the Makefile targets started and stopped in it."""

import json
import os
import shutil
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


NOT_PROJECT_FILES = shutil.ignore_patterns(
    ".venv",
    ".git",
    "__pycache__",
    "*.pyc",
    "db.sqlite3",
    "db.sqlite3-journal",
    "var",
    "staticfiles",
    ".pytest_cache",
    ".ruff_cache",
    ".hypothesis",
    "*.egg-info",
    "node_modules",
    "artifacts",
)


def fresh_env(var_dir: Path) -> dict[str, str]:
    """A developer's shell on a fresh machine: DEBUG on, no database or broker configured."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("BPM_", "CELERY_", "DJANGO_"))
        and key not in {"DATABASE_URL", "REDIS_URL", "SECRET_KEY", "PYTHONPATH", "ALLOWED_HOSTS"}
    }
    env.update({"DEBUG": "1", "BPM_VAR_DIR": str(var_dir), "PYTHONDONTWRITEBYTECODE": "1"})
    return env


def manage(app: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=app,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, f"manage.py {' '.join(args)} failed:\n{result.stderr}"
    return result


def procfile_web_command() -> str:
    """The `web:` line of Procfile.dev, exactly as `make run` starts it."""
    for line in (REPO_ROOT / "Procfile.dev").read_text().splitlines():
        if line.startswith("web:"):
            return line.removeprefix("web:").strip()
    raise AssertionError("Procfile.dev has no web line")


def http(
    method: str, url: str, body: dict | None = None, token: str | None = None, timeout: float = 10
):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    app = tmp_path_factory.mktemp("make-run-ports") / "app"
    shutil.copytree(REPO_ROOT, app, ignore=NOT_PROJECT_FILES)
    (app / ".venv").symlink_to(REPO_ROOT / ".venv")
    return app


def make(project: Path, target: str, env: dict[str, str], log: Path) -> subprocess.Popen:
    with log.open("w") as log_file:
        return subprocess.Popen(
            # -o: never reinstall into the shared virtualenv (its stamp may predate pyproject).
            ["make", "--no-print-directory", "-o", ".venv/.installed", target],
            cwd=project,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def project_env(project: Path, tmp_path: Path, port: int) -> dict[str, str]:
    return {**fresh_env(tmp_path / "var"), "BPM_PORT": str(port), "PYTHONPATH": str(project)}


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGINT)  # Ctrl-C
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
