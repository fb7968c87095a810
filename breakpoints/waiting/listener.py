"""The PostgreSQL LISTEN connection of this process: notifications in, waiters woken.

One dedicated autocommit connection outside the Django pool (a LISTEN session must stay
pinned to one connection); the process's own NOTIFYs go out on it too (_Announcer). When it drops, the hub falls back to frequent re-checks, and
the listener reconnects with exponential backoff; after every (re)connect the hub looks at
all its waiters again, since NOTIFY drops what is sent while nobody listens.
"""

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import psycopg
from django.conf import settings
from django.db import connection

from breakpoints import wakeups
from breakpoints.waiting.bridge import run_sync
from breakpoints.wakeups import CHANNEL

if TYPE_CHECKING:
    from breakpoints.waiting.hub import Hub

logger = logging.getLogger(__name__)

FIRST_BACKOFF_SECONDS = 0.25
MAX_BACKOFF_SECONDS = 15.0


def notifications_available() -> bool:
    return connection.vendor == "postgresql"


def connection_params() -> dict[str, Any]:
    """The listener's connection parameters: DATABASE_LISTEN_URL's when set (PostgreSQL
    itself, where DATABASE_URL is a pooler in transaction mode, which keeps no LISTEN),
    else the project database's, without Django's own additions."""
    if settings.DATABASE_LISTEN_URL:
        params: dict[str, Any] = {"conninfo": settings.DATABASE_LISTEN_URL}
    else:
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
    """Hand every notification the connection receives to the hub, and send this process's
    NOTIFYs on it (_Announcer), until it fails (raised).

    The socket stays registered with the event loop, and each time it is readable every
    notification it brought is read in one go, with libpq's own calls: psycopg's notifies()
    sets up a reader, a future and its lock again for each notification, which cost a web
    process 8 % of its CPU under a stream of releases (docs/benchmarks.md, the write paths).
    """
    loop = asyncio.get_running_loop()
    lost: asyncio.Future[None] = loop.create_future()

    def fail(exc: Exception) -> None:
        if not lost.done():
            lost.set_exception(exc)

    announcer = _Announcer(loop, pgconn, fail)

    def readable() -> None:
        try:
            pgconn.consume_input()
        except psycopg.Error as exc:  # the server closed it, or the network is gone
            fail(exc)
            return
        payloads = []
        while (notification := pgconn.notifies()) is not None:
            payloads.append(notification.extra.decode())
        if payloads:
            hub.notify(payloads)
        announcer.results_read()

    socket = pgconn.socket
    loop.add_reader(socket, readable)
    wakeups.sender_set(announcer.from_thread)
    try:
        readable()  # any that came with the LISTEN's answer
        await lost
    finally:
        wakeups.sender_clear(announcer.from_thread)
        loop.remove_reader(socket)
        announcer.close()


# The NOTIFY of the ids committed meanwhile, at most this many in one statement.
_NOTIFY = b"SELECT pg_notify($1, changed) FROM unnest($2::text[]) AS changed"
MAX_IDS_PER_NOTIFY = 1_000


class _Announcer:
    """This process's NOTIFYs, sent on the listener's connection from the event loop
    (breakpoints.wakeups): a committing thread hands its ids over and answers at once; one
    statement is in flight at a time, and the ids handed over meanwhile go in the next.

    When the connection is lost, what was not yet answered (in flight, or waiting) is sent
    by a bridge thread through Django's connection, as a committing thread would have, and
    the committing threads send their own until the listener is back."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, pgconn: Any, fail: Callable[[Exception], None]
    ):
        self.loop, self.pgconn, self.fail = loop, pgconn, fail
        self.waiting: list[str] = []
        self.in_flight: list[str] = []
        self.open = True
        self.writing = False

    def from_thread(self, ids: list[str]) -> bool:
        """Take a committing thread's ids (False: the caller sends them)."""
        if not self.open:
            return False
        try:
            self.loop.call_soon_threadsafe(self._add, ids)
        except RuntimeError:  # the loop is closed
            return False
        return True

    def _add(self, ids: list[str]) -> None:
        if not self.open:  # lost after the hand-over
            _send_elsewhere(ids)
            return
        self.waiting.extend(ids)
        self._send()

    def _send(self) -> None:
        if self.in_flight or not self.waiting or not self.open:
            return
        ids = self.waiting[:MAX_IDS_PER_NOTIFY]
        del self.waiting[:MAX_IDS_PER_NOTIFY]
        self.in_flight = ids
        try:
            self.pgconn.send_query_params(_NOTIFY, [CHANNEL.encode(), _text_array(ids)])
        except psycopg.Error as exc:
            self.fail(exc)
            return
        self._flush()

    def _flush(self) -> None:
        """Send what libpq holds (the connection is non-blocking): the rest when the socket
        can take it."""
        try:
            pending = self.pgconn.flush()
        except psycopg.Error as exc:
            self.fail(exc)
            pending = 0
        if pending and not self.writing:
            self.loop.add_writer(self.pgconn.socket, self._flush)
            self.writing = True
        elif not pending and self.writing:
            self.loop.remove_writer(self.pgconn.socket)
            self.writing = False

    def results_read(self) -> None:
        """After the connection's input was read: the answer of the statement in flight,
        if it has come, then the next statement."""
        while self.in_flight and not self.pgconn.is_busy():
            result = self.pgconn.get_result()
            if result is None:  # the statement is done
                self.in_flight = []
                self._send()
                return
            if result.status != psycopg.pq.ExecStatus.TUPLES_OK:
                message = (result.error_message or b"").decode(errors="replace")
                logger.warning("A NOTIFY of %d ids failed: %s", len(self.in_flight), message)

    def close(self) -> None:
        self.open = False
        if self.writing:
            self.loop.remove_writer(self.pgconn.socket)
            self.writing = False
        unsent, self.in_flight, self.waiting = self.in_flight + self.waiting, [], []
        if unsent:
            _send_elsewhere(unsent)


def _text_array(ids: list[str]) -> bytes:
    """A text[] literal of the ids, each quoted."""
    quoted = ('"' + i.replace("\\", "\\\\").replace('"', '\\"') + '"' for i in ids)
    return ("{" + ",".join(quoted) + "}").encode()


def _send_elsewhere(ids: list[str]) -> None:
    """The listener's connection is gone: a bridge thread sends the NOTIFY (best effort)."""
    task = asyncio.ensure_future(run_sync(wakeups.notify_now, ids))
    task.add_done_callback(_sent_elsewhere)
    _elsewhere.add(task)


_elsewhere: set[asyncio.Future[None]] = set()  # held until done


def _sent_elsewhere(task: asyncio.Future[None]) -> None:
    _elsewhere.discard(task)
    if not task.cancelled() and task.exception() is not None:
        logger.warning("A NOTIFY could not be sent: %s; waiters re-check.", task.exception())
