"""This process's waiters, and what wakes them.

A waiter is a future per request, registered under the breakpoint ids it watches. It is
resolved when one of them is seen no longer waiting. What makes the hub look: a
notification (PostgreSQL NOTIFY through the listener, or this process's own commits),
a reconnect of the listener (everything is looked at again), and a periodic safety
re-check of every watched id (every BPM_WAIT_RECHECK_SECONDS while the listener is up;
every BPM_WAIT_FALLBACK_RECHECK_SECONDS without one, as on SQLite).

Looking is batched: the ids to look at pile up while one query (1,000 ids at most) runs
on the bridge, so a burst of notifications costs a few queries, not one per waiter.
"""

import asyncio
import logging
from collections import Counter
from typing import Any

from django.conf import settings

from breakpoints import selectors, wakeups
from breakpoints.waiting.bridge import run_sync
from breakpoints.waiting.listener import listen_forever, notifications_available
from core.choices import Status
from web.openfiles import waiter_caps

logger = logging.getLogger(__name__)

LOOK_BATCH = 1_000
Rows = dict[str, dict[str, Any]]


class TooManyWaiters(Exception):
    """This process holds its cap of waiters already (503), or the token its share (429):
    BPM_MAX_WAITERS and BPM_MAX_WAITS_PER_TOKEN, lowered to fit the open-file limit
    (web.openfiles)."""

    def __init__(self, *, per_token: bool):
        super().__init__("per token" if per_token else "per process")
        self.per_token = per_token


GONE = "gone"  # a waiter's client disconnected
TIMED_OUT = "timed out"  # its time (or its breakpoint's expiresAt) came


class Waiter:
    __slots__ = ("ids", "owner", "future")

    def __init__(self, ids: tuple[str, ...], owner: str, future: asyncio.Future):
        self.ids = ids
        self.owner = owner
        # Resolved with {id: row} of what was seen no longer waiting, GONE or TIMED_OUT.
        self.future = future

    def wake(self, value: Any) -> None:
        if not self.future.done():
            self.future.set_result(value)


class Hub:
    def __init__(self) -> None:
        self._watchers: dict[str, set[Waiter]] = {}
        self._per_owner: Counter[str] = Counter()
        self._count = 0
        self._to_look: set[str] = set()
        self._looking: asyncio.Task | None = None
        self._tasks: list[asyncio.Task] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self.listening = False  # a LISTEN connection is up: notifications arrive

    # --- life ------------------------------------------------------------------------

    def start(self) -> None:
        """Start the re-check (and, on PostgreSQL, the listener) on the running loop."""
        self._loop = asyncio.get_running_loop()
        self._tasks.append(asyncio.create_task(self._recheck_forever()))
        if notifications_available():
            self._tasks.append(asyncio.create_task(listen_forever(self)))
        else:
            wakeups.add_local_listener(self._from_thread)

    async def stop(self) -> None:
        wakeups.remove_local_listener(self._from_thread)
        for task in [*self._tasks, *([self._looking] if self._looking else [])]:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()

    # --- waiters ---------------------------------------------------------------------

    @property
    def waiter_count(self) -> int:
        return self._count

    def subscribe(self, ids: tuple[str, ...], owner: str) -> Waiter:
        """Watch `ids` for a request of `owner` (a token digest); raises TooManyWaiters."""
        process_cap, token_cap = waiter_caps(
            settings.BPM_MAX_WAITERS, settings.BPM_MAX_WAITS_PER_TOKEN
        )
        if self._count >= process_cap:
            raise TooManyWaiters(per_token=False)
        if self._per_owner[owner] >= token_cap:
            raise TooManyWaiters(per_token=True)
        waiter = Waiter(ids, owner, asyncio.get_running_loop().create_future())
        for breakpoint_id in ids:
            self._watchers.setdefault(breakpoint_id, set()).add(waiter)
        self._per_owner[owner] += 1
        self._count += 1
        return waiter

    def rearm(self, waiter: Waiter, ids: tuple[str, ...]) -> None:
        """Watch `ids` with a fresh future (the old one fired, or watched too much)."""
        self._unwatch(waiter)
        waiter.ids = ids
        waiter.future = asyncio.get_running_loop().create_future()
        for breakpoint_id in ids:
            self._watchers.setdefault(breakpoint_id, set()).add(waiter)

    def unsubscribe(self, waiter: Waiter) -> None:
        self._unwatch(waiter)
        self._per_owner[waiter.owner] -= 1
        if self._per_owner[waiter.owner] <= 0:
            del self._per_owner[waiter.owner]
        self._count -= 1

    def _unwatch(self, waiter: Waiter) -> None:
        for breakpoint_id in waiter.ids:
            watchers = self._watchers.get(breakpoint_id)
            if watchers is not None:
                watchers.discard(waiter)
                if not watchers:
                    del self._watchers[breakpoint_id]

    # --- looking ---------------------------------------------------------------------

    def notify(self, ids: list[str]) -> None:
        """These breakpoints may have changed: look at the watched ones soon."""
        self._to_look.update(i for i in ids if i in self._watchers)
        if self._to_look and (self._looking is None or self._looking.done()):
            self._looking = asyncio.create_task(self._look())

    def recheck_all(self) -> None:
        self.notify(list(self._watchers))

    def _from_thread(self, ids: list[str]) -> None:
        """A commit of this process (another thread) announced ids: hop onto the loop."""
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self.notify, ids)

    async def _look(self) -> None:
        while self._to_look:
            batch = [self._to_look.pop() for _ in range(min(LOOK_BATCH, len(self._to_look)))]
            try:
                rows = await run_sync(selectors.status_rows_by_id, batch)
            except Exception:  # noqa: BLE001 - the re-check will look again
                logger.warning("Could not read %d watched breakpoints", len(batch), exc_info=True)
                return
            self._resolve(rows)

    def _resolve(self, rows: Rows) -> None:
        for breakpoint_id, row in rows.items():
            if row["status"] == Status.WAITING:
                continue
            for waiter in self._watchers.get(breakpoint_id, ()):
                waiter.wake({breakpoint_id: row})

    async def _recheck_forever(self) -> None:
        while True:
            interval = (
                settings.BPM_WAIT_RECHECK_SECONDS
                if self.listening
                else settings.BPM_WAIT_FALLBACK_RECHECK_SECONDS
            )
            await asyncio.sleep(interval)
            self.recheck_all()


_hub: Hub | None = None


def get_hub() -> Hub:
    """This process's hub, started on the running loop at first use."""
    global _hub
    if _hub is None or _hub._loop is not asyncio.get_running_loop():
        if _hub is not None:  # its loop is gone (a test's loop): so are its tasks
            wakeups.remove_local_listener(_hub._from_thread)
        _hub = Hub()
        _hub.start()
    return _hub


def hub_state() -> dict[str, Any]:
    """For /healthz: how many requests this process holds, and whether NOTIFY reaches it:
    "up"; "down" while the listener reconnects; "off" before this process's first
    long-poll starts it (or under WSGI); "not used" on SQLite, which has no NOTIFY (the
    process's own commits wake its waiters, and they re-check every half second)."""
    waiters = _hub.waiter_count if _hub is not None else 0
    if not notifications_available():
        listener = "not used"
    elif _hub is None:
        listener = "off"
    else:
        listener = "up" if _hub.listening else "down"
    return {"waiters": waiters, "listener": listener}


async def stop_hub() -> None:
    global _hub
    if _hub is not None:
        hub, _hub = _hub, None
        await hub.stop()
