"""Shared set-up for the benchmark scripts: Django bootstrap, the database guard, figures.

Benchmarks print figures; they never assert on time (the suite does not time anything).
"""

import argparse
import contextlib
import logging
import os
import re
import resource
import statistics
import sys
import tempfile
import warnings
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Every benchmark row belongs to an agent with this prefix, so --reset finds them all.
AGENT_PREFIX = "bench-agent-"
POLL_AGENT = f"{AGENT_PREFIX}01"
REVIEWER = "bench-reviewer"
TOKEN_NAME = "benchmark (temporary)"


def bootstrap() -> None:
    """Set up Django with the project's settings, production-like (DEBUG off).

    DEBUG and SECRET_KEY default the way `make test` sets them (TEST_ENV); the database is
    whatever DATABASE_URL names.
    """
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("DEBUG", "0")
    os.environ.setdefault("SECRET_KEY", "insecure-benchmark-only-key")
    import django
    from django.conf import settings

    # WhiteNoise warns that STATIC_ROOT is missing (no collectstatic); as in the suite.
    warnings.filterwarnings("ignore", message="No directory at", category=UserWarning)

    django.setup()
    # Expected 404s (the other agent's poll) would log a warning per request.
    logging.getLogger("django.request").setLevel(logging.ERROR)
    # The project logs at INFO; httpx would log every request of the load test.
    for name in ("httpx", "httpcore"):
        logging.getLogger(name).setLevel(logging.WARNING)
    # The in-process test Client sends Host: testserver.
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver", "127.0.0.1", "localhost"]
    # With DEBUG off the console's {% static %} needs collectstatic's manifest; a benchmark
    # should not depend on a collectstatic run (the manifest lookup is one dict access).
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
    # As the web server does once started (config/asgi.py): the in-process requests then
    # meet the collector as the server's do (a full collection of the unfrozen startup
    # heap took 60 ms, landing in whichever request allocated at that moment).
    from web.heap import startup_heap_freeze

    startup_heap_freeze()


def database_label() -> str:
    from django.db import connection

    name = connection.settings_dict["NAME"]
    return f"{connection.vendor}:{Path(str(name)).name if connection.vendor == 'sqlite' else name}"


def guard_database(force: bool) -> None:
    """Refuse a database whose name lacks "bench" (so nobody seeds a real one by mistake)."""
    from django.db import connection

    name = str(connection.settings_dict["NAME"] or "")
    if "bench" in Path(name).name.lower() or force:
        return
    sys.exit(
        f"Refusing to run against database {name!r}: its name does not contain 'bench'.\n"
        "Point DATABASE_URL at a benchmark database (e.g. "
        "postgres://postgres@127.0.0.1:5432/bpm_bench) or pass --force."
    )


def database_ensure() -> None:
    """Create the PostgreSQL database DATABASE_URL names when it does not exist yet.

    Call after guard_database (so only a benchmark database is ever created). Goes through
    the server's maintenance database, as Django's test runner does, on a connection of its
    own that is closed at once.
    """
    from django.db import connection

    if connection.vendor != "postgresql":
        return
    name = connection.settings_dict["NAME"]
    with connection._nodb_cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name])
        if cursor.fetchone() is None:
            cursor.execute(f"CREATE DATABASE {connection.ops.quote_name(name)}")
            print(f"created database {name}")


def percentile(values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile of `values` (pct in 0..100)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(pct / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def summary_ms(seconds: Sequence[float]) -> dict[str, float]:
    ms = [s * 1000 for s in seconds]
    return {
        "p50": percentile(ms, 50),
        "p95": percentile(ms, 95),
        "p99": percentile(ms, 99),
        "mean": statistics.fmean(ms) if ms else float("nan"),
        "max": max(ms) if ms else float("nan"),
    }


def print_table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> None:
    """A plain aligned table; numbers right-aligned."""
    text_rows = [[_cell(v) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in text_rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    numeric = [
        all(_is_number(row[i]) for row in text_rows) and bool(text_rows)
        for i in range(len(headers))
    ]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            c.rjust(w) if num else c.ljust(w)
            for c, w, num in zip(cells, widths, numeric, strict=True)
        ).rstrip()

    print(line(headers))
    print("  ".join("-" * w for w in widths))
    for row in text_rows:
        print(line(row))


def _cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def _is_number(text: str) -> bool:
    return bool(re.fullmatch(r"-?[\d.,]+|nan", text))


_SCAN = re.compile(
    r"(Parallel Seq Scan|Seq Scan|Index Only Scan(?: Backward)?|Index Scan(?: Backward)?|"
    r"Bitmap Index Scan|Bitmap Heap Scan|SEARCH|SCAN)\s+(?:using |on )?(\S+)(?: USING (?:COVERING )?INDEX (\S+))?"
)


def scans(plan: str) -> list[str]:
    """The access paths in an EXPLAIN text (PostgreSQL nodes or SQLite SEARCH/SCAN)."""
    found = []
    for match in _SCAN.finditer(plan):
        kind, target, sqlite_index = match.groups()
        if kind in ("SEARCH", "SCAN"):
            found.append(f"{kind} {target}" + (f" ({sqlite_index})" if sqlite_index else ""))
        elif kind == "Bitmap Heap Scan":
            continue  # its Bitmap Index Scan child names the index
        else:
            found.append(f"{kind} {target}")
    return list(dict.fromkeys(found))


def explain(sql: str) -> str:
    """EXPLAIN (ANALYZE, BUFFERS) on PostgreSQL, EXPLAIN QUERY PLAN on SQLite, of `sql`.

    `sql` is a query as Django logged it (parameters already interpolated), so the plan is
    the plan of exactly what the endpoint ran.
    """
    from django.db import connection

    if sql in _PLANS:
        return _PLANS[sql]
    # Only a SELECT is run by ANALYZE: EXPLAIN ANALYZE of an UPDATE would apply it.
    analyze = sql.lstrip().upper().startswith("SELECT")
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(("EXPLAIN (ANALYZE, BUFFERS) " if analyze else "EXPLAIN ") + sql)
            _PLANS[sql] = "\n".join(row[0] for row in cursor.fetchall())
            return _PLANS[sql]
        cursor.execute("EXPLAIN QUERY PLAN " + sql)
        _PLANS[sql] = "\n".join(" ".join(str(c) for c in row[1:]) for row in cursor.fetchall())
        return _PLANS[sql]


_PLANS: dict[str, str] = {}


def execution_ms(plan: str) -> str:
    match = re.search(r"Execution Time: ([\d.]+) ms", plan)
    return f"{float(match.group(1)):.2f}" if match else "-"


def peak_rss_mib() -> float:
    """Peak resident set size of this process (ru_maxrss: KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def add_database_arguments(parser: argparse.ArgumentParser) -> None:
    """--use-database-url and --force, for a script that runs on its own SQLite otherwise."""
    parser.add_argument(
        "--use-database-url",
        action="store_true",
        help="use DATABASE_URL (its name must contain 'bench') instead of a temporary SQLite",
    )
    parser.add_argument("--force", action="store_true", help="allow a database without 'bench'")


@contextlib.contextmanager
def standalone_database(args: argparse.Namespace, name: str) -> Iterator[None]:
    """Django set up on DATABASE_URL (with --use-database-url, guarded) or on a temporary
    SQLite file named after the script, migrated; the temporary one is removed after."""
    workdir = None
    if not args.use_database_url:
        workdir = tempfile.TemporaryDirectory(prefix=f"bpm-{name}-")
        os.environ["DATABASE_URL"] = f"sqlite:///{Path(workdir.name) / f'{name}_bench.sqlite3'}"
    bootstrap()
    guard_database(args.force)
    from django.core.management import call_command
    from django.db import connections

    call_command("migrate", verbosity=0)  # after the guard, as seed.py does
    try:
        yield
    finally:
        if workdir is not None:
            connections.close_all()
            workdir.cleanup()


# The writes measured (http_bench.py, write_paths.py), the same on the project and on its
# raw-SQL floor: a create (a small payload with one markdown file, a tag) and a reviewer's release.
CREATE_BODY = {
    "title": "Deploy the billing service",
    "payload": {
        "question": "Deploy billing 4.2 to production?",
        "context": {
            "files": [{"path": "plan.md", "format": "markdown", "content": "# Plan\n\n" * 40}]
        },
    },
    "tags": ["deploy"],
    "ttlSeconds": 3600,
}
RELEASE_BODY = {"comment": "ok", "release": True}
