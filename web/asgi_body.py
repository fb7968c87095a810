"""ASGI middleware: every request body is read whole, in the event loop, before Django.

Django runs as WSGI on BPM_WEB_THREADS threads (web.asgi_wsgi). A WSGI bridge takes a
thread at once and lets the view pull the body from wsgi.input as it arrives, so a client that sent
its headers and then trickled (or stopped sending) its body held a thread for as long as
it liked: a few dozen such connections stalled every Django request. Here the
body is read first, where waiting costs no thread:

- a Content-Length over BPM_MAX_BODY_BYTES is refused with 413 before anything is read,
  and a body without one (chunked) is refused as soon as it passes the limit; a chunked
  body is handed on with the Content-Length it turned out to have (Django's WSGI handler
  reads only as much as that says);
- the whole body must arrive within BPM_BODY_READ_SECONDS of the headers: past that the
  request is answered 408 `request_timeout`;
- one client address (web.asgi_http.scope_address) may have BPM_MAX_UPLOADS_PER_ADDRESS
  bodies arriving at once in this process; a request beyond that is answered 429 at once,
  unread, rather than queued (a queued one would still hold its socket and its place).

A request without a body (no Content-Length, or 0, and no Transfer-Encoding) goes straight
through, whatever the address's uploads: the probes and reads are never held back. The
refusals close the connection (the rest of the body is never read).
"""

import asyncio
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from django.template.defaultfilters import pluralize

from web.asgi_http import header, request_id, scope_address, send_json
from web.asgi_wsgi import BODY
from web.errors import envelope

Scope = dict[str, Any]
Message = dict[str, Any]
RETRY_AFTER_SECONDS = 1  # an upload slot frees as soon as one of the address's bodies ends
CLOSE = (b"connection", b"close")


class _TooLarge(Exception):
    """The body passed BPM_MAX_BODY_BYTES."""


class _Gone(Exception):
    """The client left before its body was whole: nobody to answer."""


class BufferedBodyApp:
    """Hands `app` every HTTP request with its whole body and a Content-Length."""

    def __init__(self, app: Any):
        self.app = app
        self.uploads: Counter[str] = Counter()  # client address -> bodies arriving now

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not _has_body(scope):
            await self.app(scope, receive, send)
            return
        limit = settings.BPM_MAX_BODY_BYTES
        if _declared_length(scope) > limit:
            await _too_large(scope, send, limit)
            return
        address = scope_address(scope)
        if self.uploads[address] >= settings.BPM_MAX_UPLOADS_PER_ADDRESS:
            await _too_many_uploads(scope, send)
            return
        seconds = settings.BPM_BODY_READ_SECONDS
        try:
            with self._uploading(address):
                async with asyncio.timeout(seconds):
                    body = await _read_body(receive, limit)
        except _Gone:
            return
        except _TooLarge:
            await _too_large(scope, send, limit)
            return
        except TimeoutError:
            await _timed_out(scope, send, seconds)
            return
        # The body also under BODY: web.asgi_wsgi hands it to Django from memory.
        scope = {**_with_length(scope, len(body)), BODY: body}
        await self.app(scope, _replay(body, receive), send)

    @contextmanager
    def _uploading(self, address: str) -> Iterator[None]:
        """Count one more body arriving from `address` while the block runs."""
        self.uploads[address] += 1
        try:
            yield
        finally:
            self.uploads[address] -= 1
            if not self.uploads[address]:
                del self.uploads[address]


def _has_body(scope: Scope) -> bool:
    length = header(scope, b"content-length")
    return header(scope, b"transfer-encoding") is not None or length not in (None, "0")


def _declared_length(scope: Scope) -> int:
    """The Content-Length, or 0 when there is none (the server has checked its form)."""
    try:
        return int(header(scope, b"content-length") or 0)
    except ValueError:
        return 0  # Django's BodySizeLimitMiddleware answers it 400


async def _read_body(receive: Any, limit: int) -> bytes:
    """The request body, all of it (raises _TooLarge past `limit`, _Gone on a disconnect)."""
    chunks: list[bytes] = []
    size = 0
    more_body = True
    while more_body:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _Gone
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise _TooLarge
        chunks.append(chunk)
        more_body = message.get("more_body", False)
    return b"".join(chunks)


def _with_length(scope: Scope, length: int) -> Scope:
    """The scope with Content-Length set (and Transfer-Encoding gone: the body is whole)."""
    headers = [
        (key, value)
        for key, value in scope.get("headers", [])
        if key.lower() not in (b"content-length", b"transfer-encoding")
    ]
    if length:
        headers.append((b"content-length", str(length).encode("ascii")))
    return {**scope, "headers": headers}


def _replay(body: bytes, receive: Any) -> Any:
    """A receive() that yields the whole body once, then the server's (a disconnect)."""
    pending = True

    async def replay() -> Message:
        nonlocal pending
        if pending:
            pending = False
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _too_large(scope: Scope, send: Any, limit: int) -> None:
    """The same 413 as BodySizeLimitMiddleware's, said before the body is all read."""
    body = envelope(
        "payload_too_large", f"Request body is over the limit of {limit} bytes.", {"limit": limit}
    )
    await send_json(send, 413, body, request_id(scope), [CLOSE])


async def _timed_out(scope: Scope, send: Any, seconds: float) -> None:
    body = envelope(
        "request_timeout",
        f"The request body did not arrive within {seconds:g} second{pluralize(seconds)}.",
        {"limit": seconds},
    )
    await send_json(send, 408, body, request_id(scope), [CLOSE])


async def _too_many_uploads(scope: Scope, send: Any) -> None:
    limit = settings.BPM_MAX_UPLOADS_PER_ADDRESS
    body = envelope(
        "throttled",
        f"Too many request bodies are arriving from this address (at most {limit} at once); "
        "retry shortly.",
        {"retryAfter": RETRY_AFTER_SECONDS},
    )
    retry_after = (b"retry-after", str(RETRY_AFTER_SECONDS).encode())
    await send_json(send, 429, body, request_id(scope), [retry_after, CLOSE])
