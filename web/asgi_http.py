"""The small pieces of HTTP that the project's own ASGI code speaks (the status handler,
the body reader): headers, the client address, the request id, and JSON answers in the
envelope."""

import json
import re
import uuid
from collections.abc import Iterable
from typing import Any

from infra.ratelimits import address_of

Scope = dict[str, Any]

# What Django's SecurityMiddleware and friends add to its answers, for ours too.
SECURITY_HEADERS = (
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
)

_VALID_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")


def valid_request_id(incoming: str) -> str | None:
    """The caller's X-Request-ID when it is well formed (else the server mints one)."""
    return incoming if _VALID_REQUEST_ID.match(incoming) else None


def header(scope: Scope, name: bytes) -> str | None:
    """A request header (names are lower case in ASGI), or None when absent."""
    for key, value in scope.get("headers", ()):
        if key == name:
            return value.decode("latin-1")
    return None


def scope_address(scope: Scope) -> str:
    """address_of() for an ASGI scope: the same client address every limit uses."""
    remote = (scope.get("client") or ("", 0))[0]
    return address_of(remote, header(scope, b"x-forwarded-for") or "")


def request_id(scope: Scope) -> str:
    """The caller's X-Request-ID when well formed, else a new one (as RequestIDMiddleware)."""
    return valid_request_id(header(scope, b"x-request-id") or "") or uuid.uuid4().hex


async def send_json(
    send: Any,
    status: int,
    body: dict[str, Any],
    request_id: str,
    extra_headers: Iterable[tuple[bytes, bytes]] = (),
) -> None:
    content = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(content)).encode()),
        (b"x-request-id", request_id.encode()),
        *SECURITY_HEADERS,
        *extra_headers,
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": content})
