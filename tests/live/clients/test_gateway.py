"""`bpm gateway` (issue 37) between the official MCP client and an MCP server of its own.

The upstream is tests/live/clients/gateway_upstream.py (the SDK's MCPServer, each call
appended to a log file), started by the gateway over stdio; the gateway is `bpm gateway`
started by the SDK's stdio client, the way an MCP client starts it, against the live
system of conftest.py. Reviewers decide through the API (the SDK) while calls wait.
"""

import asyncio
import contextlib
import json
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from bpm_client import Client
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from accounts.tokens import token_create_for_agent
from tests.live.clients.conftest import BPM
from tests.support.gateway import (
    CONFIG,
    UPSTREAM,
    Gate,
    connect,
    in_thread,
    listing,
    text_of,
    waiting,
    waiting_on,
)
from tests.support.mcp import HANG_GUARD_SECONDS, run
from tests.support.net import free_port
from tests.support.system import wait_until


@pytest.fixture
def gate(tmp_path: Path, bpm_env: dict[str, str]) -> Gate:
    config, log = tmp_path / "gate.toml", tmp_path / "calls.jsonl"
    config.write_text(CONFIG)
    return Gate(config, log, {**bpm_env, "GATEWAY_TEST_LOG": str(log)})


def through_gateway(gate: Gate, **env: str) -> Any:
    """The official MCP client's session with `bpm gateway --config ... -- python upstream`."""
    args = ["gateway", "--config", str(gate.config), "--", sys.executable, UPSTREAM]
    return connect(BPM, args, {**gate.env, **env})


def test_the_tool_list_and_the_calls_that_need_nobody(gate: Gate, agent: Client):
    """tools/list is the upstream's, less the denied tool; allowed calls pass at once,
    the denied one never reaches the upstream; resources and prompts pass through."""

    async def scenario():
        async with connect(sys.executable, [UPSTREAM], gate.env) as upstream:
            direct = (await upstream.list_tools()).tools
        async with through_gateway(gate) as session:
            listed = (await session.list_tools()).tools
            read = await session.call_tool("read_rows", {"table": "invoices"})
            dev = await session.call_tool(
                "delete_rows", {"table": "t", "where": "1=1", "env": "dev"}
            )
            denied = await session.call_tool("shutdown", {})
            schema = await session.read_resource("billing://schema")
            prompt = await session.get_prompt("audit", {"table": "invoices"})
            return direct, listed, read, dev, denied, schema, prompt

    direct, listed, read, dev, denied, schema, prompt = run(scenario())
    assert [tool.name for tool in direct] == [
        "read_rows",
        "delete_rows",
        "drop_database",
        "shutdown",
    ]
    assert listed == direct[:3]  # unchanged, less the tool a deny rule always refuses
    assert (
        not read.is_error
        and text_of(read) == 'read_rows done with {"limit": 10, "table": "invoices"}'
    )
    assert not dev.is_error  # the ask rule's `when` does not hold for env dev
    assert (
        denied.is_error
        and "`shutdown` was not run: the gateway's rules[2] denies it" in text_of(denied)
    )
    assert [call["tool"] for call in gate.calls()] == ["read_rows", "delete_rows"]
    assert "CREATE TABLE invoices" in schema.contents[0].text
    assert prompt.messages[0].content.text == "Audit the table invoices."
    assert list(agent.list()) == []  # nothing needed a human


def test_an_ask_call_waits_the_reviewer_edits_an_argument_and_the_edited_call_runs(
    gate: Gate, reviewer: Client
):
    arguments = {"table": "invoices", "where": "year < 2020", "env": "prod"}
    edited = {**arguments, "where": "year < 2015"}
    seen: dict[str, Any] = {}

    def review() -> None:
        breakpoint_id = waiting_on(reviewer, "delete_rows")
        seen["breakpoint"] = reviewer.get(breakpoint_id)
        seen["calls_while_waiting"] = gate.calls()
        reviewer.release(breakpoint_id, "only the oldest", values=edited)

    async def scenario():
        async with through_gateway(gate) as session:
            tools = {tool.name: tool for tool in (await session.list_tools()).tools}
            call, progress = await waiting(session, "delete_rows", arguments)
            await in_thread(review)
            return tools["delete_rows"], await asyncio.wait_for(call, HANG_GUARD_SECONDS), progress

    tool, result, progress = run(scenario())
    bp = seen["breakpoint"]
    assert bp.title == "Call delete_rows on billing-db?"
    assert "`delete_rows` on the MCP server `billing-db`" in bp.question
    assert bp.payload["form"] == tool.input_schema  # the tool's schema is the form
    assert bp.payload["proposal"] == arguments
    assert bp.payload["mcp"] == {"server": "billing-db", "tool": "delete_rows"}
    assert bp.key == "mcp.billing-db.delete-rows" and bp.tags == ["mcp", "billing"]
    assert bp.ttl_seconds == 600
    assert seen["calls_while_waiting"] == []  # nothing ran before the approval
    assert all(
        bp.breakpoint_id in message and bp.console_url in message for message in progress.messages
    )
    assert not result.is_error
    assert text_of(result) == f"delete_rows done with {json.dumps(edited, sort_keys=True)}"
    assert gate.calls() == [{"tool": "delete_rows", "arguments": edited}]  # the EDITED values


def test_calls_wait_at_once_a_rejected_one_returns_the_comment_and_never_runs(
    gate: Gate, reviewer: Client
):
    """Two calls wait together (one wait-for-many poll); the second is answered first."""

    async def scenario():
        async with through_gateway(gate) as session:
            delete, _ = await waiting(session, "delete_rows", {"table": "users", "where": "1=1"})
            drop, _ = await waiting(session, "drop_database", {"name": "billing"})
            await in_thread(
                lambda: reviewer.release(
                    waiting_on(reviewer, "drop_database"), "never", approved=False
                )
            )
            dropped = await asyncio.wait_for(drop, HANG_GUARD_SECONDS)
            assert not delete.done()
            await in_thread(lambda: reviewer.release(waiting_on(reviewer, "delete_rows"), "ok"))
            return dropped, await asyncio.wait_for(delete, HANG_GUARD_SECONDS)

    dropped, deleted = run(scenario())
    assert dropped.is_error
    assert text_of(dropped).startswith("`drop_database` was not run: rejected by alice")
    assert text_of(dropped).endswith("Their feedback: never")
    assert not deleted.is_error
    ran = {"table": "users", "where": "1=1", "env": "prod"}  # env: the tool's default
    assert gate.calls() == [{"tool": "delete_rows", "arguments": ran}]


def test_a_cancelled_request_or_a_client_gone_cancels_its_breakpoint(gate: Gate, agent: Client):
    async def scenario():
        async with through_gateway(gate) as session:
            call, _ = await waiting(session, "drop_database", {"name": "billing"})
            first = await in_thread(waiting_on, agent, "drop_database")
            call.cancel()  # the MCP client sends notifications/cancelled
            with contextlib.suppress(asyncio.CancelledError):
                await call
            cancelled = await in_thread(agent.wait, first, 60)
            await waiting(session, "delete_rows", {"table": "t", "where": "1=1"})
            second = await in_thread(waiting_on, agent, "delete_rows")
        # The session is closed: the client went away while the call waited.
        return cancelled, await in_thread(agent.wait, second, 60)

    cancelled, gone = run(scenario())
    assert cancelled.status == "cancelled"
    assert cancelled.result.feedback.startswith("the MCP client cancelled the call")
    assert gone.status == "cancelled" and "disconnected" in gone.result.feedback
    assert gate.calls() == []


def test_a_bad_token_fails_closed(gate: Gate):
    async def scenario():
        async with through_gateway(gate, BPM_TOKEN="bpma_not-a-real-token") as session:
            return await session.call_tool("drop_database", {"name": "billing"})

    result = run(scenario())
    assert result.is_error and "could not ask for approval: not_authenticated" in text_of(result)
    assert text_of(result).endswith("Nothing was sent to the tool.")
    assert gate.calls() == []


@pytest.mark.own_system
def test_with_the_service_stopped_a_gated_call_fails_closed(live, gate: Gate):
    async def scenario():
        async with through_gateway(gate) as session:
            await in_thread(stop_web, live)
            gated = await session.call_tool("drop_database", {"name": "billing"})
            allowed = await session.call_tool("read_rows", {"table": "invoices"})
            return gated, allowed

    gated, allowed = run(scenario())
    assert gated.is_error and "could not ask for approval: cannot reach" in text_of(gated)
    assert not allowed.is_error  # what needs no human still works
    assert [call["tool"] for call in gate.calls()] == ["read_rows"]


def stop_web(live) -> None:
    live.web.expected_alive = False
    live.web.stop()


def test_after_n_approvals_of_a_tool_the_service_approves_it_and_the_call_runs_at_once(
    gate: Gate, reviewer: Client
):
    """`auto_approve_after` sends payload.autoApproveAfterN on the tool's key: after that
    many approvals of mcp.billing-db.drop-database the next call is approved at creation
    (the proposal as it is), still with a receipt the gateway checks."""
    gate.config.write_text(CONFIG.replace("ttl = 600", "ttl = 600\nauto_approve_after = 1"))

    async def scenario():
        async with through_gateway(gate) as session:
            call, _ = await waiting(session, "drop_database", {"name": "a"})
            await in_thread(lambda: reviewer.release(waiting_on(reviewer, "drop_database"), "ok"))
            first = await asyncio.wait_for(call, HANG_GUARD_SECONDS)
            second = await session.call_tool("drop_database", {"name": "b"})
            return first, second

    first, second = run(scenario())
    assert not first.is_error and not second.is_error
    assert gate.calls() == [
        {"tool": "drop_database", "arguments": {"name": "a"}},
        {"tool": "drop_database", "arguments": {"name": "b"}},
    ]
    automatic = [bp for bp in reviewer.list() if bp.payload["proposal"] == {"name": "b"}]
    assert automatic[0].result.responded_by == "auto:after-1"


def test_an_upstream_over_streamable_http(gate: Gate, agent: Client):
    """--upstream-url: the same gateway in front of a server the MCP client does not start."""
    port = free_port()
    upstream = subprocess.Popen([sys.executable, UPSTREAM, str(port)], env=gate.env)
    try:
        wait_until(lambda: listing(port), what=f"the upstream listening on {port}")
        args = ["gateway", "--config", str(gate.config)]
        args += ["--upstream-url", f"http://127.0.0.1:{port}/mcp"]

        async def scenario():
            async with connect(BPM, args, gate.env) as session:
                listed = (await session.list_tools()).tools
                read = await session.call_tool("read_rows", {"table": "invoices"})
                denied = await session.call_tool("shutdown", {})
                return listed, read, denied

        listed, read, denied = run(scenario())
    finally:
        upstream.terminate()
        upstream.wait(10)
    assert [tool.name for tool in listed] == ["read_rows", "delete_rows", "drop_database"]
    assert not read.is_error and denied.is_error
    assert [call["tool"] for call in gate.calls()] == ["read_rows"]


ANNOTATED = str(Path(__file__).with_name("gateway_annotated_upstream.py"))


def test_without_a_config_read_only_tools_run_and_the_others_ask(gate: Gate, reviewer: Client):
    """Issue 48: no --config, the annotations decide: the read-only tool runs at once; the
    destructive one, the one that declares nothing and the one that writes without
    destroying each wait for a human (here: rejected, so none of them runs)."""
    asking = ("delete_report", "purge_cache", "archive_report")

    async def scenario():
        args = ["gateway", "--", sys.executable, ANNOTATED]
        async with connect(BPM, args, gate.env) as session:
            listed = [tool.name for tool in (await session.list_tools()).tools]
            read = await session.call_tool("read_report", {"name": "q3"})
            calls = [
                (await waiting(session, tool, {} if tool == "purge_cache" else {"name": "q3"}))[0]
                for tool in asking
            ]
            for tool in asking:
                await in_thread(
                    lambda tool=tool: reviewer.release(
                        waiting_on(reviewer, tool), "no", approved=False
                    )
                )
            return listed, read, await asyncio.gather(*calls)

    listed, read, refused = run(scenario())
    assert listed == ["read_report", "delete_report", "archive_report", "purge_cache"]
    assert not read.is_error and text_of(read) == 'read_report done with {"name": "q3"}'
    assert all(result.is_error and "rejected by alice" in text_of(result) for result in refused)
    assert gate.calls() == [{"tool": "read_report", "arguments": {"name": "q3"}}]


def test_rules_on_annotations_deny_destructive_tools_and_allow_the_rest(gate: Gate, agent: Client):
    gate.config.write_text(
        '[defaults]\nserver = "reports"\n\n'
        '[[rules]]\nannotations = { destructiveHint = true }\naction = "deny"\n\n'
        '[[rules]]\ntools = ["*"]\naction = "allow"\n'
    )

    async def scenario():
        args = ["gateway", "--config", str(gate.config), "--", sys.executable, ANNOTATED]
        async with connect(BPM, args, gate.env) as session:
            listed = [tool.name for tool in (await session.list_tools()).tools]
            results = {
                tool: await session.call_tool(tool, arguments)
                for tool, arguments in (
                    ("read_report", {"name": "a"}),
                    ("archive_report", {"name": "a"}),
                    ("delete_report", {"name": "a"}),
                    ("purge_cache", {}),
                )
            }
            return listed, results

    listed, results = run(scenario())
    # Destructive: the one declaring it, and the one declaring nothing (the MCP default).
    assert listed == ["read_report", "archive_report"]
    assert not results["read_report"].is_error and not results["archive_report"].is_error
    for tool in ("delete_report", "purge_cache"):
        assert f"`{tool}` was not run: the gateway's rules[1] denies it" in text_of(results[tool])
    assert [call["tool"] for call in gate.calls()] == ["read_report", "archive_report"]
    assert list(agent.list()) == []


@asynccontextmanager
async def over_http(port: int, token: str | None) -> AsyncIterator[ClientSession]:
    """The official MCP client's session with `bpm gateway --listen`, as one agent."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=HANG_GUARD_SECONDS) as http,
        streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http) as streams,
        ClientSession(*streams) as session,
    ):
        await session.initialize()
        yield session


def test_listen_serves_two_agents_as_themselves_and_sigterm_cancels_what_waits(
    gate: Gate, reviewer: Client, agent_token: str
):
    """`--listen`: one gateway over streamable HTTP; each MCP client's agent token asks as
    that agent; no token or a wrong one is a 401; SIGTERM cancels the breakpoint still
    waiting, with the reason, and the gateway exits 0."""
    other_token = token_create_for_agent(agent_id="agent-b")[1]
    port = free_port()
    env = {name: value for name, value in gate.env.items() if name != "BPM_TOKEN"}
    command = [BPM, "gateway", "--listen", f"127.0.0.1:{port}", "--config", str(gate.config)]
    gateway = subprocess.Popen([*command, "--", sys.executable, UPSTREAM], env=env)
    try:
        wait_until(lambda: listing(port), what=f"the gateway listening on {port}")
        refused = [
            httpx.post(f"http://127.0.0.1:{port}/mcp", json={}, headers=headers).status_code
            for headers in ({}, {"Authorization": "Bearer bpma_not-a-real-token"})
        ]

        async def scenario():
            async with (
                over_http(port, agent_token) as first,
                over_http(port, other_token) as second,
            ):
                first_call, _ = await waiting(first, "delete_rows", {"table": "t", "where": "x"})
                second_call, _ = await waiting(second, "drop_database", {"name": "billing"})
                deleted = await in_thread(waiting_on, reviewer, "delete_rows")
                dropped = await in_thread(waiting_on, reviewer, "drop_database")
                await in_thread(reviewer.release, deleted, "ok")
                done = await asyncio.wait_for(first_call, HANG_GUARD_SECONDS)
                gateway.send_signal(signal.SIGTERM)
                stopped = await asyncio.wait_for(second_call, HANG_GUARD_SECONDS)
                return deleted, dropped, done, stopped

        deleted, dropped, done, stopped = run(scenario())
        exit_code = gateway.wait(HANG_GUARD_SECONDS)
    finally:
        if gateway.poll() is None:
            gateway.kill()
            gateway.wait()
    assert refused == [401, 401]
    assert reviewer.get(deleted).agent_id == "agent-a"
    assert reviewer.get(dropped).agent_id == "agent-b"
    assert not done.is_error
    stopped_bp = reviewer.get(dropped)
    assert stopped_bp.status == "cancelled" and stopped_bp.result.feedback == "the gateway stopped"
    assert stopped.is_error and f"approval request {dropped} was cancelled" in text_of(stopped)
    assert exit_code == 0
    ran = {"table": "t", "where": "x", "env": "prod"}
    assert gate.calls() == [{"tool": "delete_rows", "arguments": ran}]
