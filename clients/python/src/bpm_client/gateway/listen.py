"""`bpm gateway --listen HOST:PORT`: the gateway over streamable HTTP, for many agents.

One upstream and one set of rules serve every MCP client that connects to
http://HOST:PORT/mcp. Each request carries its agent's own token (`Authorization: Bearer`);
`AgentTokens` answers 401 to a request without one, or with one the service refuses, before
the MCP machinery sees it, and hands the token on (the request's `user`, as the SDK's bearer
middleware does: an MCP session stays bound to the token that opened it). A gated call asks
as that agent, so the breakpoint is the calling agent's.

SIGTERM (or Ctrl-C) stops it: the breakpoints calls still wait on are cancelled with the
reason "the gateway stopped", the HTTP server closes, the process exits 0.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import signal
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import anyio
import uvicorn
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ..aio import AsyncClient
from ..errors import BpmError, NotAuthenticated
from .config import GatewayConfig
from .server import Gateway, build_server, server_name, upstream_session

PATH = "/mcp"
# A token the service accepted is not asked about again for this long (the service still
# refuses a revoked token's every breakpoint: the gateway fails closed on that).
VERIFIED_SECONDS = 60.0
VERIFIED_KEPT = 1000
# After SIGTERM, how long open HTTP streams may take to close before they are cut.
SHUTDOWN_GRACE_SECONDS = 5
LOOPBACK = ("127.0.0.1", "localhost", "::1")


class AgentTokens:
    """ASGI middleware: the request's bearer token must be one the service accepts."""

    def __init__(self, app: ASGIApp, service_url: str | None):
        self.app = app
        self.service_url = service_url
        self._verified: dict[str, float] = {}  # token digest -> when the service accepted it

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        token = bearer_token(scope)
        if token is None:
            await _refuse(send, 401, "an agent token is required: Authorization: Bearer <token>")
            return
        try:
            await self._verify(token)
        except NotAuthenticated:
            await _refuse(send, 401, "the approval service does not accept this token")
            return
        except BpmError as error:
            await _refuse(send, 503, f"cannot check the token with the approval service: {error}")
            return
        user = AuthenticatedUser(
            AccessToken(token=token, client_id=f"agent-{_digest(token)[:16]}", scopes=[])
        )
        await self.app({**scope, "user": user}, receive, send)

    async def _verify(self, token: str) -> None:
        """Ask the service (one page of the agent's breakpoints) unless it said yes lately;
        NotAuthenticated when it refuses the token."""
        digest = _digest(token)
        accepted = self._verified.get(digest)
        if accepted is not None and time.monotonic() - accepted < VERIFIED_SECONDS:
            return
        async with AsyncClient(self.service_url, token) as client:
            async for _ in client.list(page_size=1):  # the first page answers
                break
        if len(self._verified) >= VERIFIED_KEPT:
            self._verified.pop(next(iter(self._verified)))
        self._verified[digest] = time.monotonic()


def bearer_token(scope: Scope) -> str | None:
    for name, value in scope.get("headers", ()):
        if name.lower() == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            token = token.strip()
            return token if scheme.lower() == "bearer" and token else None
    return None


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


async def _refuse(send: Send, status: int, message: str) -> None:
    body = json.dumps(
        {"error": "invalid_token" if status == 401 else "unavailable", "error_description": message}
    ).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer error="invalid_token"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def http_app(gateway: Gateway, manager: StreamableHTTPSessionManager) -> Starlette:
    """The ASGI app: /mcp, behind the agent-token check, and the session manager's life."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            yield

    endpoint = AgentTokens(StreamableHTTPASGIApp(manager), gateway.url)
    return Starlette(routes=[Route(PATH, endpoint=endpoint)], lifespan=lifespan)


def security_for(host: str) -> TransportSecuritySettings | None:
    """On a loopback address, the SDK's DNS-rebinding protection (as MCPServer sets it)."""
    if host not in LOOPBACK:
        return None
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
        allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
    )


class _HttpServer(uvicorn.Server):
    """uvicorn's server, leaving signals to `_stop_on_signal` (uvicorn's own handlers
    re-raise SIGTERM once it has stopped, which would end the process with it)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def _stop_on_signal(gateway: Gateway, http: uvicorn.Server) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for _ in signals:
            await gateway.stop()
            http.should_exit = True
            return


def parse_listen(value: str) -> tuple[str, int]:
    """`HOST:PORT` (`[::1]:PORT` for IPv6); ValueError when it is not."""
    host, colon, port = value.rpartition(":")
    host = host.strip("[]")
    if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--listen: expected HOST:PORT (e.g. 127.0.0.1:8808), not {value!r}")
    return host, int(port)


async def listen(
    config: GatewayConfig,
    command: Sequence[str],
    *,
    host: str,
    port: int,
    upstream_url: str | None = None,
    url: str | None = None,
) -> None:
    """Serve the gateway on http://host:port/mcp until SIGTERM or SIGINT."""
    async with upstream_session(command, upstream_url) as (session, initialized):
        name = server_name(config, command, upstream_url)
        gateway = Gateway(config, session, name, url=url, tokens_from_requests=True)
        manager = StreamableHTTPSessionManager(
            app=build_server(gateway, initialized), security_settings=security_for(host)
        )
        settings: Any = uvicorn.Config(
            http_app(gateway, manager),
            host=host,
            port=port,
            log_level="warning",
            timeout_graceful_shutdown=SHUTDOWN_GRACE_SECONDS,
        )
        http = _HttpServer(settings)
        try:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(_stop_on_signal, gateway, http)
                await http.serve()
                tasks.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await gateway.aclose()


def main(
    config: GatewayConfig,
    command: Sequence[str],
    *,
    address: str,
    upstream_url: str | None = None,
    url: str | None = None,
) -> None:
    host, port = parse_listen(address)
    anyio.run(
        lambda: listen(config, command, host=host, port=port, upstream_url=upstream_url, url=url)
    )
