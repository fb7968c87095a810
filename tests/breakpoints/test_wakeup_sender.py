"""A web process's NOTIFYs go out on its listener's connection, from the event loop
(breakpoints.wakeups, breakpoints.waiting.listener): a committing thread hands its ids over;
every listener hears them, this one included; without the listener the thread sends them."""

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import psycopg
import pytest
from django.db import connection

from breakpoints import wakeups
from breakpoints.waiting.listener import connection_params, listen_forever
from breakpoints.wakeups import CHANNEL
from tests.support.aio import run_async, until

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

IDS = ["bp-1", 'a "quoted" id', "back\\slash", "comma,and{brace}", "é"]


class _Hub:
    def __init__(self) -> None:
        self.listening = False
        self.heard: list[str] = []

    def notify(self, ids: list[str]) -> None:
        self.heard.extend(ids)

    def recheck_all(self) -> None:
        pass


def _committed(ids: list[str]) -> None:
    """What a request's thread does after its commit (then it closes its connection)."""
    try:
        wakeups._notify(ids)
    finally:
        connection.close()


@asynccontextmanager
async def _listening(hub: _Hub) -> AsyncIterator[psycopg.AsyncConnection]:
    """This process's listener, up; and another connection listening on the channel, as
    another process's listener would."""
    listener = asyncio.create_task(listen_forever(hub))  # type: ignore[arg-type]
    try:
        await until(lambda: hub.listening)
        async with await psycopg.AsyncConnection.connect(
            **connection_params(), autocommit=True
        ) as other:
            await other.execute(f"LISTEN {CHANNEL}")
            yield other
    finally:
        listener.cancel()
        await asyncio.gather(listener, return_exceptions=True)


async def _heard(other: psycopg.AsyncConnection, count: int) -> list[str]:
    return [n.payload async for n in other.notifies(timeout=5, stop_after=count)]


@pytest.fixture
def sent_by_thread(monkeypatch) -> list[list[str]]:
    """The ids a committing thread NOTIFYs itself (still sent, and recorded)."""
    sent: list[list[str]] = []
    send = wakeups.notify_now

    def recorded(ids: list[str]) -> None:
        sent.append(list(ids))
        send(ids)

    monkeypatch.setattr(wakeups, "notify_now", recorded)
    return sent


def test_a_commits_ids_go_out_on_the_listeners_connection_and_every_listener_hears_them(
    sent_by_thread,
):
    hub = _Hub()

    async def scenario() -> list[str]:
        async with _listening(hub) as other:
            # As after a commit, in a request's thread: handed over, not sent there.
            await asyncio.to_thread(_committed, IDS[:2])
            await asyncio.to_thread(_committed, IDS[2:])
            await until(lambda: len(hub.heard) == len(IDS))
            return await _heard(other, len(IDS))

    heard_elsewhere = run_async(scenario())

    assert hub.heard == IDS  # its own notifications, in order
    assert heard_elsewhere == IDS  # another process's listener
    assert sent_by_thread == []
    assert wakeups._sender is None  # withdrawn when the listener stopped


def test_with_the_listeners_connection_gone_the_committing_thread_sends_them(sent_by_thread):
    hub = _Hub()

    async def scenario() -> list[str]:
        async with _listening(hub) as other:
            await other.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = 'bpm-listener' AND pid <> pg_backend_pid()"
            )
            await until(lambda: not hub.listening)
            await asyncio.to_thread(_committed, ["bp-after-the-loss"])
            heard = await _heard(other, 1)
            # Back (after its backoff): the listener's connection sends them again.
            await until(lambda: hub.listening)
            await asyncio.to_thread(_committed, ["bp-after-the-return"])
            return heard + await _heard(other, 1)

    heard_elsewhere = run_async(scenario())

    assert sent_by_thread == [["bp-after-the-loss"]]
    assert heard_elsewhere == ["bp-after-the-loss", "bp-after-the-return"]
