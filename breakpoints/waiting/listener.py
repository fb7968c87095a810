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
                async for notification in conn.notifies():
                    hub.notify([notification.payload])
        except asyncio.CancelledError:
            hub.listening = False
            raise
        except Exception as exc:  # noqa: BLE001 - any failure: fall back and reconnect
            level = logging.ERROR if backoff >= MAX_BACKOFF_SECONDS else logging.WARNING
            logger.log(level, "Wake-up listener lost (%s); reconnecting in %.1fs", exc, backoff)
        hub.listening = False
        await asyncio.sleep(backoff)
        backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)
