"""The environment the settings read (twelve-factor): django-environ's `Env`, held to a strict
parse, and the settings built from URLs (a database's, with its pool; a mail server's).

Stricter than django-environ on purpose: a bad value stops the process with a message that
names the variable, never a quiet default. A boolean is 1/0, true/false, yes/no or on/off
(django-environ reads anything else as false); an empty number is its default; a number is
Python's own literal (django-environ drops the characters it does not expect); a list item
is stripped of spaces; and a value starting with "$" is that value (a secret or password may
start so), never the name of another variable to read instead.
"""

from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import environ
from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}
# What a value that does not parse was meant to be, for the error naming its variable.
_KINDS = {bool: "a boolean (1/0, true/false)", int: "an integer", float: "a number"}


# DATABASE_POOLER: "" (direct connections, or a pooler in session mode) or "transaction".
TRANSACTION_POOLER = "transaction"
POOLERS = ("", "session", TRANSACTION_POOLER)


class Env(environ.Env):
    def get_value(
        self, var: str, cast: Any = None, default: Any = environ.Env.NOTSET, parse_default=False
    ) -> Any:
        """`var`'s value cast as `cast`, or `default` when it is unset (or empty, for a
        number); ImproperlyConfigured naming `var` when there is no default or it does not
        parse."""
        raw = self.ENVIRON.get(var)
        if raw is None or (cast in (int, float) and raw.strip() == ""):
            if default is self.NOTSET:
                raise ImproperlyConfigured(f"Set the {var} environment variable")
            return default
        try:
            return self.parse_value(raw, cast)
        except ValueError as exc:
            raise ImproperlyConfigured(f"{var} must be {_KINDS[cast]}, got {raw!r}") from exc

    @classmethod
    def parse_value(cls, value: str, cast: Any) -> Any:
        if cast is bool:
            word = value.strip().lower()
            if word not in _TRUE | _FALSE:
                raise ValueError(value)
            return word in _TRUE
        if cast is float:
            return float(value)
        if cast is list:
            return [item.strip() for item in value.split(",") if item.strip()]
        return super().parse_value(value, cast)

    def origins(self, var: str) -> list[str]:
        """Comma-separated web origins (scheme://host[:port], no path), e.g. for CORS."""
        origins = self.list(var, default=[])
        for origin in origins:
            parts = urlsplit(origin)
            exact = f"{parts.scheme}://{parts.netloc}"
            if parts.scheme not in ("http", "https") or not parts.netloc or origin != exact:
                raise ImproperlyConfigured(
                    f"{var} must list origins like https://tool.example or "
                    f"http://localhost:5173 (no path, no trailing slash), got {origin!r}"
                )
        return origins

    def database(
        self,
        var: str,
        default: str,
        *,
        pool_min: int,
        pool_max: int,
        pool_timeout: float,
        connect_timeout: int,
        pooler: str = "",
    ) -> dict[str, Any]:
        """DATABASES["default"] for the database URL in `var`; on PostgreSQL, Django's
        backend as infra.postgres, drawing from a pool of pool_min to pool_max connections
        (psycopg_pool's options: settings.py says why these). `pooler`: "transaction" when
        the URL is a pooler in transaction mode (PgBouncer's pool_mode=transaction), which
        keeps no session state between transactions: no statement is prepared on the
        server and no server-side cursor is opened (each lives in a session)."""
        _require_pooler(pooler)
        config: dict[str, Any] = self.db_url(var, default=default)
        # A socket folder may be given as the host, percent-encoded (postgres://u@%2Frun/db).
        config["HOST"] = unquote(config["HOST"])
        config["CONN_MAX_AGE"] = 0
        # With the pool this would cost a round trip per checkout (each request, each status
        # poll); infra.postgres checks a connection taken from the pool for a cut socket
        # instead, without one.
        config["CONN_HEALTH_CHECKS"] = False
        config["DISABLE_SERVER_SIDE_CURSORS"] = False
        if config["ENGINE"] == "django.db.backends.sqlite3":
            # Concurrent web + worker processes on one SQLite file: wait for locks, not fail.
            config["OPTIONS"] = {"timeout": 20, "transaction_mode": "IMMEDIATE"}
            return config
        # Django's backend, checking a connection taken from the pool (infra/postgres/base.py).
        if config["ENGINE"] == "django.db.backends.postgresql":
            config["ENGINE"] = "infra.postgres"
        options = config.setdefault("OPTIONS", {})
        options["pool"] = {
            "min_size": pool_min,
            "max_size": pool_max,
            "timeout": pool_timeout,
            # A failed connect is retried once or twice, then given up: the next request that
            # needs a connection tries again at once. (psycopg_pool's default keeps retrying
            # for 5 minutes with a doubling delay, so after a 10 s outage the pool could stay
            # without connections for 15 s or more after the database was back.)
            "reconnect_timeout": pool_timeout,
        }
        # A host that drops packets must not hold one of the pool's few connecting threads.
        options.setdefault("connect_timeout", connect_timeout)
        # infra.db.prepared's statements (the hot writes' reads and inserts) are prepared on
        # the server once per pooled connection; Django's own queries bind on the client and
        # are never prepared, whatever this says. Django's default, None, prepares nothing
        # (for PgBouncer in transaction mode: this service needs direct connections, see
        # docs/operations.md). 5 is psycopg's own default.
        options.setdefault("prepare_threshold", 5)
        if pooler == TRANSACTION_POOLER:
            options["prepare_threshold"] = None
            config["DISABLE_SERVER_SIDE_CURSORS"] = True
        return config

    def email(self, var: str) -> dict[str, object]:
        """Django's EMAIL_* settings from the URL in `var`: smtp://user:password@host:port
        (smtps:// for implicit TLS, ?starttls=1 for STARTTLS) or console:// (mails printed);
        nothing when it is unset or empty."""
        url = self.str(var, default="")
        if not url:
            return {}
        parts = urlsplit(url)
        if parts.scheme == "console":
            return {"EMAIL_BACKEND": "django.core.mail.backends.console.EmailBackend"}
        if parts.scheme not in ("smtp", "smtps") or not parts.hostname:
            raise ImproperlyConfigured(
                f"{var} must be smtp://host:port, smtps://host:port or console://, got {url!r}"
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


def _require_pooler(pooler: str) -> None:
    if pooler not in POOLERS:
        raise ImproperlyConfigured(
            f"DATABASE_POOLER must be one of {', '.join(repr(p) for p in POOLERS)} "
            f"(docs/deploy.md), got {pooler!r}"
        )
