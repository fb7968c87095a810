"""The production web worker: uvicorn under gunicorn, taking its share of new connections.

gunicorn's workers share one listening socket. uvicorn hands it to the event loop, which
accepts every connection waiting in the queue each time the socket is ready: a burst of
connections (a proxy's keep-alive pool, dashboards starting together, clients reconnecting
after a restart) all land on the one worker that woke first, and stay there. Measured with
2 workers and 32 clients connecting together: one worker served every request (0.95 of 2
cores busy), the other none.

BalancedUvicornWorker accepts one connection at a time, each worker a little later the
more connections it already holds, so the workers woken together by a burst share it and
the least loaded one is the first to take a new connection.
Nothing else changes: the same protocol, keep-alive and graceful shutdown as uvicorn's.
"""

import asyncio
import logging
import socket

from gunicorn.arbiter import Arbiter  # type: ignore[import-untyped]
from uvicorn.server import Server
from uvicorn_worker import UvicornWorker  # type: ignore[import-untyped]

logger = logging.getLogger("uvicorn.error")

# How much later a worker accepts per connection it holds, and at most: long enough for a
# less loaded worker woken by the same connection to take it first, short enough not to
# be felt by the one who connects (a keep-alive connection is accepted once) nor to slow
# a reconnecting crowd (at the cap, 1,000 accepts a second per worker).
ACCEPT_DELAY_PER_CONNECTION = 0.0002
ACCEPT_DELAY_MAX = 0.001
# After an accept fails for want of file descriptors or memory, before the next try.
ACCEPT_RETRY_SECONDS = 0.1


def accept_delay(connections: int) -> float:
    """Seconds to wait before the next accept, holding `connections`."""
    return min(connections * ACCEPT_DELAY_PER_CONNECTION, ACCEPT_DELAY_MAX)


class BalancedServer(Server):
    """uvicorn's Server, accepting the inherited sockets one connection at a time."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.acceptors: list[asyncio.Task] = []
        self.setups: set[asyncio.Task] = set()  # connections being set up (TLS handshakes)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        if sockets is None:  # not under gunicorn: uvicorn binds and serves as usual
            await super().startup(sockets=None)
            return
        await super().startup(sockets=[])  # lifespan and state, but no asyncio server
        loop = asyncio.get_running_loop()
        self.acceptors = [
            # gunicorn's socket objects wrap the socket.socket the loop needs
            loop.create_task(self.accept_forever(getattr(sock, "sock", sock)))
            for sock in sockets
        ]

    def protocol(self) -> asyncio.Protocol:
        return self.config.http_protocol_class(  # type: ignore[call-arg]
            config=self.config,
            server_state=self.server_state,
            app_state=self.lifespan.state,
            _loop=asyncio.get_running_loop(),
        )

    async def accept_forever(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        sock.setblocking(False)
        while True:
            await asyncio.sleep(accept_delay(len(self.server_state.connections)))
            try:
                connection, _ = await loop.sock_accept(sock)
            except OSError as exc:  # EMFILE, ENOBUFS...: the queue keeps the connection
                logger.warning("accept failed: %s", exc)
                await asyncio.sleep(ACCEPT_RETRY_SECONDS)
                continue
            # Set up apart: a TLS handshake that takes its time holds no other connection.
            setup = loop.create_task(self.connect(connection))
            self.setups.add(setup)
            setup.add_done_callback(self.setups.discard)

    async def connect(self, connection: socket.socket) -> None:
        try:
            await asyncio.get_running_loop().connect_accepted_socket(
                self.protocol, connection, ssl=self.config.ssl
            )
        except Exception as exc:  # e.g. a failed TLS handshake: that connection only
            logger.info("could not set up an accepted connection: %r", exc)
            connection.close()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        # Stop accepting first, as uvicorn closes its servers; drop half-made connections.
        for task in [*self.acceptors, *self.setups]:
            task.cancel()
        await asyncio.gather(*self.acceptors, *self.setups, return_exceptions=True)
        await super().shutdown(sockets=sockets)


class BalancedUvicornWorker(UvicornWorker):
    """gunicorn's uvicorn worker, serving with BalancedServer (see the module docstring)."""

    async def _serve(self) -> None:
        self.config.app = self.wsgi
        server = BalancedServer(config=self.config)
        self._install_sigquit_handler()
        await server.serve(sockets=self.sockets)
        if not server.started:
            raise SystemExit(Arbiter.WORKER_BOOT_ERROR)  # as uvicorn's worker: the arbiter stops
