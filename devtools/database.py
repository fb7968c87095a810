"""`python -m devtools.database`: make sure the configured database can be reached, before
`make run` migrates it. A PostgreSQL database that does not exist is created when the
server allows it; anything else ends in one line that says what to do (not a traceback).

SQLite needs nothing: Django creates the file.
"""

import os
import sys
from collections.abc import Mapping
from typing import Any

import dj_database_url
import psycopg
from psycopg import sql

CONNECT_TIMEOUT_SECONDS = 5
MISSING_DATABASE = "3D000"  # invalid_catalog_name


class DatabaseProblem(Exception):
    """Why the database cannot be used, in one line for a person."""


def _connect(config: Mapping[str, Any], dbname: str) -> psycopg.Connection:
    return psycopg.connect(
        host=config.get("HOST") or None,
        port=config.get("PORT") or None,
        user=config.get("USER") or None,
        password=config.get("PASSWORD") or None,
        dbname=dbname,
        connect_timeout=CONNECT_TIMEOUT_SECONDS,
        autocommit=True,
    )


def _where(config: Mapping[str, Any]) -> str:
    return f"{config.get('HOST') or 'localhost'}:{config.get('PORT') or 5432}"


def _create(config: Mapping[str, Any], name: str) -> None:
    try:
        with _connect(config, "postgres") as server:
            server.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    except psycopg.Error as exc:
        reason = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        raise DatabaseProblem(
            f'database "{name}" does not exist on {_where(config)} and could not be created '
            f"({reason}): create it (createdb -h {config.get('HOST') or 'localhost'} {name}) "
            "or point DATABASE_URL at one that exists"
        ) from exc


def ensure_database(url: str) -> str | None:
    """Check the database at `url`; create it if missing. Returns what was done, if anything."""
    config = dj_database_url.parse(url)
    if "postgresql" not in config["ENGINE"]:
        return None
    name = config["NAME"]
    try:
        _connect(config, name).close()
        return None
    except psycopg.OperationalError as exc:
        if getattr(exc, "sqlstate", None) != MISSING_DATABASE and "does not exist" not in str(exc):
            reason = " ".join(str(exc).split()) or type(exc).__name__
            raise DatabaseProblem(
                f"cannot connect to PostgreSQL at {_where(config)} ({reason}): is it running, "
                "and is DATABASE_URL right?"
            ) from exc
    _create(config, name)
    return f'Created database "{name}" on {_where(config)}.'


def main() -> int:
    url = os.environ.get("DATABASE_URL", "")
    if not url:
        return 0
    try:
        done = ensure_database(url)
    except DatabaseProblem as problem:
        print(f"bpm: {problem}", file=sys.stderr)
        return 2
    if done:
        print(done)
    return 0


if __name__ == "__main__":
    sys.exit(main())
