"""ASGI middleware: a request body sent without Content-Length (chunked) is read whole first.

Django, run as WSGI behind a2wsgi, reads CONTENT_LENGTH bytes of a body: none when the
client sent `Transfer-Encoding: chunked`, so a valid chunked POST arrived empty
("payload: This field is required"). Here such a body is read to its end (at most
BPM_MAX_BODY_BYTES: beyond that the request is refused with the 413 envelope and nothing
more is read) and handed on with the Content-Length it turned out to have.
"""

from typing import Any

from django.conf import settings

from config.asgi_http import header, request_id, send_json
from config.errors import envelope

Scope = dict[str, Any]
Message = dict[str, Any]


class BufferedBodyApp:
    """Hands `app` every HTTP request with a Content-Length, reading a body without one."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or header(scope, b"content-length") is not None:
            await self.app(scope, receive, send)
            return
        limit = settings.BPM_MAX_BODY_BYTES
        chunks: list[bytes] = []
        size = 0
        more_body = True
        while more_body:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # the client is gone: nobody to answer
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                await _too_large(scope, send, limit)
                return
            chunks.append(chunk)
            more_body = message.get("more_body", False)
        body = b"".join(chunks)
        await self.app(_with_length(scope, len(body)), _replay(body, receive), send)


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
    # The rest of the body is never read: the connection cannot carry another request.
    await send_json(send, 413, body, request_id(scope), [(b"connection", b"close")])
