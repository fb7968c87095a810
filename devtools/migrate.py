"""`python -m devtools.migrate COMMAND...` (`make migrate`, so `make run`): runs Django's
``migrate`` (COMMAND) and says in one line what it did, instead of a line per migration.

A first run applies some ninety migrations: their names mean nothing to a newcomer and
push the address of the console off the screen. Their output is kept back and counted;
the system checks' warnings (stderr) pass through as they come; when ``migrate`` fails, all
that it printed is shown, then its exit code returned. Standard library only, like the
other dev tools: it reads the command's output and imports nothing of Django.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from urllib.parse import urlsplit

APPLYING = "Applying "  # Django's line for each migration it applies (verbosity 1)


def database_name(environ: Mapping[str, str]) -> str:
    """Which database DATABASE_URL names, without its credentials (SQLite when unset)."""
    url = environ.get("DATABASE_URL", "").strip()
    if not url:
        return "SQLite db.sqlite3"
    parts = urlsplit(url)
    if parts.scheme.startswith("sqlite"):
        return f"SQLite {parts.path.removeprefix('/') or 'in memory'}"  # sqlite:////abs
    where = f"{parts.hostname or 'localhost'}:{parts.port}" if parts.port else parts.hostname
    return f"{parts.scheme} {parts.path.lstrip('/')} on {where or 'localhost'}"


def applied_count(output: str) -> int:
    """How many migrations ``migrate``'s output says it applied."""
    return sum(1 for line in output.splitlines() if line.strip().startswith(APPLYING))


def summary(output: str) -> str:
    count = applied_count(output)
    done = f"{count} migration{'' if count == 1 else 's'} applied" if count else "up to date"
    return f"database ready ({done})"


def main(argv: list[str] | None = None) -> int:
    command = sys.argv[1:] if argv is None else argv
    if not command:
        print("usage: python -m devtools.migrate COMMAND [ARG...]", file=sys.stderr)
        return 2
    print(f"database: migrating {database_name(os.environ)}", flush=True)
    done = subprocess.run(command, stdout=subprocess.PIPE, text=True, errors="replace")
    if done.returncode != 0:
        sys.stdout.write(done.stdout)
        return done.returncode
    print(summary(done.stdout))
    return 0


if __name__ == "__main__":
    sys.exit(main())
