"""`bpm gateway` with an MCP client that negotiates 2026-07-28 (issue 48, item 2).

The official Python MCP client (`Client(..., mode="2026-07-28")`) starts the gateway over
stdio in front of gateway_upstream.py (each call it runs appended to a log file, so the
test counts executions). An `ask` call answers `input_required` (a URL-mode elicitation of
the breakpoint's console page and a sealed requestState); the test drives the retries
itself (`allow_input_required=True`) and decides through the API as a reviewer.
"""

import asyncio
import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Literal

import httpx2
import pytest
from bpm_client import Client as BpmClient
from mcp import Client, StdioServerParameters
from mcp.client.extension import ClientExtension, ResultClaim
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import (
    CallToolResult,
    ElicitRequest,
    ElicitRequestURLParams,
    ElicitResult,
    InputRequiredResult,
    Request,
    RequestParams,
    Result,
)
from pydantic import TypeAdapter

from accounts.tokens import token_create_for_agent
from tests.live.clients.conftest import BPM
from tests.support.gateway import (
    CONFIG,
    UPSTREAM,
    Gate,
    in_thread,
    listing,
    text_of,
    waiting_on,
)
from tests.support.mcp import HANG_GUARD_SECONDS, run
from tests.support.net import free_port
from tests.support.system import wait_until

ARGUMENTS = {"table": "invoices", "where": "year < 2020", "env": "prod"}


@pytest.fixture
def gate(tmp_path: Path, bpm_env: dict[str, str]) -> Gate:
    """test_gateway.py's rules (delete_rows asks) and the upstream's call log."""
    config, log = tmp_path / "gate.toml", tmp_path / "calls.jsonl"
    config.write_text(CONFIG)
    return Gate(config, log, {**bpm_env, "GATEWAY_TEST_LOG": str(log)})


async def shown(context: Any, params: Any) -> ElicitResult:
    """An elicitation callback (so the client declares URL mode): the user opens the page."""
    return ElicitResult(action="accept")


def modern_client(gate: Gate, elicitation: Any = shown, **options: Any) -> Client:
    """The official client negotiating 2026-07-28 with `bpm gateway ... -- python upstream`
    (showing URL elicitations unless `elicitation` is None)."""
    args = ["gateway", "--config", str(gate.config), "--", sys.executable, UPSTREAM]
    params = StdioServerParameters(command=BPM, args=args, env=gate.env)
    return Client(params, mode="2026-07-28", elicitation_callback=elicitation, **options)


async def call(
    client: Client, state: str | None = None, arguments: dict[str, Any] = ARGUMENTS
) -> CallToolResult | InputRequiredResult:
    return await client.session.call_tool(
        "delete_rows", arguments, request_state=state, allow_input_required=True
    )


def elicitation_of(answer: Any) -> ElicitRequestURLParams:
    assert isinstance(answer, InputRequiredResult), answer
    assert answer.input_requests is not None and answer.request_state
    (request,) = answer.input_requests.values()
    assert isinstance(request, ElicitRequest) and isinstance(request.params, ElicitRequestURLParams)
    return request.params


def test_input_required_then_retries_then_the_edited_call_runs_once(
    gate: Gate, reviewer: BpmClient
):
    edited = {**ARGUMENTS, "where": "year < 2015"}

    async def scenario():
        async with modern_client(gate) as client:
            assert client.protocol_version == "2026-07-28"
            first = await call(client)
            breakpoint_id = await in_thread(waiting_on, reviewer, "delete_rows")
            waiting = await call(client, first.request_state)  # before any decision
            calls_while_waiting = gate.calls()
            await in_thread(reviewer.release, breakpoint_id, "only the oldest", values=edited)
            result = await call(client, waiting.request_state)
            again = await call(client, waiting.request_state)  # the same approval, twice more
            from_first = await call(client, first.request_state)
            return first, waiting, calls_while_waiting, breakpoint_id, result, again, from_first

    first, waiting, calls_while_waiting, breakpoint_id, result, again, from_first = run(scenario())
    page = elicitation_of(first)
    assert page.mode == "url" and page.url == reviewer.get(breakpoint_id).console_url
    assert "`delete_rows`" in page.message and "billing-db" in page.message
    assert breakpoint_id in page.message
    assert breakpoint_id not in first.request_state  # sealed: not even readable
    assert isinstance(waiting, InputRequiredResult) and waiting.request_state
    assert calls_while_waiting == []  # nothing ran before the approval
    expected = f"delete_rows done with {json.dumps(edited, sort_keys=True)}"
    for answer in (result, again, from_first):
        assert isinstance(answer, CallToolResult) and not answer.is_error
        assert text_of(answer) == expected
    assert gate.calls() == [{"tool": "delete_rows", "arguments": edited}]  # ONE execution


def test_the_clients_own_loop_shows_the_page_and_gets_the_result(gate: Gate, reviewer: BpmClient):
    """`Client.call_tool` as an agent calls it: the SDK shows the page (its elicitation
    callback, here the reviewer approves meanwhile) and retries until the result."""
    pages: list[tuple[ElicitRequestURLParams, str]] = []

    async def show_page_and_approve(context: Any, params: Any) -> ElicitResult:
        breakpoint_id = await in_thread(waiting_on, reviewer, "delete_rows")
        pages.append((params, (await in_thread(reviewer.get, breakpoint_id)).console_url))
        await in_thread(reviewer.release, breakpoint_id, "ok")
        return ElicitResult(action="accept")

    async def scenario():
        async with modern_client(gate, show_page_and_approve) as client:
            return await client.call_tool("delete_rows", ARGUMENTS)

    result = run(scenario())
    ((page, console_url),) = pages
    assert page.mode == "url" and page.url == console_url
    assert not result.is_error and gate.calls() == [{"tool": "delete_rows", "arguments": ARGUMENTS}]


def test_a_client_without_elicitation_retries_on_the_state_alone(gate: Gate, reviewer: BpmClient):
    """A client that declares no elicitation is sent none (it could only refuse it): its
    loop retries on the state until a reviewer decides (found in the console)."""

    async def scenario():
        async with modern_client(gate, None, input_required_max_rounds=1000) as client:
            first = await call(client)
            assert isinstance(first, InputRequiredResult) and not first.input_requests
            calling = asyncio.create_task(client.call_tool("delete_rows", ARGUMENTS))
            breakpoint_ids = await in_thread(lambda: [waiting_on_all(reviewer)])
            for breakpoint_id in breakpoint_ids[0]:
                await in_thread(reviewer.release, breakpoint_id, "ok")
            return await asyncio.wait_for(calling, HANG_GUARD_SECONDS)

    result = run(scenario())
    assert isinstance(result, CallToolResult) and not result.is_error
    assert gate.calls() == [{"tool": "delete_rows", "arguments": ARGUMENTS}]


def waiting_on_all(reviewer: BpmClient) -> list[str]:
    """Both waiting delete_rows breakpoints (the manual call's and the loop's), once both
    are there."""
    found: list[str] = []

    def both() -> bool:
        found[:] = [
            bp.breakpoint_id
            for bp in reviewer.list(status="waiting")
            if bp.payload.get("mcp", {}).get("tool") == "delete_rows"
        ]
        return len(found) == 2

    wait_until(both, what="two waiting delete_rows breakpoints")
    return found


def test_a_rejection_is_an_error_result_with_who_and_why(gate: Gate, reviewer: BpmClient):
    async def scenario():
        async with modern_client(gate) as client:
            first = await call(client)
            breakpoint_id = await in_thread(waiting_on, reviewer, "delete_rows")
            await in_thread(reviewer.release, breakpoint_id, "not in prod", approved=False)
            return breakpoint_id, await call(client, first.request_state)

    breakpoint_id, rejected = run(scenario())
    assert isinstance(rejected, CallToolResult) and rejected.is_error
    assert text_of(rejected) == (
        f"`delete_rows` was not run: rejected by alice (approval request {breakpoint_id}). "
        "Their feedback: not in prod"
    )
    assert gate.calls() == []


def test_a_forged_or_altered_request_state_is_refused_and_nothing_runs(
    gate: Gate, reviewer: BpmClient
):
    async def scenario():
        refused: dict[str, MCPError] = {}
        async with modern_client(gate) as client:
            first = await call(client)
            breakpoint_id = await in_thread(waiting_on, reviewer, "delete_rows")
            await in_thread(reviewer.release, breakpoint_id, "ok")
            state = first.request_state
            middle = len(state) // 2
            flipped = "A" if state[middle] != "A" else "B"
            tries = {
                "forged plaintext": f'{{"breakpoint_id": "{breakpoint_id}"}}',
                "forged token": "v1." + "A" * 60,
                "altered": state[:middle] + flipped + state[middle + 1 :],
            }
            for name, bad in tries.items():
                with pytest.raises(MCPError) as caught:
                    await call(client, bad)
                refused[name] = caught.value
            with pytest.raises(MCPError) as caught:  # the state of other arguments
                await call(client, state, {**ARGUMENTS, "where": "1=1"})
            refused["other arguments"] = caught.value
            calls_after_refusals = gate.calls()
            return refused, calls_after_refusals, await call(client, state)

    refused, calls_after_refusals, result = run(scenario())
    for error in refused.values():
        assert error.error.message == "Invalid or expired requestState"
    assert calls_after_refusals == []  # nothing ran for any of them
    assert isinstance(result, CallToolResult) and not result.is_error  # the genuine one
    assert [call["tool"] for call in gate.calls()] == ["delete_rows"]


def over_http(port: int, token: str, http: Any) -> Client:
    """The official client negotiating 2026-07-28 with `bpm gateway --listen`, as one agent."""
    url = f"http://127.0.0.1:{port}/mcp"
    transport = streamable_http_client(url, http_client=http)
    return Client(transport, mode="2026-07-28", elicitation_callback=shown)


def test_listen_binds_the_state_to_the_agent_and_sigterm_cancels_what_retries_wait_on(
    gate: Gate, reviewer: BpmClient, agent_token: str
):
    """Two agents through one `--listen` gateway: the second cannot use the first's state;
    the first's retry runs its approved call; SIGTERM cancels the breakpoint the second
    agent's retries wait on, with the reason, and the gateway exits 0."""
    other_token = token_create_for_agent(agent_id="agent-b")[1]
    port = free_port()
    env = {name: value for name, value in gate.env.items() if name != "BPM_TOKEN"}
    command = [BPM, "gateway", "--listen", f"127.0.0.1:{port}", "--config", str(gate.config)]
    gateway = subprocess.Popen([*command, "--", sys.executable, UPSTREAM], env=env)
    try:
        wait_until(lambda: listing(port), what=f"the gateway listening on {port}")

        async def scenario():
            async with (
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {agent_token}"}) as a_http,
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {other_token}"}) as b_http,
                over_http(port, agent_token, a_http) as first,
                over_http(port, other_token, b_http) as second,
            ):
                asked = await call(first)
                with pytest.raises(MCPError) as stolen:
                    await call(second, asked.request_state)
                deleted = await in_thread(waiting_on, reviewer, "delete_rows")
                await in_thread(reviewer.release, deleted, "ok")
                done = await call(first, asked.request_state)
                dropping = await second.session.call_tool(
                    "drop_database", {"name": "billing"}, allow_input_required=True
                )
                dropped = await in_thread(waiting_on, reviewer, "drop_database")
                gateway.send_signal(signal.SIGTERM)
                return stolen.value, deleted, done, dropping, dropped

        stolen, deleted, done, dropping, dropped = run(scenario())
        exit_code = gateway.wait(HANG_GUARD_SECONDS)
    finally:
        if gateway.poll() is None:
            gateway.kill()
            gateway.wait()
    assert stolen.error.message == "Invalid or expired requestState"
    assert reviewer.get(deleted).agent_id == "agent-a"
    assert isinstance(done, CallToolResult) and not done.is_error
    assert isinstance(dropping, InputRequiredResult)
    stopped = reviewer.get(dropped)
    assert stopped.agent_id == "agent-b"
    assert stopped.status == "cancelled" and stopped.result.feedback == "the gateway stopped"
    assert exit_code == 0
    assert gate.calls() == [{"tool": "delete_rows", "arguments": ARGUMENTS}]


class TaskHandle(Result):
    """The Tasks extension's handle, as this test's client claims `resultType: "task"`."""

    result_type: Literal["task"] = "task"
    task_id: str
    status: str
    status_message: str | None = None


class TaskId(RequestParams):
    task_id: str
    reason: str | None = None


class GetTask(Request[TaskId, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskId


class CancelTask(Request[TaskId, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskId


class TasksRequester(ClientExtension):
    """Declares the Tasks extension and claims its handle (resolved by the test itself)."""

    identifier = "io.modelcontextprotocol/tasks"

    def claims(self) -> list[ResultClaim[Any]]:
        async def unresolved(handle: Any, context: Any) -> CallToolResult:
            raise AssertionError("the test polls the task itself")

        return [ResultClaim(result_type="task", model=TaskHandle, resolve=unresolved)]


async def task_state(client: Client, request: Any) -> dict[str, Any]:
    return await client.session.send_request(request, TypeAdapter(dict[str, Any]))


def test_a_tasks_client_gets_a_task_then_its_result_and_cancels_another(
    gate: Gate, reviewer: BpmClient
):
    """A client declaring the Tasks extension: `ask` returns a task; tasks/get answers
    `working`, then `completed` with the tool's result once approved (run once);
    tasks/cancel cancels the other task's breakpoint, with the reason."""

    async def scenario():
        async with modern_client(gate, extensions=[TasksRequester()]) as client:
            handle = await client.session.call_tool("delete_rows", ARGUMENTS, allow_claimed=True)
            working = await task_state(client, GetTask(params=TaskId(task_id=handle.task_id)))
            deleted = await in_thread(waiting_on, reviewer, "delete_rows")
            await in_thread(reviewer.release, deleted, "ok")
            get = GetTask(params=TaskId(task_id=handle.task_id))
            done = await task_state(client, get)
            while done["status"] == "working":
                await asyncio.sleep(0.2)
                done = await task_state(client, get)
            again = await task_state(client, get)
            other = await client.session.call_tool(
                "drop_database", {"name": "billing"}, allow_claimed=True
            )
            dropped = await in_thread(waiting_on, reviewer, "drop_database")
            cancelled = await task_state(
                client, CancelTask(params=TaskId(task_id=other.task_id, reason="wrong database"))
            )
            after = await task_state(client, GetTask(params=TaskId(task_id=other.task_id)))
            return handle, working, done, again, dropped, cancelled, after

    handle, working, done, again, dropped, cancelled, after = run(scenario())
    assert isinstance(handle, TaskHandle) and handle.status == "working"
    assert working["status"] == "working" and working["taskId"] == handle.task_id
    expected = f"delete_rows done with {json.dumps(ARGUMENTS, sort_keys=True)}"
    assert done["status"] == "completed" and not done["result"].get("isError")
    assert done["result"]["content"][0]["text"] == expected
    assert again["result"] == done["result"]
    assert gate.calls() == [{"tool": "delete_rows", "arguments": ARGUMENTS}]  # once
    assert cancelled["resultType"] == "complete" and after["status"] == "cancelled"
    stopped = reviewer.get(dropped)
    assert stopped.status == "cancelled"
    assert stopped.result.feedback == "the MCP client cancelled the task: wrong database"
