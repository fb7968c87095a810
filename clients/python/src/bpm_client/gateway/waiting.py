"""Every gated call waits on one wait-for-many long-poll (`AsyncClient.wait_any`).

A call registers its breakpoint and awaits its entry; one task polls for all the
breakpoints registered (up to the API's 100 per request), hands each decided one to its
caller, and starts a new poll when one is added or withdrawn, so a new call is heard
without waiting for the current poll to end.
"""

from __future__ import annotations

import asyncio
import contextlib

from ..aio import AsyncClient
from ..errors import BpmError, WaitTimeout
from ..models import StatusEntry
from ..operations import MAX_IDS_PER_WAIT

# How long one poll asks the server to hold (it returns at once on a decision).
HOLD_SECONDS = 50.0


class Waiter:
    def __init__(self, client: AsyncClient, hold: float = HOLD_SECONDS):
        self.client = client
        self.hold = hold
        self._pending: dict[str, asyncio.Future[StatusEntry]] = {}
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def wait(self, breakpoint_id: str) -> StatusEntry:
        """The breakpoint's entry once it is decided (or not visible); a failure of the
        service (given up on after the client's reconnect window) raises."""
        future: asyncio.Future[StatusEntry] = asyncio.get_running_loop().create_future()
        self._pending[breakpoint_id] = future
        self._changed.set()
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._poll())
        try:
            return await future
        finally:
            if self._pending.get(breakpoint_id) is future:
                del self._pending[breakpoint_id]
                self._changed.set()

    async def _poll(self) -> None:
        while self._pending:
            self._changed.clear()
            ids = list(self._pending)[:MAX_IDS_PER_WAIT]
            poll = asyncio.create_task(self.client.wait_any(ids, timeout=self.hold))
            changed = asyncio.create_task(self._changed.wait())
            try:
                await asyncio.wait({poll, changed}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                changed.cancel()
            if not poll.done():  # a call came or went: poll again for the new set
                poll.cancel()
                with contextlib.suppress(asyncio.CancelledError, BpmError):
                    await poll
                continue
            try:
                entries = poll.result()
            except WaitTimeout:
                continue
            except Exception as error:  # the service failed (or an answer made no sense)
                self._fail(error)
                continue
            self._hand_over(entries)

    def _hand_over(self, entries: list[StatusEntry]) -> None:
        for entry in entries:
            if entry.done or entry.error:
                future = self._pending.pop(entry.breakpoint_id, None)
                if future is not None and not future.done():
                    future.set_result(entry)

    def _fail(self, error: BaseException) -> None:
        for future in self._pending.values():
            if not future.done():
                future.set_exception(error)
        self._pending.clear()

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
