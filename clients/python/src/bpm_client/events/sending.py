"""Sign and post one event to the service: the path every local sender takes.

The data is a JSON object, signed as a generic-hmac delivery (X-Bpm-Timestamp,
X-Bpm-Signature over "<timestamp>.<body>", X-Bpm-Event-Id, X-Bpm-Event-Type) and posted
with httpx to <url>/api/events/<source>. Every failure is a SendError whose message is
one line a person can act on.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import sys
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import httpx

from ..config import DEFAULT_URL, URL_VARIABLE
from ..errors import BpmError

SECRET_ENV = "BPM_EVENT_SECRET"
DEFAULT_TIMEOUT = 10.0
MAX_TIMEOUT = 300.0
# The service's limits (core.limits on the server; a test keeps the two equal).
MAX_EVENT_TYPE_LENGTH = 100
MAX_DELIVERY_ID_LENGTH = 200
# An event source's name, as the service accepts it (triggers.services.config.NAME).
SOURCE_NAME = re.compile(r"^[a-z0-9]+(?:[-_][a-z0-9]+)*$")


class SendError(BpmError):
    """An event that was not sent or not accepted; str() is the reason, in one line."""


@dataclass(frozen=True)
class Sent:
    """The service's answer: the stored event's id, and whether it had it already."""

    event_id: str
    duplicate: bool

    def as_dict(self) -> dict[str, Any]:
        return {"eventId": self.event_id, "duplicate": self.duplicate}

    def line(self) -> str:
        """`Event evt_... accepted.` (and whether it was a duplicate)."""
        again = " (a duplicate: already received)" if self.duplicate else ""
        return f"Event {self.event_id} accepted{again}."


def resolve_url(url: str | None) -> str:
    """The given URL, else $BPM_URL, else the local development server; an http(s) base URL."""
    chosen = (url or os.environ.get(URL_VARIABLE) or DEFAULT_URL).strip().rstrip("/")
    parts = urlsplit(chosen)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise SendError(f"The service URL must be http(s)://host[:port], not {chosen!r}.")
    return chosen


def resolve_secret(secret: str | None, source: str) -> str:
    """--secret, else $BPM_EVENT_SECRET; SendError saying where to put it when neither is."""
    chosen = secret or os.environ.get(SECRET_ENV)
    if not chosen:
        raise missing_secret(source)
    return chosen


def missing_secret(source: str) -> SendError:
    return SendError(
        f"No secret for source {source!r}: pass --secret or set ${SECRET_ENV} "
        "(the source's secret, shown when it was added)."
    )


def check_timeout(timeout: float, limit: float = MAX_TIMEOUT) -> float:
    if not 0 < timeout <= limit:
        raise SendError(f"--timeout must be more than 0 and at most {limit:g} seconds.")
    return timeout


def parse_data(text: str | None) -> dict[str, Any]:
    """--data: a JSON object, or @file (a path; @- for stdin); {} when not given."""
    if text is None or text == "":
        return {}
    if text.startswith("@"):
        text = _read_data_file(text[1:])
    try:
        data = json.loads(text, parse_constant=_no_constant)
    except ValueError as exc:
        raise SendError(f"--data is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise SendError("--data must be a JSON object ({...}).")
    return data


def _read_data_file(name: str) -> str:
    if not name:
        raise SendError("--data @ needs a file name (or @- for stdin).")
    try:
        if name == "-":
            return sys.stdin.read()
        return Path(name).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SendError(f"--data file not found: {name}") from None
    except (OSError, UnicodeError) as exc:
        raise SendError(f"Cannot read the --data file {name}: {_reason(exc)}") from None


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def check_label(value: str, what: str, limit: int) -> str:
    """An event type or delivery id as the service accepts it: 1 to limit characters."""
    value = value.strip()
    if not value or len(value) > limit or not value.isprintable():  # NUL is not printable
        raise SendError(f"{what} must be 1 to {limit} printable characters.")
    return value


def encode(data: Mapping[str, Any]) -> bytes:
    """The body: compact UTF-8 JSON (NaN and Infinity refused, as the service does)."""
    try:
        text = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        return text.encode("utf-8")
    except (TypeError, ValueError, UnicodeError) as exc:
        raise SendError(f"The event data cannot be sent as JSON: {exc}") from None


def signature(secret: str, body: bytes, timestamp: int) -> str:
    """X-Bpm-Signature: `sha256=` and the hex HMAC-SHA256 of "<timestamp>.<body>"."""
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return "sha256=" + digest.hexdigest()


def signed_headers(
    secret: str, body: bytes, *, event_type: str, delivery_id: str, timestamp: int | None = None
) -> dict[str, str]:
    """The generic-hmac headers of one delivery (the server's triggers.verification checks them)."""
    stamp = int(time.time()) if timestamp is None else timestamp
    return {
        "Content-Type": "application/json",
        "X-Bpm-Timestamp": str(stamp),
        "X-Bpm-Signature": signature(secret, body, stamp),
        "X-Bpm-Event-Id": delivery_id,
        "X-Bpm-Event-Type": event_type,
    }


def event_url(base_url: str, source: str) -> str:
    return f"{base_url.rstrip('/')}/api/events/{quote(source, safe='')}"


def send(
    *,
    url: str,
    source: str,
    event_type: str,
    data: Mapping[str, Any],
    secret: str,
    delivery_id: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> Sent:
    """Sign and post one event; the service's answer, or SendError saying why not."""
    check_timeout(timeout)
    event_type = check_label(event_type, "The event type", MAX_EVENT_TYPE_LENGTH)
    delivery = check_label(delivery_id or str(uuid.uuid4()), "The event id", MAX_DELIVERY_ID_LENGTH)
    body = encode(data)
    headers = signed_headers(secret, body, event_type=event_type, delivery_id=delivery)
    target = event_url(url, source)
    try:
        response = httpx.post(target, content=body, headers=headers, timeout=timeout)
    except httpx.TimeoutException:
        raise SendError(f"{url} did not answer within {timeout:g} s.") from None
    except httpx.HTTPError as exc:
        raise SendError(f"Cannot reach {url}: {_reason(exc)}.") from None
    return _answer(response, source)


def _answer(response: httpx.Response, source: str) -> Sent:
    status = response.status_code
    body = _json_or_none(response)
    if status in (200, 202) and isinstance(body, dict) and isinstance(body.get("eventId"), str):
        return Sent(event_id=body["eventId"], duplicate=bool(body.get("duplicate")))
    message = _error_message(body) or response.reason_phrase or "no message"
    if status == 401:
        why = message.removeprefix("The event's signature was refused: ").rstrip(".")
        raise SendError(
            f"The service refused the signature for source {source!r}: {why}. "
            f"Check the secret (--secret or ${SECRET_ENV}) and this machine's clock."
        )
    if status == 404:
        raise SendError(f"The service has no enabled event source named {source!r} (404).")
    raise SendError(f"The service answered {status}: {message}")


def _json_or_none(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def _error_message(body: Any) -> str | None:
    """The message of the service's error envelope {"error": {"code", "message"}}."""
    error = body.get("error") if isinstance(body, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    return " ".join(str(message).split())[:300] if message else None


def _reason(exc: BaseException) -> str:
    """An exception as a short phrase (httpx's ConnectError text is the OS's)."""
    text = " ".join(str(exc).split())
    return text[:200] or type(exc).__name__
