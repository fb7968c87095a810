"""`bpm mcp`'s tools called in process by the MCP SDK's own client (no subprocess), and
what the live MCP tests (`bpm mcp`, `bpm gateway`) share."""

import asyncio
from typing import Any

from bpm_client.mcp_server import build_server
from mcp import Client
from mcp.types import CallToolResult, TextContent

from tests.support.aio import run_async


def mcp_call(
    url: str, tool: str, arguments: dict[str, Any], progress: list[str] | None = None
) -> CallToolResult:
    """`tool` called through an in-process MCP session with the server `bpm mcp` serves;
    `progress` collects the messages of its progress notifications."""

    async def noted(done: float, total: float | None, message: str | None) -> None:
        if progress is not None and message is not None:
            progress.append(message)

    async def call() -> CallToolResult:
        async with Client(build_server(url, "bpm_test")) as session:
            return await session.call_tool(tool, arguments, progress_callback=noted)

    return run_async(call())


def text_of(result: CallToolResult) -> str:
    """The result's text content (what a client without structured output reads)."""
    (text,) = [block.text for block in result.content if isinstance(block, TextContent)]
    return text


# Guards against a hung call, not timing assertions: a decision normally takes seconds.
HANG_GUARD_SECONDS = 120


class Progress:
    """A progress_callback that records every notification of one tool call."""

    def __init__(self) -> None:
        self.messages: list[str | None] = []
        self.values: list[float] = []
        self.changed = asyncio.Condition()

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        async with self.changed:
            self.values.append(progress)
            self.messages.append(message)
            self.changed.notify_all()

    async def reached(self, count: int) -> None:
        async with self.changed:
            await self.changed.wait_for(lambda: len(self.values) >= count)


def run(coroutine: Any) -> Any:
    """On a loop of its own thread (the e2e tests leave one running in the main thread)."""
    return run_async(asyncio.wait_for(coroutine, HANG_GUARD_SECONDS * 2))
