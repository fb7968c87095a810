"""The client's one implementation of the wire format, with no I/O of its own.

Every operation is a generator that yields `Call` (send this request, send me the
`httpx.Response`) or `Sleep` steps and returns its decoded answer. `Client` runs them with
blocking I/O and `AsyncClient` with `await`, so both speak the API the same way: the same
requests, retries, backoff and waiting loop. A driver throws what went wrong during a step
(`httpx.TransportError`, `KeyboardInterrupt`, `asyncio.CancelledError`) into the generator.
"""

from __future__ import annotations

import dataclasses
import json
import random
import time
from collections.abc import Generator
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar

import httpx

from .errors import ApiError, ConnectionFailed, DecodeError

T = TypeVar("T")

MAX_RETRY_AFTER_SECONDS = 120.0


@dataclasses.dataclass(frozen=True)
class Call:
    """One HTTP request. `idempotent`: safe to send again after it may have reached the server."""

    method: str
    path: str
    params: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    json: Any = None
    headers: dict[str, str] = dataclasses.field(default_factory=dict)
    timeout: float | None = None  # seconds to wait for the answer; None: the client's default
    idempotent: bool = True


@dataclasses.dataclass(frozen=True)
class Sleep:
    seconds: float


Step = Call | Sleep
Op = Generator[Step, Any, T]


@dataclasses.dataclass(frozen=True)
class Retry:
    """When to send a failed call again: exponential backoff with jitter.

    `attempts`: resends allowed after the first try (None: no count). `give_up_after`:
    seconds of consecutive failures after which the call fails anyway (None: no limit).
    """

    attempts: int | None = 4
    give_up_after: float | None = None
    base: float = 0.5
    cap: float = 10.0

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        if retry_after is not None:
            return min(max(retry_after, 0.0), MAX_RETRY_AFTER_SECONDS)
        ceiling = min(self.cap, self.base * 2**attempt)
        return ceiling / 2 + random.uniform(0, ceiling / 2)

    def allows(self, attempt: int, failing_since: float) -> bool:
        if self.attempts is not None and attempt >= self.attempts:
            return False
        if self.give_up_after is not None:
            return time.monotonic() - failing_since < self.give_up_after
        return True


def send(call: Call, retry: Retry) -> Op[Any]:
    """Send `call`, resending per `retry` where that is safe; return the JSON body.

    Resent: connection failures (any call whose request never reached the server, and
    idempotent calls otherwise), 429 and 503 (refused before any work: `Retry-After` is
    honoured), and other 5xx answers to idempotent calls. Anything else raises at once.
    """
    attempt = 0
    failing_since = time.monotonic()
    while True:
        try:
            response = yield call
        except httpx.TransportError as failure:
            if not (_never_sent(failure) or call.idempotent) or not retry.allows(
                attempt, failing_since
            ):
                raise ConnectionFailed(_describe(failure)) from failure
            yield Sleep(retry.delay(attempt))
            attempt += 1
            continue
        if response.status_code < 400:
            return _json_body(response)
        if _resendable(call, response.status_code) and retry.allows(attempt, failing_since):
            yield Sleep(retry.delay(attempt, retry_after(response)))
            attempt += 1
            continue
        raise ApiError.from_envelope(
            response.status_code, _json_or_none(response), response.headers.get("x-request-id")
        )


def _never_sent(error: httpx.TransportError) -> bool:
    return isinstance(error, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout)


def _resendable(call: Call, status_code: int) -> bool:
    if status_code in (429, 503):
        return True
    return call.idempotent and status_code in (500, 502, 504)


def _describe(error: httpx.TransportError) -> str:
    url = error.request.url if _has_request(error) else "the server"
    reason = str(error) or type(error).__name__
    return f"cannot reach {url}: {reason}"


def _has_request(error: httpx.TransportError) -> bool:
    try:
        error.request  # noqa: B018 - raises RuntimeError when the error carries no request
    except RuntimeError:
        return False
    return True


def retry_after(response: httpx.Response) -> float | None:
    """`Retry-After` as seconds (delta or HTTP date), or None."""
    value = response.headers.get("retry-after")
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        return parsedate_to_datetime(value).timestamp() - time.time()
    except (TypeError, ValueError):
        return None


def _json_body(response: httpx.Response) -> Any:
    if response.status_code == 204 or not response.content:
        return None
    try:
        return response.json()
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise DecodeError(f"HTTP {response.status_code}: the answer is not JSON") from error


def _json_or_none(response: httpx.Response) -> Any:
    try:
        return response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
