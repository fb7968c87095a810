"""The SDK's `AsyncClient` against the live system: the essentials, awaited.

It runs the same operations as `Client` (operations.py), so these cover what is its own:
driving them with asyncio, an async iterator over pages, and task cancellation.
"""

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from bpm_client import AsyncClient, Breakpoint, InvalidState, NotAuthenticated, NotFound

from accounts.tokens import token_create_for_agent
from tests.support.aio import run_async

SAFETY_SECONDS = 60  # only a bound for the helpers' loops, never an assertion


class WaitSignal(httpx.AsyncHTTPTransport):
    """The real transport; `waiting` is set once a long-poll (`?wait=`) is sent."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting = asyncio.Event()
        self.long_polls = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if "wait" in request.url.params:
            self.long_polls += 1
            self.waiting.set()
        return await super().handle_async_request(request)


async def find_waiting(client: AsyncClient, **filters: Any) -> Breakpoint:
    async def first() -> Breakpoint:
        while True:
            async for bp in client.list(status="waiting", **filters):
                return bp
            await asyncio.sleep(0.1)

    return await asyncio.wait_for(first(), SAFETY_SECONDS)


def with_clients(
    live: Any, *tokens: str, transport: httpx.AsyncBaseTransport | None = None
) -> Callable[[Callable[..., Awaitable[Any]]], Any]:
    """Run scenario(*clients) with a strict AsyncClient per token (the first on `transport`)."""

    def run(scenario: Callable[..., Awaitable[Any]]) -> Any:
        async def main() -> Any:
            clients = [
                AsyncClient(
                    live.base_url, token, strict=True, transport=transport if i == 0 else None
                )
                for i, token in enumerate(tokens)
            ]
            try:
                return await scenario(*clients)
            finally:
                for client in clients:
                    await client.aclose()

        return run_async(main())

    return run


def test_breakpoint_awaits_the_reviewers_approval(live, agent_token, reviewer_token):
    async def scenario(agent: AsyncClient, reviewer: AsyncClient):
        asking = asyncio.create_task(agent.breakpoint("Ship?", tags=["deploy"], options=["go"]))
        bp = await find_waiting(reviewer, tags=["deploy"])
        await reviewer.release(bp.breakpoint_id, "ship it", option="go")
        return await asyncio.wait_for(asking, SAFETY_SECONDS)

    result = with_clients(live, agent_token, reviewer_token)(scenario)
    assert result.approved is True and result.status == "released"
    assert (result.responded_by, result.feedback, result.option) == ("alice", "ship it", "go")


@pytest.mark.own_system
def test_wait_reconnects_through_a_server_restart(live, agent_token, reviewer):
    transport = WaitSignal()

    async def scenario(agent: AsyncClient):
        bp = await agent.create("Deploy during the restart?")
        waiting = asyncio.create_task(agent.wait(bp.breakpoint_id))
        await asyncio.wait_for(transport.waiting.wait(), SAFETY_SECONDS)
        await asyncio.to_thread(live.restart_web, down_seconds=3)
        await asyncio.to_thread(reviewer.release, bp.breakpoint_id, "after the restart")
        return await asyncio.wait_for(waiting, SAFETY_SECONDS * 2)

    status = with_clients(live, agent_token, transport=transport)(scenario)
    assert status.status == "released"
    assert status.result is not None and status.result.feedback == "after the restart"
    assert transport.long_polls >= 2


@pytest.mark.parametrize(
    ("cancel_on_interrupt", "status"), [(True, "cancelled"), (False, "waiting")]
)
def test_cancelling_the_task_cancels_on_the_server_only_when_asked(
    live, agent_token, agent, cancel_on_interrupt, status
):
    transport = WaitSignal()

    async def scenario(client: AsyncClient) -> None:
        asking = asyncio.create_task(
            client.breakpoint("Interrupt me?", cancel_on_interrupt=cancel_on_interrupt)
        )
        await asyncio.wait_for(transport.waiting.wait(), SAFETY_SECONDS)
        asking.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asking

    with_clients(live, agent_token, transport=transport)(scenario)
    (bp,) = agent.list()
    assert bp.status == status


def test_errors_carry_the_envelope(live, agent_token, reviewer_token):
    other_token = token_create_for_agent(agent_id="agent-b")[1]

    async def scenario(agent: AsyncClient, reviewer: AsyncClient, other: AsyncClient):
        theirs = await other.create("Theirs?")
        with pytest.raises(NotFound):
            await agent.status(theirs.breakpoint_id)
        await reviewer.release(theirs.breakpoint_id, "first")
        with pytest.raises(InvalidState) as invalid:
            await reviewer.release(theirs.breakpoint_id, "second")
        async with AsyncClient(live.base_url, "bpm_" + "x" * 43) as stranger:
            with pytest.raises(NotAuthenticated) as unauthenticated:
                await stranger.create("Ship?")
        return invalid.value, unauthenticated.value

    invalid, unauthenticated = with_clients(live, agent_token, reviewer_token, other_token)(
        scenario
    )
    assert invalid.details["currentStatus"] == "released" and invalid.status_code == 409
    assert unauthenticated.code == "not_authenticated" and unauthenticated.status_code == 401


def test_list_iterates_over_every_page(live, agent_token, reviewer_token):
    async def scenario(agent: AsyncClient, reviewer: AsyncClient):
        made = [await agent.create(f"Step {n}?", tags=["batch"]) for n in range(5)]
        await reviewer.release(made[0].breakpoint_id, "done")
        listed = [bp.breakpoint_id async for bp in reviewer.list(tags=["batch"], page_size=2)]
        waiting = [bp.breakpoint_id async for bp in agent.list(status="waiting", page_size=2)]
        return [bp.breakpoint_id for bp in made], listed, waiting

    made, listed, waiting = with_clients(live, agent_token, reviewer_token)(scenario)
    assert listed == made[::-1]
    assert waiting == made[:0:-1]
