"""A web process's NOTIFYs go out on its listener's connection, from the event loop
(breakpoints.wakeups, breakpoints.waiting.listener): a committing thread hands its ids over;
every listener hears them, this one included; without the listener the thread sends them."""

import asyncio
from collections.abc import Callable

import psycopg
import pytest
from django.db import connection

from breakpoints import wakeups
from breakpoints.waiting.listener import connection_params, listen_forever
from breakpoints.wakeups import CHANNEL

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


async def _until(predicate: Callable[[], bool], seconds: float = 10) -> None:
    for _ in range(int(seconds / 0.01)):
        if predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached")


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
        listening = asyncio.create_task(listen_forever(hub))  # type: ignore[arg-type]
        try:
            await _until(lambda: hub.listening)
            async with await psycopg.AsyncConnection.connect(
                **connection_params(), autocommit=True
            ) as other:
                await other.execute(f"LISTEN {CHANNEL}")
                # As after a commit, in a request's thread: handed over, not sent there.
                await asyncio.to_thread(_committed, IDS[:2])
                await asyncio.to_thread(_committed, IDS[2:])
                await _until(lambda: len(hub.heard) == len(IDS))
                return [n.payload async for n in other.notifies(timeout=5, stop_after=len(IDS))]
        finally:
            listening.cancel()
            await asyncio.gather(listening, return_exceptions=True)

    heard_elsewhere = asyncio.run(scenario())

    assert hub.heard == IDS  # its own notifications, in order
    assert heard_elsewhere == IDS  # another process's listener
    assert sent_by_thread == []
    assert wakeups._sender is None  # withdrawn when the listener stopped


def test_with_the_listeners_connection_gone_the_committing_thread_sends_them(sent_by_thread):
    hub = _Hub()

    async def scenario() -> list[str]:
        listening = asyncio.create_task(listen_forever(hub))  # type: ignore[arg-type]
        try:
            await _until(lambda: hub.listening)
            async with await psycopg.AsyncConnection.connect(
                **connection_params(), autocommit=True
            ) as other:
                await other.execute(f"LISTEN {CHANNEL}")
                await other.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE application_name = 'bpm-listener' AND pid <> pg_backend_pid()"
                )
                await _until(lambda: not hub.listening)
                await asyncio.to_thread(_committed, ["bp-after-the-loss"])
                heard = [n.payload async for n in other.notifies(timeout=5, stop_after=1)]
                # Back (after its backoff): the listener's connection sends them again.
                await _until(lambda: hub.listening)
                await asyncio.to_thread(_committed, ["bp-after-the-return"])
                heard += [n.payload async for n in other.notifies(timeout=5, stop_after=1)]
                return heard
        finally:
            listening.cancel()
            await asyncio.gather(listening, return_exceptions=True)

    heard_elsewhere = asyncio.run(scenario())

    assert sent_by_thread == [["bp-after-the-loss"]]
    assert heard_elsewhere == ["bp-after-the-loss", "bp-after-the-return"]
