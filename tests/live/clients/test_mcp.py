"""The MCP server (`bpm mcp`) driven by the mcp SDK's own client over stdio.

Each test starts the server as a subprocess (the way an MCP client does) against the live
system of tests/clients/conftest.py; the reviewer decides with the SDK from a thread while
the tool call waits.
"""

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from bpm_client import Client
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import CallToolResult, TextContent

from tests.live.clients.conftest import BPM
from tests.support.mcp import HANG_GUARD_SECONDS, Progress, run
from tests.support.net import free_port

SERVER_COMMAND = [BPM, "mcp"]  # what an MCP client runs
TOOLS = {
    "request_human_approval",
    "create_breakpoint",
    "get_breakpoint_status",
    "wait_for_breakpoint",
    "cancel_breakpoint",
}


@asynccontextmanager
async def mcp_session(env: dict[str, str], cwd: Path | None = None) -> AsyncIterator[ClientSession]:
    command, *args = SERVER_COMMAND
    params = StdioServerParameters(command=command, args=args, env=env, cwd=cwd)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def waiting_call(
    session: ClientSession, arguments: dict[str, Any]
) -> tuple["asyncio.Task[CallToolResult]", Progress]:
    """Start request_human_approval; return once it reports that it waits for a human."""
    progress = Progress()
    call = asyncio.create_task(
        session.call_tool("request_human_approval", arguments, progress_callback=progress)
    )
    waiting = asyncio.create_task(progress.reached(1))
    await asyncio.wait({call, waiting}, return_when=asyncio.FIRST_COMPLETED)
    waiting.cancel()
    assert not call.done(), f"the tool returned before waiting: {call.result()}"
    return call, progress


async def ask_and_decide(
    session: ClientSession, arguments: dict[str, Any], decide: Callable[[], Awaitable[Any]]
) -> tuple[CallToolResult, Progress]:
    """Call request_human_approval; once it waits, `decide`; return what the call returned."""
    call, progress = await waiting_call(session, arguments)
    await decide()
    return await asyncio.wait_for(call, HANG_GUARD_SECONDS), progress


def in_thread(function: Callable[[], Any]) -> Callable[[], Awaitable[Any]]:
    """A blocking decision (the sync SDK) as a `decide` for ask_and_decide."""
    return lambda: asyncio.to_thread(function)


def the_waiting_one(client: Client) -> str:
    """The id of the only waiting breakpoint (each test has a fresh database)."""
    (waiting,) = list(client.list(status="waiting"))
    return waiting.breakpoint_id


def decision(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, text_of(result)
    assert result.structured_content is not None
    return result.structured_content


def text_of(result: CallToolResult) -> str:
    return " ".join(block.text for block in result.content if isinstance(block, TextContent))


def test_lists_the_five_tools_each_with_a_description_for_the_model():
    env = {**os.environ, "BPM_URL": f"http://127.0.0.1:{free_port()}", "BPM_TOKEN": "unused"}

    async def scenario():
        async with mcp_session(env) as session:
            return (await session.list_tools()).tools

    tools = {tool.name: tool for tool in run(scenario())}
    assert set(tools) == TOOLS
    approval = tools["request_human_approval"]
    assert "approved" in approval.description and "feedback" in approval.description
    assert "create_breakpoint" in approval.description  # points to the non-blocking pair
    assert approval.input_schema["required"] == ["question"]
    assert {"files", "tags", "expert", "options", "ttl_seconds", "title"} <= set(
        approval.input_schema["properties"]
    )
    assert all(len(tool.description or "") > 100 for tool in tools.values())
    assert tools["get_breakpoint_status"].annotations.read_only_hint is True


def test_request_human_approval_waits_reports_progress_and_returns_the_approval(
    bpm_env, reviewer: Client, tmp_path: Path
):
    (tmp_path / "plan.md").write_text("# Plan\nmigrate then deploy\n")

    def approve():
        breakpoint_id = the_waiting_one(reviewer)
        files = reviewer.get(breakpoint_id).payload["context"]["files"]
        assert [(f["path"], f["content"]) for f in files] == [
            ("plan.md", "# Plan\nmigrate then deploy\n")
        ]
        reviewer.release(breakpoint_id, "go ahead")

    async def scenario():
        async with mcp_session(bpm_env, cwd=tmp_path) as session:
            arguments = {"question": "Deploy?", "files": ["plan.md"], "tags": ["deploy"]}
            call, progress = await waiting_call(session, arguments)
            await progress.reached(2)  # it keeps reporting while nobody answers
            await asyncio.to_thread(approve)
            return await call, progress

    result, progress = run(scenario())
    answer = decision(result)
    assert answer["approved"] is True and answer["status"] == "released"
    assert answer["respondedBy"] == "alice" and answer["feedback"] == "go ahead"
    # As the API writes them (issue 31): its times with `Z`, the digest and the receipt.
    assert answer["allResponses"][0]["respondedAt"].endswith("Z")
    assert answer["payloadDigest"].startswith("sha256:") and answer["receipt"].count(".") == 2
    assert answer["warnings"] == []
    assert all(answer["breakpointId"] in (message or "") for message in progress.messages)
    assert all("waiting for a human" in (message or "") for message in progress.messages)
    assert progress.values == sorted(set(progress.values))  # progress only ever increases


def test_a_rejection_returns_approved_false_with_the_reviewers_feedback(bpm_env, reviewer):
    def reject():
        reviewer.release(the_waiting_one(reviewer), "not on a Friday", approved=False)

    async def scenario():
        async with mcp_session(bpm_env) as session:
            return await ask_and_decide(session, {"question": "Deploy?"}, in_thread(reject))

    answer = decision(run(scenario())[0])
    assert answer["approved"] is False and answer["status"] == "released"
    assert answer["feedback"] == "not on a Friday" and answer["respondedBy"] == "alice"


def test_the_option_the_reviewer_chose_comes_back(bpm_env, reviewer):
    def choose():
        reviewer.release(the_waiting_one(reviewer), "", option="tonight")

    async def scenario():
        async with mcp_session(bpm_env) as session:
            arguments = {"question": "When?", "options": ["now", "tonight"]}
            return await ask_and_decide(session, arguments, in_thread(choose))

    answer = decision(run(scenario())[0])
    assert answer["approved"] is True and answer["option"] == "tonight"


def test_an_unanswered_question_expires_after_its_ttl_and_is_not_approved(bpm_env):
    async def scenario():
        async with mcp_session(bpm_env) as session:
            return await session.call_tool(
                "request_human_approval", {"question": "Deploy?", "ttl_seconds": 2}
            )

    answer = decision(run(scenario()))
    assert answer["status"] == "expired" and answer["approved"] is False


def test_cancel_breakpoint_in_the_same_session_ends_the_waiting_call(bpm_env, agent: Client):
    cancelled: dict[str, Any] = {}

    async def scenario():
        async with mcp_session(bpm_env) as session:

            async def cancel():
                breakpoint_id = await asyncio.to_thread(the_waiting_one, agent)
                arguments = {"breakpoint_id": breakpoint_id, "reason": "plan changed"}
                cancelled.update(decision(await session.call_tool("cancel_breakpoint", arguments)))

            return await ask_and_decide(session, {"question": "Deploy?"}, cancel)

    answer = decision(run(scenario())[0])
    assert cancelled == {"breakpointId": answer["breakpointId"], "status": "cancelled"}
    assert answer["status"] == "cancelled" and answer["approved"] is False


@pytest.mark.own_system
def test_the_wait_survives_a_server_restart_and_still_returns_the_approval(live, bpm_env, reviewer):
    def restart_then_approve():
        live.restart_web(down_seconds=3)
        reviewer.release(the_waiting_one(reviewer), "after the restart")

    async def scenario():
        async with mcp_session(bpm_env) as session:
            arguments = {"question": "Deploy?"}
            return await ask_and_decide(session, arguments, in_thread(restart_then_approve))

    answer = decision(run(scenario())[0])
    assert answer["approved"] is True and answer["feedback"] == "after the restart"


def test_a_bad_token_is_a_tool_error_and_the_server_keeps_answering(bpm_env):
    env = {**bpm_env, "BPM_TOKEN": "bpm_not-a-real-token"}

    async def scenario():
        async with mcp_session(env) as session:
            first = await session.call_tool("request_human_approval", {"question": "Deploy?"})
            second = await session.call_tool("get_breakpoint_status", {"breakpoint_id": "bp-1"})
            return first, second, (await session.list_tools()).tools

    first, second, tools = run(scenario())
    assert first.is_error and ": not_authenticated: " in text_of(first)
    assert "\n" not in text_of(first) and "Traceback" not in text_of(first)
    assert second.is_error and "not_authenticated" in text_of(second)
    assert {tool.name for tool in tools} == TOOLS


def test_a_missing_file_or_an_unknown_id_is_a_one_line_tool_error(bpm_env, agent: Client):
    async def scenario():
        async with mcp_session(bpm_env) as session:
            arguments = {"question": "Deploy?", "files": ["no-such-plan.md"]}
            missing = await session.call_tool("request_human_approval", arguments)
            unknown = await session.call_tool("get_breakpoint_status", {"breakpoint_id": "bp-no"})
            return missing, unknown

    missing, unknown = run(scenario())
    assert missing.is_error and text_of(missing).endswith(": no such file: no-such-plan.md")
    assert list(agent.list()) == []  # nothing was created
    assert unknown.is_error and ": not_found: " in text_of(unknown)
    assert "\n" not in text_of(unknown)


def test_an_interrupted_call_leaves_the_breakpoint_waiting_and_the_server_serving(
    bpm_env, agent: Client
):
    async def scenario():
        async with mcp_session(bpm_env) as session:
            call, _ = await waiting_call(session, {"question": "Deploy?"})
            call.cancel()  # the MCP client gives up: it sends notifications/cancelled
            with contextlib.suppress(asyncio.CancelledError):
                await call
            breakpoint_id = await asyncio.to_thread(the_waiting_one, agent)
            key = {"breakpoint_id": breakpoint_id}
            return decision(await session.call_tool("get_breakpoint_status", key))

    answer = run(scenario())
    assert answer["status"] == "waiting" and answer["approved"] is None


def test_an_unreachable_server_is_a_tool_error():
    env = {**os.environ, "BPM_URL": f"http://127.0.0.1:{free_port()}", "BPM_TOKEN": "any"}

    async def scenario():
        async with mcp_session(env) as session:
            return await session.call_tool("create_breakpoint", {"question": "Deploy?"})

    result = run(scenario())
    assert result.is_error and ": cannot reach http://127.0.0.1:" in text_of(result)


def test_create_then_status_then_wait_returns_waiting_until_a_human_answers(bpm_env, reviewer):
    async def scenario():
        async with mcp_session(bpm_env) as session:
            created = decision(await session.call_tool("create_breakpoint", {"question": "Go?"}))
            key = {"breakpoint_id": created["breakpointId"]}
            status = decision(await session.call_tool("get_breakpoint_status", key))
            early = decision(
                await session.call_tool("wait_for_breakpoint", {**key, "timeout_seconds": 1})
            )
            await asyncio.to_thread(reviewer.release, created["breakpointId"], "yes")
            late = decision(
                await session.call_tool("wait_for_breakpoint", {**key, "timeout_seconds": 60})
            )
            return created, status, early, late

    created, status, early, late = run(scenario())
    assert created["status"] == "waiting" and created["approved"] is None
    assert created["consoleUrl"].endswith(f"/{created['breakpointId']}/change/")
    assert status["status"] == "waiting" and early["status"] == "waiting"
    assert early["approved"] is None
    assert late["status"] == "released" and late["approved"] is True
    assert late["respondedBy"] == "alice"
