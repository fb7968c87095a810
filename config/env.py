"""Small typed readers for environment variables, and the settings built from URLs."""

import os
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (1/0, true/false), got {raw!r}")


def env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be an integer, got {raw!r}") from exc


def env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return float(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be a number, got {raw!r}") from exc


def env_list(name: str, default: str = "") -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


def env_origins(name: str) -> list[str]:
    """Comma-separated web origins (scheme://host[:port], no path), e.g. for CORS."""
    origins = env_list(name)
    for origin in origins:
        parts = urlsplit(origin)
        exact = f"{parts.scheme}://{parts.netloc}"
        if parts.scheme not in ("http", "https") or not parts.netloc or origin != exact:
            raise ImproperlyConfigured(
                f"{name} must list origins like https://tool.example or "
                f"http://localhost:5173 (no path, no trailing slash), got {origin!r}"
            )
    return origins


def email_settings(url: str) -> dict[str, object]:
    """Django's EMAIL_* settings from EMAIL_URL: smtp://user:password@host:port (smtps://
    for implicit TLS, ?starttls=1 for STARTTLS) or console:// (mails printed)."""
    parts = urlsplit(url)
    if parts.scheme == "console":
        return {"EMAIL_BACKEND": "django.core.mail.backends.console.EmailBackend"}
    if parts.scheme not in ("smtp", "smtps") or not parts.hostname:
        raise ImproperlyConfigured(
            f"EMAIL_URL must be smtp://host:port, smtps://host:port or console://, got {url!r}"
        )
    query = parse_qs(parts.query)
    return {
        "EMAIL_BACKEND": "django.core.mail.backends.smtp.EmailBackend",
        "EMAIL_HOST": parts.hostname,
        "EMAIL_PORT": parts.port or (465 if parts.scheme == "smtps" else 25),
        "EMAIL_HOST_USER": unquote(parts.username or ""),
        "EMAIL_HOST_PASSWORD": unquote(parts.password or ""),
        "EMAIL_USE_SSL": parts.scheme == "smtps",
        "EMAIL_USE_TLS": query.get("starttls", ["0"])[0] in _TRUE,
    }


def database_settings(url: str) -> dict[str, Any]:
    """DATABASES["default"] for DATABASE_URL, with the DATABASE_POOL_* and timeouts."""
    config: dict[str, Any] = dict(
        dj_database_url.parse(
            url,
            conn_max_age=0,
            # With the pool this would cost a round trip per checkout (each request, each
            # status poll); infra.postgres checks a connection taken from the pool for a
            # cut socket instead, without one.
            conn_health_checks=False,
        )
    )
    if config["ENGINE"] == "django.db.backends.sqlite3":
        # Concurrent web + worker processes on one SQLite file: wait for locks, not fail.
        config["OPTIONS"] = {"timeout": 20, "transaction_mode": "IMMEDIATE"}
        return config
    # Django's backend, checking a connection taken from the pool (infra/postgres/base.py).
    if config["ENGINE"] == "django.db.backends.postgresql":
        config["ENGINE"] = "infra.postgres"
    # Under ASGI every request runs its sync work on a thread of its own, so persistent
    # per-thread connections would leak: a bounded per-process pool hands each request a
    # connection and takes it back at the end. Connections = processes x DATABASE_POOL_MAX.
    # The pool is as large as a web process's threads (BPM_WEB_THREADS + BPM_WAIT_THREADS),
    # so a request waits for the pool only while a connection is being opened: a short
    # timeout is a database that does not answer, and becomes a quick 503 (web/outage.py).
    pool_timeout = env_float("DATABASE_POOL_TIMEOUT", 2.0)
    options = config.setdefault("OPTIONS", {})
    options["pool"] = {
        "min_size": env_int("DATABASE_POOL_MIN", 1),
        "max_size": env_int("DATABASE_POOL_MAX", 12),
        "timeout": pool_timeout,
        # A failed connect is retried once or twice, then given up: the next request that
        # needs a connection tries again at once. (psycopg_pool's default keeps retrying
        # for 5 minutes with a doubling delay, so after a 10 s outage the pool could stay
        # without connections for 15 s or more after the database was back.)
        "reconnect_timeout": pool_timeout,
    }
    # A host that drops packets must not hold one of the pool's few connecting threads.
    options.setdefault("connect_timeout", env_int("DATABASE_CONNECT_TIMEOUT", 5))
    # infra.db.prepared's statements (the hot writes' reads and inserts) are prepared on the
    # server once per pooled connection; Django's own queries bind on the client and are
    # never prepared, whatever this says. Django's default, None, prepares nothing (for
    # PgBouncer in transaction mode: this service needs direct connections, see
    # docs/operations.md). 5 is psycopg's own default.
    options.setdefault("prepare_threshold", 5)
    return config
