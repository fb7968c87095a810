"""The suite on several processes (pytest-xdist, `make test` runs one per core): each worker
has a test database of its own (pytest-django names it `<name>_gw0`, `<name>_gw1`, ...; on
SQLite each has its own in-memory or temporary file) and a Redis number of its own, set here.

Loaded with `-p tests.support.workers` (pyproject's addopts), before Django's settings are
read: a worker's REDIS_URL names the database number after the one given, per worker
(REDIS_URL=redis://127.0.0.1:6379/4 gives gw0 number 4, gw1 number 5, ...), wrapping at 16,
the server's default count.
"""

import os
from urllib.parse import urlsplit, urlunsplit

REDIS_DATABASES = 16


def worker_index() -> int | None:
    """This process's xdist worker number (gw3 is 3), or None when the suite runs in one."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else None


def redis_url_for_worker(url: str, index: int) -> str:
    """`url` with its database number moved up by `index` (modulo 16)."""
    parts = urlsplit(url)
    path = parts.path.lstrip("/")
    base = int(path) if path.isdigit() else 0
    return urlunsplit(parts._replace(path=f"/{(base + index) % REDIS_DATABASES}"))


def _give_this_worker_its_redis_number() -> None:
    index = worker_index()
    url = os.environ.get("REDIS_URL", "")
    if index is not None and url.startswith(("redis://", "rediss://")):
        os.environ["REDIS_URL"] = redis_url_for_worker(url, index)


_give_this_worker_its_redis_number()
