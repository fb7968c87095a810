"""The gateway's calls wait on one wait-for-many poll (issue 37): a call that starts or
ends while a poll is under way starts a new poll for the new set, never a second poll
beside it; each call gets its own breakpoint's entry."""

import asyncio

from bpm_client.gateway.waiting import Waiter
from bpm_client.models import StatusEntry

from tests.support.aio import run_async

GUARD_SECONDS = 30  # against a hang, not a timing assertion


class Service:
    """AsyncClient.wait_any as the service answers it: held until one of the ids is
    decided; records each poll and how many were under way at once."""

    def __init__(self) -> None:
        self.polls: list[list[str]] = []
        self.decided: set[str] = set()
        self.changed = asyncio.Condition()
        self.under_way = 0
        self.most_at_once = 0

    async def wait_any(self, ids: list[str], timeout: float | None = None) -> list[StatusEntry]:
        self.polls.append(list(ids))
        self.under_way += 1
        self.most_at_once = max(self.most_at_once, self.under_way)
        try:
            async with self.changed:
                await self.changed.wait_for(lambda: self.decided & set(ids))
        finally:
            self.under_way -= 1
        return [
            StatusEntry(breakpoint_id=i, status="released" if i in self.decided else "waiting")
            for i in ids
        ]

    async def decide(self, breakpoint_id: str) -> None:
        async with self.changed:
            self.decided.add(breakpoint_id)
            self.changed.notify_all()

    async def polled(self, count: int) -> None:
        while len(self.polls) < count:
            await asyncio.sleep(0)


def test_calls_share_one_poll_and_each_gets_its_own_decision():
    async def scenario():
        service = Service()
        waiter = Waiter(service)  # type: ignore[arg-type]
        first = asyncio.create_task(waiter.wait("bp-a"))
        await service.polled(1)
        second = asyncio.create_task(waiter.wait("bp-b"))
        await service.polled(2)  # the poll for a alone gave way to one for a and b
        await service.decide("bp-b")
        got_b = await second
        await service.polled(3)
        assert not first.done()
        await service.decide("bp-a")
        got_a = await first
        await waiter.aclose()
        return service, got_a, got_b

    service, got_a, got_b = run_async(asyncio.wait_for(scenario(), GUARD_SECONDS))
    assert (got_a.breakpoint_id, got_a.status) == ("bp-a", "released")
    assert (got_b.breakpoint_id, got_b.status) == ("bp-b", "released")
    assert service.polls == [["bp-a"], ["bp-a", "bp-b"], ["bp-a"]]
    assert service.most_at_once == 1


def test_a_call_that_stops_waiting_leaves_the_poll():
    async def scenario():
        service = Service()
        waiter = Waiter(service)  # type: ignore[arg-type]
        kept = asyncio.create_task(waiter.wait("bp-a"))
        gone = asyncio.create_task(waiter.wait("bp-b"))
        await service.polled(1)
        gone.cancel()  # the MCP client cancelled that call
        await service.polled(2)
        await service.decide("bp-a")
        await kept
        await waiter.aclose()
        return service

    service = run_async(asyncio.wait_for(scenario(), GUARD_SECONDS))
    assert service.polls[-1] == ["bp-a"]
    assert service.most_at_once == 1
