"""`python -m devtools.database` (run by `make migrate`, so by `make run`): a missing PostgreSQL
database is created, or the reason is one line on stderr, never a traceback."""

import contextlib
import os
import secrets
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest
from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]


def server(role: str | None = None) -> str:
    """The test database's PostgreSQL server (DATABASE_URL) without a database name; as
    `role` (no password) when given. Only the tests marked `postgres` call it: on SQLite
    they are deselected (tests/conftest.py), never pointed at a server nobody named."""
    db = settings.DATABASES["default"]
    user = role or db.get("USER") or ""
    password = "" if role else db.get("PASSWORD") or ""
    secret = f":{quote(password, safe='')}" if password else ""
    credentials = f"{quote(user, safe='')}{secret}@" if user else ""
    port = f":{db['PORT']}" if db.get("PORT") else ""
    return f"postgres://{credentials}{host()}{port}"


def host() -> str:
    return settings.DATABASES["default"].get("HOST") or "localhost"


def run_check(url: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "DATABASE_URL": url}
    return subprocess.run(
        [sys.executable, "-m", "devtools.database"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def admin(statement: str) -> None:
    with psycopg.connect(f"{server()}/postgres", autocommit=True) as conn:
        conn.execute(statement)


def exists(name: str) -> bool:
    with psycopg.connect(f"{server()}/postgres") as conn:
        row = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
    return row is not None


@pytest.mark.postgres
def test_a_missing_database_is_created_once():
    name = f"bpm_created_{secrets.token_hex(4)}"
    try:
        first = run_check(f"{server()}/{name}")
        second = run_check(f"{server()}/{name}")

        assert first.returncode == 0, first.stderr
        assert f'Created database "{name}"' in first.stdout
        assert exists(name)
        assert second.returncode == 0 and second.stdout == ""
    finally:
        admin(f'DROP DATABASE IF EXISTS "{name}"')


@pytest.mark.postgres
def test_without_the_right_to_create_it_says_what_to_do_in_one_line():
    role, name = f"bpm_nocreate_{secrets.token_hex(4)}", f"bpm_missing_{secrets.token_hex(4)}"
    admin(f'CREATE ROLE "{role}" LOGIN NOCREATEDB')
    try:
        result = run_check(f"{server(role)}/{name}")
    finally:
        admin(f'DROP ROLE "{role}"')

    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert f'database "{name}" does not exist' in lines[0]
    assert f"createdb -h {host()} {name}" in lines[0]
    assert not exists(name)


def test_an_unreachable_server_is_one_line_not_a_traceback():
    with socket_on_a_free_port() as port:
        result = run_check(f"postgres://postgres@127.0.0.1:{port}/bpm")

    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"bpm: cannot connect to PostgreSQL at 127.0.0.1:{port}")
    assert "Traceback" not in result.stderr


def test_sqlite_needs_nothing():
    result = run_check("sqlite:///var/never-created.sqlite3")

    assert result.returncode == 0
    assert result.stdout == result.stderr == ""


@contextlib.contextmanager
def socket_on_a_free_port() -> Iterator[int]:
    """A port nothing listens on (bound, not listening, for the test's duration)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]
