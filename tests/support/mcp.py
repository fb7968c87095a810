"""`bpm mcp`'s tools called in process by the MCP SDK's own client (no subprocess)."""

from typing import Any

from bpm_client.mcp_server import build_server
from mcp import Client
from mcp.types import CallToolResult, TextContent

from tests.aio import run_async


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
