"""The PostgreSQL LISTEN connection of this process: notifications in, waiters woken.

One dedicated autocommit connection outside the Django pool (a LISTEN session must stay
pinned to one connection). When it drops, the hub falls back to frequent re-checks, and
the listener reconnects with exponential backoff; after every (re)connect the hub looks at
all its waiters again, since NOTIFY drops what is sent while nobody listens.
"""

import asyncio
import logging
from typing import TYPE_CHECKING, Any

import psycopg
from django.db import connection

from breakpoints.wakeups import CHANNEL

if TYPE_CHECKING:
    from breakpoints.waiting.hub import Hub

logger = logging.getLogger(__name__)

FIRST_BACKOFF_SECONDS = 0.25
MAX_BACKOFF_SECONDS = 15.0


def notifications_available() -> bool:
    return connection.vendor == "postgresql"


def connection_params() -> dict[str, Any]:
    """The project database's connection parameters, without Django's own additions."""
    params = connection.get_connection_params()
    for django_only in ("cursor_factory", "context", "prepare_threshold"):
        params.pop(django_only, None)
    params.setdefault("application_name", "bpm-listener")
    # Notice a dead peer within about a minute even with no traffic.
    params.setdefault("keepalives", 1)
    params.setdefault("keepalives_idle", 30)
    params.setdefault("keepalives_interval", 10)
    params.setdefault("keepalives_count", 3)
    return params


async def listen_forever(hub: "Hub") -> None:
    backoff = FIRST_BACKOFF_SECONDS
    while True:
        try:
            async with await psycopg.AsyncConnection.connect(
                **connection_params(), autocommit=True
            ) as conn:
                await conn.execute(f"LISTEN {CHANNEL}")
                hub.listening = True
                backoff = FIRST_BACKOFF_SECONDS
                hub.recheck_all()  # whatever changed while nobody listened
                await _notifications_to(hub, conn.pgconn)
        except asyncio.CancelledError:
            hub.listening = False
            raise
        except Exception as exc:  # noqa: BLE001 - any failure: fall back and reconnect
            level = logging.ERROR if backoff >= MAX_BACKOFF_SECONDS else logging.WARNING
            logger.log(level, "Wake-up listener lost (%s); reconnecting in %.1fs", exc, backoff)
        hub.listening = False
        await asyncio.sleep(backoff)
        backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)


async def _notifications_to(hub: "Hub", pgconn: Any) -> None:
    """Hand every notification the connection receives to the hub, until it fails (raised).

    The socket stays registered with the event loop, and each time it is readable every
    notification it brought is read in one go, with libpq's own calls: psycopg's notifies()
    sets up a reader, a future and its lock again for each notification, which cost a web
    process 8 % of its CPU under a stream of releases (docs/benchmarks.md, issue 39).
    """
    loop = asyncio.get_running_loop()
    lost: asyncio.Future[None] = loop.create_future()

    def readable() -> None:
        try:
            pgconn.consume_input()
        except psycopg.Error as exc:  # the server closed it, or the network is gone
            if not lost.done():
                lost.set_exception(exc)
            return
        payloads = []
        while (notification := pgconn.notifies()) is not None:
            payloads.append(notification.extra.decode())
        if payloads:
            hub.notify(payloads)

    socket = pgconn.socket
    loop.add_reader(socket, readable)
    try:
        readable()  # any that came with the LISTEN's answer
        await lost
    finally:
        loop.remove_reader(socket)
