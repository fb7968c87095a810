"""`make migrate` (so `make run`): Django's migrate run by devtools/migrate.py, which says in
one line what it did, or, when migrate fails, shows all that it printed and its exit code."""

import subprocess
import sys

from devtools.migrate import database_name
from tests.support.project import ROOT

MIGRATE_OUTPUT = (
    "Operations to perform:\n"
    "  Apply all migrations: accounts, breakpoints\n"
    "Running migrations:\n"
    "  Applying accounts.0001_initial... OK\n"
    "  Applying breakpoints.0001_initial... OK\n"
)


def run(shell: str, **env: str) -> subprocess.CompletedProcess:
    """devtools.migrate with `shell` standing in for `manage.py migrate`."""
    return subprocess.run(
        [sys.executable, "-m", "devtools.migrate", "sh", "-c", shell],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_migrations_applied_are_one_line():
    done = run(f"printf '{MIGRATE_OUTPUT}'")

    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "database: migrating SQLite db.sqlite3",
        "database ready (2 migrations applied)",
    ]


def test_nothing_to_apply_says_up_to_date():
    done = run("echo 'Running migrations:'; echo '  No migrations to apply.'")

    assert done.stdout.splitlines()[-1] == "database ready (up to date)"


def test_a_failed_migrate_shows_all_it_printed_and_its_exit_code():
    done = run(f"printf '{MIGRATE_OUTPUT}'; echo 'boom: no such table' >&2; exit 3")

    assert done.returncode == 3
    assert "Applying breakpoints.0001_initial... OK" in done.stdout
    assert "database ready" not in done.stdout
    assert "boom: no such table" in done.stderr  # migrate's stderr passes through


def test_the_database_is_named_without_its_credentials():
    url = "postgres://bpm:s3cret@db.internal:5433/bpm"

    assert database_name({"DATABASE_URL": url}) == "postgres bpm on db.internal:5433"
    assert "s3cret" not in database_name({"DATABASE_URL": url})
    assert database_name({}) == "SQLite db.sqlite3"
    assert database_name({"DATABASE_URL": "sqlite:////srv/bpm.db"}) == "SQLite /srv/bpm.db"
