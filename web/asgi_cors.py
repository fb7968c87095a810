"""CORS headers on the answers that never pass through Django's middleware.

The status handler in front of Django (breakpoints/waiting/asgi.py) answers long-polls
itself, so django-cors-headers' CorsMiddleware never sees them. This wrapper adds the
headers that middleware would have added: the decision is its own code, reading the same
CORS_* settings, so both paths agree. Answers that already carry
Access-Control-Allow-Origin (Django's) pass unchanged; with CORS off, or a request without
an Origin header, nothing is looked at.
"""

import io
from collections.abc import Awaitable, Callable
from typing import Any

from corsheaders.conf import conf
from corsheaders.middleware import ACCESS_CONTROL_ALLOW_ORIGIN, CorsMiddleware
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, HttpResponse

from web import asgi_http

Scope = dict[str, Any]
Message = dict[str, Any]
Headers = list[tuple[bytes, bytes]]
Send = Callable[[Message], Awaitable[None]]


def _unused(request: HttpRequest) -> HttpResponse:
    """CorsMiddleware wants a next handler; only its add_response_headers is used here."""
    return HttpResponse()


_cors = CorsMiddleware(_unused)


def cors_configured() -> bool:
    """Whether any origin may be allowed at all (read per request: settings may change)."""
    return bool(
        conf.CORS_ALLOWED_ORIGINS or conf.CORS_ALLOWED_ORIGIN_REGEXES or conf.CORS_ALLOW_ALL_ORIGINS
    )


def cors_headers(scope: Scope) -> Headers:
    """The CORS headers (and Vary) CorsMiddleware gives an answer to this request."""
    response = HttpResponse()
    _cors.add_response_headers(ASGIRequest(scope, io.BytesIO()), response)
    return [
        (name.lower().encode("latin-1"), value.encode("latin-1"))
        for name, value in response.headers.items()
        if name.lower().startswith("access-control-") or name.lower() == "vary"
    ]


def with_cors(scope: Scope, start: Message) -> Message:
    """An http.response.start message with the CORS headers it lacks."""
    headers: Headers = list(start.get("headers", ()))
    present = {name.lower() for name, _ in headers}
    if ACCESS_CONTROL_ALLOW_ORIGIN.encode() in present:
        return start
    extra = [(name, value) for name, value in cors_headers(scope) if name not in present]
    return {**start, "headers": headers + extra} if extra else start


class CorsHeadersApp:
    """ASGI wrapper: adds the CORS headers that answers served outside Django lack."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: Scope, receive: Any, send: Send) -> None:
        if (
            scope["type"] != "http"
            or asgi_http.header(scope, b"origin") is None
            or not cors_configured()
        ):
            await self.app(scope, receive, send)
            return

        async def send_with_cors(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = with_cors(scope, message)
            await send(message)

        await self.app(scope, receive, send_with_cors)
