"""The approval gateway (`bpm gateway`) in front of a scripted upstream MCP server: its
configuration, an MCP client connected to it, and a gated call waiting for a human."""

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bpm_client import Client
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import CallToolResult, TextContent

from tests.support.mcp import Progress
from tests.support.project import ROOT

UPSTREAM = str(ROOT / "tests" / "live" / "clients" / "gateway_upstream.py")


CONFIG = """
[defaults]
server = "billing-db"
tags = ["mcp", "billing"]
ttl = 600

[[rules]]
tools = ["delete_*", "drop_database"]
action = "ask"
when = "arguments.env != 'dev'"

[[rules]]
tools = ["shutdown"]
action = "deny"

[[rules]]
tools = ["*"]
action = "allow"
"""


@dataclass
class Gate:
    """A gateway's configuration, environment and the upstream's call log."""

    config: Path
    log: Path
    env: dict[str, str]

    def calls(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]


@asynccontextmanager
async def connect(
    command: str, args: list[str], env: dict[str, str]
) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=command, args=args, env=env)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def waiting(
    session: ClientSession, tool: str, arguments: dict[str, Any]
) -> tuple["asyncio.Task[CallToolResult]", Progress]:
    """Start a gated call; return once its progress says it waits for a human."""
    progress = Progress()
    call = asyncio.create_task(session.call_tool(tool, arguments, progress_callback=progress))
    reached = asyncio.create_task(progress.reached(1))
    await asyncio.wait({call, reached}, return_when=asyncio.FIRST_COMPLETED)
    reached.cancel()
    assert not call.done(), f"the call returned before waiting: {call.result()}"
    return call, progress


def in_thread(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Awaitable[Any]:
    return asyncio.to_thread(function, *args, **kwargs)


def text_of(result: CallToolResult) -> str:
    return " ".join(block.text for block in result.content if isinstance(block, TextContent))


def waiting_on(client: Client, tool: str) -> str:
    """The id of the waiting breakpoint that asks about `tool`."""
    (found,) = [
        bp for bp in client.list(status="waiting") if bp.payload.get("mcp", {}).get("tool") == tool
    ]
    return found.breakpoint_id


def listing(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0
