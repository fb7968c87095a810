"""The `requestState` a 2026-07-28 client echoes (issue 48, item 2): sealed by the SDK's
request-state boundary under the gateway's key, bound to the tool, the arguments and the
calling agent; the pending call inside it checked again; an approval run at most once.

The boundary runs as the gateway's server runs it (middleware around the handler), on the
gateway's own `caller` (a digest of the agent's token).
"""

import asyncio
import os
from typing import Any

import pytest
from bpm_client.gateway.config import parse_config
from bpm_client.gateway.input_required import (
    Executions,
    PendingCall,
    boundary,
    check,
    digest,
)
from bpm_client.gateway.server import Gateway
from bpm_client.gateway.tasks import TaskParams, Tasks
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, InputRequiredResult, TextContent

from tests.support.aio import run_async

KEY = os.urandom(32)
ARGUMENTS = {"table": "invoices", "where": "1=1"}
PENDING = PendingCall("bp-1", digest(ARGUMENTS), digest("bpma_alice"), "gw-1")


def gateway(token: str) -> Gateway:
    config = parse_config({"rules": [{"tools": ["purge"], "action": "ask"}]})
    return Gateway(config, None, "db", token=token)  # type: ignore[arg-type]


def context(state: str | None = None, arguments: dict[str, Any] = ARGUMENTS) -> Any:
    params: dict[str, Any] = {"name": "purge", "arguments": arguments}
    if state is not None:
        params["requestState"] = state
    return ServerRequestContext(
        session=None,  # type: ignore[arg-type]
        lifespan_context={},
        protocol_version="2026-07-28",
        method="tools/call",
        params=params,
    )


def sealed(token: str = "bpma_alice", key: bytes = KEY) -> str:
    """The requestState the gateway (as `token`'s agent) answers PENDING with."""

    async def handler(ctx: Any) -> Any:
        return InputRequiredResult(request_state=PENDING.dumps())

    wall = boundary(gateway(token).caller, audience="bpm-gateway:db", key=key)
    answer = run_async(wall(context(), handler))
    return answer.request_state


def unsealed(state: str, token: str = "bpma_alice", **changes: Any) -> str:
    """What the handler reads of a retry with `state` (or the boundary's refusal)."""
    seen: list[str] = []

    async def handler(ctx: Any) -> Any:
        seen.append(ctx.params["requestState"])
        return CallToolResult(content=[TextContent(type="text", text="ok")])

    wall = boundary(gateway(token).caller, audience="bpm-gateway:db", key=changes.pop("key", KEY))
    run_async(wall(context(state, **changes), handler))
    return seen[0]


def test_the_state_is_sealed_and_reads_back_for_the_same_call_and_agent():
    state = sealed()
    assert "bp-1" not in state and state != PENDING.dumps()  # encrypted, not merely signed
    assert PendingCall.loads(unsealed(state)) == PENDING


@pytest.mark.parametrize(
    "retry",
    [
        pytest.param(lambda s: unsealed(PENDING.dumps()), id="forged: the plaintext"),
        pytest.param(
            lambda s: unsealed(s[:-4] + ("AAAA" if s[-4:] != "AAAA" else "BBBB")), id="altered"
        ),
        pytest.param(lambda s: unsealed(s, arguments={"table": "users"}), id="other arguments"),
        pytest.param(lambda s: unsealed(s, token="bpma_mallory"), id="another agent"),
        pytest.param(lambda s: unsealed(s, key=os.urandom(32)), id="another gateway's key"),
    ],
)
def test_a_forged_altered_or_misused_state_never_reaches_the_handler(retry):
    with pytest.raises(MCPError) as refused:
        retry(sealed())
    assert refused.value.error.message == "Invalid or expired requestState"


def test_the_pending_call_is_checked_again_by_the_gateway():
    caller = digest("bpma_alice")
    assert check(PENDING, ARGUMENTS, caller, "gw-1") is None
    assert "another agent" in (check(PENDING, ARGUMENTS, digest("bpma_bob"), "gw-1") or "")
    assert "arguments differ" in (check(PENDING, {"table": "users"}, caller, "gw-1") or "")
    assert "has stopped" in (check(PENDING, ARGUMENTS, caller, "gw-2") or "")
    with pytest.raises(ValueError):
        PendingCall.loads('{"breakpoint_id": "bp-1"}')


def test_an_approval_runs_the_tool_once_however_often_it_is_retried():
    runs: list[str] = []

    async def run_tool() -> CallToolResult:
        runs.append("ran")
        await asyncio.sleep(0)
        return CallToolResult(content=[TextContent(type="text", text=f"run {len(runs)}")])

    async def failing() -> CallToolResult:
        runs.append("failed")
        raise RuntimeError("upstream gone")

    async def retries() -> list[CallToolResult]:
        executions = Executions()
        together = await asyncio.gather(*(executions.once("bp-1", run_tool) for _ in range(3)))
        later = await executions.once("bp-1", run_tool)
        broken = [await executions.once("bp-2", failing) for _ in range(2)]
        return [*together, later, *broken]

    *results, broken, broken_again = run_async(retries())
    assert runs == ["ran", "failed"]
    assert [result.content[0].text for result in results] == ["run 1"] * 4
    assert broken.is_error and broken is broken_again  # kept: the tool may have run


def test_a_task_is_its_agents_and_cancelling_it_cancels_its_breakpoint_with_the_reason():
    cancelled: list[str] = []

    async def scenario() -> tuple[Any, ...]:
        tasks = Tasks()
        decided = asyncio.Event()

        async def outcome() -> CallToolResult:
            await decided.wait()
            return CallToolResult(content=[TextContent(type="text", text="ran")])

        async def cancel(reason: str) -> None:
            cancelled.append(reason)

        first = tasks.start("bp-1", "alice", "waiting", outcome, cancel)
        second = tasks.start("bp-2", "alice", "waiting", outcome, cancel)
        with pytest.raises(MCPError):  # another agent's token: no such task
            await tasks.get(TaskParams(task_id=first["taskId"]), "mallory")
        await tasks.cancel(TaskParams(task_id=second["taskId"], reason="wrong one"), "alice")
        decided.set()
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        done = await tasks.get(TaskParams(task_id=first["taskId"]), "alice")
        gone = await tasks.get(TaskParams(task_id=second["taskId"]), "alice")
        return first, done, gone

    first, done, gone = run_async(scenario())
    assert first["resultType"] == "task" and first["status"] == "working"
    assert done["status"] == "completed" and done["result"]["content"][0]["text"] == "ran"
    assert gone["status"] == "cancelled" and "result" not in gone
    assert cancelled == ["the MCP client cancelled the task: wrong one"]
