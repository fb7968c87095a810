"""An upgrade rehearsal: a database migrated and filled by an older commit's code, then
migrated and read by the code under test (tests/live/test_upgrade.py).

The older tree is exported with `git archive`; both trees run in subprocesses with this
interpreter. fill.py (older code only) writes the data and a plan; snapshot.py (any
version: Django only) reads the database and repeats the plan's requests. run.py is
their entry point.
"""

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

ROOT = Path(__file__).resolve().parents[3]
SCRIPTS = Path(__file__).resolve().parent
STEP_TIMEOUT_SECONDS = 600
CREATE = sql.SQL("CREATE DATABASE {}")
DROP = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")


class UpgradeSetupError(Exception):
    """The rehearsal could not be set up or a step failed; the message says which."""


def commit_hash(commit: str) -> str:
    """The full hash of `commit` in this repository; a clear error when it is missing."""
    found = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}"],
        capture_output=True,
        text=True,
    )
    if found.returncode != 0:
        raise UpgradeSetupError(
            f"commit {commit} is not in the repository at {ROOT}: the upgrade test needs the "
            "history (a full clone, or `git fetch --unshallow`)."
        )
    return found.stdout.strip()


def export_tree(commit: str, destination: Path) -> Path:
    """The files of `commit` (git archive) under `destination`."""
    destination.mkdir(parents=True)
    archive = subprocess.Popen(["git", "-C", str(ROOT), "archive", commit], stdout=subprocess.PIPE)
    extract = subprocess.run(["tar", "-x", "-C", str(destination)], stdin=archive.stdout)
    archive.stdout.close()  # type: ignore[union-attr]
    if archive.wait() != 0 or extract.returncode != 0:
        raise UpgradeSetupError(f"could not export {commit} into {destination}")
    return destination


@contextlib.contextmanager
def scratch_database(tests_database_url: str, directory: Path) -> Iterator[str]:
    """A new, empty database beside the tests' own: PostgreSQL `<tests' name>_upgrade`
    (per xdist worker) on the same server, dropped afterwards; else a SQLite file in
    `directory`."""
    parts = urlsplit(tests_database_url)
    if not parts.scheme.startswith("postgres"):
        yield f"sqlite:///{directory / 'upgrade.sqlite3'}"
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER")  # each worker runs the module's fixture
    name = f"{parts.path.lstrip('/')}_upgrade" + (f"_{worker}" if worker else "")
    server = urlunsplit(parts._replace(path="/postgres"))
    _admin(server, DROP, name)  # left by a killed run
    _admin(server, CREATE, name)
    try:
        yield urlunsplit(parts._replace(path=f"/{name}"))
    finally:
        _admin(server, DROP, name)


def _admin(server_url: str, statement: sql.SQL, database: str) -> None:
    with psycopg.connect(server_url, autocommit=True) as connection:
        connection.execute(statement.format(sql.Identifier(database)))


class Tree:
    """A checkout to run commands in, against one database, with its own scratch folder."""

    def __init__(self, root: Path, *, database_url: str, scratch: Path):
        self.root, self.database_url, self.scratch = root, database_url, scratch

    def environment(self) -> dict[str, str]:
        python_path = [self.root, self.root / "clients" / "python" / "src", SCRIPTS]
        environment = {
            key: value for key, value in os.environ.items() if not key.startswith("REDIS")
        }
        environment.update(
            PYTHONPATH=os.pathsep.join(map(str, python_path)),
            DJANGO_SETTINGS_MODULE="config.settings",
            DATABASE_URL=self.database_url,
            DEBUG="0",
            SECRET_KEY="upgrade-test-key",  # one key for both trees: the mailed link stays valid
            ALLOWED_HOSTS="testserver",
            BPM_VAR_DIR=str(self.scratch / "var"),  # the embedded broker's files
            CELERY_TASK_ALWAYS_EAGER="0",
            LOG_LEVEL="WARNING",
        )
        return environment

    def run(self, *arguments: str) -> None:
        """`python ARGUMENTS` in the tree; UpgradeSetupError with its output if it fails."""
        done = subprocess.run(
            [sys.executable, *arguments],
            cwd=self.root,
            env=self.environment(),
            capture_output=True,
            text=True,
            timeout=STEP_TIMEOUT_SECONDS,
        )
        if done.returncode != 0:
            raise UpgradeSetupError(
                f"`python {' '.join(arguments)}` in {self.root} failed "
                f"({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
            )

    def migrate(self) -> None:
        self.run("manage.py", "migrate", "--noinput")

    def script(self, name: str, *arguments: Path) -> None:
        self.run(str(SCRIPTS / "run.py"), name, *map(str, arguments))


def read_json(path: Path) -> Any:
    return json.loads(path.read_text())
