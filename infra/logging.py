"""Log records carry the context of what produced them: the request id (or "-"), and when
known the agent or user, the token prefix and the breakpoint id; JSON lines in production.

The context comes from the request being served (LogContextMiddleware) or, in a Celery
worker, from the headers of the task message (infra/celery_signals.py), so a task's lines carry
the request id of the request that enqueued it.
"""

import json
import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote_plus

from django.utils.functional import LazyObject, empty

current_request_id: ContextVar[str] = ContextVar("current_request_id", default="-")
# The Django request being served in this context (set by LogContextMiddleware).
current_request: ContextVar[Any] = ContextVar("current_request", default=None)
# Fields carried over from elsewhere: a Celery task's headers (agent, token, breakpoint_id).
log_context: ContextVar[dict[str, str]] = ContextVar("log_context", default={})  # noqa: B039 - never mutated

CONTEXT_FIELDS = ("agent", "user", "token", "breakpoint_id")

# What every LogRecord has; anything else on a record came from `extra={...}`.
STANDARD_RECORD_FIELDS = frozenset(
    vars(logging.LogRecord("", logging.INFO, "", 0, "", None, None))
) | {"message", "asctime", "request_id", "taskName", "color_message"}

# Secrets that travel in URLs: an email decision link's one-time token, and the value of
# any query parameter whose key names a credential (the JIRA webhook's ?secret=; a token,
# password, API key or signature a client put in a URL; an OpenID Connect callback's
# ?code= and ?state=: a code is a credential until it is redeemed, the state binds it to
# the browser that asked). Access logs and Django's own request warnings print paths and
# query strings as sent.
SECRET_IN_URL = re.compile(
    r"(?P<link>/decide/)[^/?#\s\"']+"
    r"|(?P<lead>[?&;])(?P<key>[^=&;#?\s\"']+)=(?P<value>[^&;#\s\"']*)",
    re.IGNORECASE,
)
# A key as the server reads it: percent-decoded and in any case (?SECRET=, ?%73ecret=).
SECRET_KEY_NAME = re.compile(r"secret|token|passw|api[-_]?key|signature|^sig$|^code$|^state$")
REDACTED = "[redacted]"


def request_fields(request: Any) -> dict[str, str]:
    """Who and what a request is about, as far as it is known already.

    Reads only what authentication already set: logging must never trigger a session or
    token lookup.
    """
    fields: dict[str, str] = {}
    attrs = request.__dict__
    user = attrs.get("user")
    if isinstance(user, LazyObject):
        user = user.__dict__.get("_wrapped", empty)
        user = None if user is empty else user
    if user is not None and getattr(user, "is_authenticated", False):
        agent_id = getattr(user, "agent_id", None)
        if agent_id:
            fields["agent"] = str(agent_id)
        elif getattr(user, "username", ""):
            fields["user"] = str(user.username)
    prefix = getattr(attrs.get("auth"), "prefix", None)
    if prefix:
        fields["token"] = str(prefix)
    if attrs.get("log_breakpoint_id"):
        fields["breakpoint_id"] = str(attrs["log_breakpoint_id"])
    return fields


def current_context() -> dict[str, str]:
    """The request id and context fields of whatever is running now."""
    fields = dict(log_context.get())
    request = current_request.get()
    if request is not None:
        fields.update(request_fields(request))
    fields["request_id"] = current_request_id.get()
    return fields


def context_adopt(fields: dict[str, Any]) -> tuple[Token[str], Token[dict[str, str]]]:
    """Make `fields` (another process's current_context(): a task's headers, a row's) the
    context of what runs now; the tokens undo it (context_restore)."""
    return (
        current_request_id.set(str(fields.get("request_id", "-"))),
        log_context.set({k: str(v) for k, v in fields.items() if k != "request_id"}),
    )


def context_restore(tokens: tuple[Token[str], Token[dict[str, str]]]) -> None:
    current_request_id.reset(tokens[0])
    log_context.reset(tokens[1])


@contextmanager
def adopted_context(fields: dict[str, Any]) -> Iterator[None]:
    """Run a block in the context `fields` describe (context_adopt), then restore."""
    tokens = context_adopt(fields)
    try:
        yield
    finally:
        context_restore(tokens)


class RequestIDFilter(logging.Filter):
    """Puts request_id (and the known context fields) on every record, unless the call
    gave them itself (`extra={"breakpoint_id": ...}`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        for name, value in current_context().items():
            if not hasattr(record, name):
                setattr(record, name, value)
        return True


def redact(text: str) -> str:
    """`text` with the secrets of SECRET_IN_URL replaced by [redacted]."""
    return SECRET_IN_URL.sub(_redacted_match, text)


def _redacted_match(match: re.Match[str]) -> str:
    if match["link"]:
        return match["link"] + REDACTED
    key, value = match["key"], match["value"]
    if value and secret_key_name(key):
        return f"{match['lead']}{key}={REDACTED}"
    # Another parameter's value may hold a URL of its own (?next=/x?secret=...).
    return f"{match['lead']}{key}={redact(value)}"


def secret_key_name(key: str) -> bool:
    """Whether a query key names a credential, read as the server reads it: decoded (a
    proxy may decode once more: at most three times) and in any case."""
    for _ in range(3):
        decoded = unquote_plus(key)
        if decoded == key:
            break
        key = decoded
    return SECRET_KEY_NAME.search(key.lower()) is not None


class RedactSecretsFilter(logging.Filter):
    """Removes URL secrets from a record's message and arguments before it is written."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = redact(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(redact(a) if isinstance(a, str) else a for a in record.args)
        return True


class RoutineTaskLinesFilter(logging.Filter):
    """Drops the per-task lines below `level`: "Task … received", "Task … succeeded" and
    beat's "Sending due task" (sweeps run every few seconds: ~60 lines a minute while idle).
    Failures and retries (WARNING and up) and every other line pass."""

    PER_TASK = ("celery.worker.strategy", "celery.app.trace")
    SCHEDULED = "Scheduler: Sending due task"

    def __init__(self, level: str = "WARNING") -> None:
        super().__init__()
        self.level = logging.getLevelName(level.upper())
        if not isinstance(self.level, int):
            self.level = logging.WARNING

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= self.level:
            return True
        if record.name in self.PER_TASK:
            return False
        return not (record.name == "celery.beat" and str(record.msg).startswith(self.SCHEDULED))


def redact_server_access_logs() -> None:
    """The web servers' access loggers write through their own handlers, not ours."""
    for name in ("uvicorn.access", "gunicorn.access", "uvicorn.error", "gunicorn.error"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactSecretsFilter) for f in logger.filters):
            logger.addFilter(RedactSecretsFilter())


class JSONFormatter(logging.Formatter):
    """One JSON object per line: timestamp, level, logger, message, request_id, the
    context fields that are known, and whatever the call passed in `extra`."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "timestamp": datetime.fromtimestamp(record.created, tz=UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", "-"),
        }
        for name in CONTEXT_FIELDS:
            value = getattr(record, name, None)
            if value not in (None, ""):
                entry[name] = value
        for name, value in vars(record).items():
            if name not in STANDARD_RECORD_FIELDS and name not in entry:
                entry[name] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        # The whole line: extras such as Django's `request` (its repr prints the path),
        # exception texts and stacks may carry a URL secret too.
        return redact(json.dumps(entry, ensure_ascii=False, default=str))


class PlainFormatter(logging.Formatter):
    """The development format, redacted as a whole line like the JSON one."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


def logging_settings(*, log_format: str, timestamps: bool, level: str, task_level: str) -> dict:
    """settings.LOGGING: one console handler, JSON or plain, redacted, with request ids.

    `timestamps` false leaves the time out of plain lines (make run's supervisor stamps
    each line itself); `task_level` is what RoutineTaskLinesFilter lets through.
    """
    plain = ("%(asctime)s " if timestamps else "") + (
        "%(levelname)s %(name)s [%(request_id)s] %(message)s"
    )
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {
            "request_id": {"()": "infra.logging.RequestIDFilter"},
            "redact_secrets": {"()": "infra.logging.RedactSecretsFilter"},
            "routine_task_lines": {
                "()": "infra.logging.RoutineTaskLinesFilter",
                "level": task_level,
            },
        },
        "formatters": {
            "plain": {"()": "infra.logging.PlainFormatter", "fmt": plain},
            "json": {"()": "infra.logging.JSONFormatter"},
        },
        "handlers": {
            "console": {
                "class": "logging.StreamHandler",
                "formatter": log_format,
                "filters": ["request_id", "redact_secrets", "routine_task_lines"],
            }
        },
        "root": {"handlers": ["console"], "level": level},
        "loggers": {"axes.apps": {"level": "WARNING"}},  # "AXES: BEGIN ..." at every start
    }
