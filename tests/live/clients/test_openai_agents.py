"""bpm_client.openai_agents against the live system: an OpenAI Agents SDK run (the real
package, a scripted model: tests/support/agents_model.py) whose tool calls need approval,
answered by breakpoints that a reviewer decides through the API."""

import asyncio
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, RunState, function_tool, set_tracing_disabled
from bpm_client import AsyncClient, Client
from bpm_client.openai_agents import Approvals

from tests.support.agents_model import ScriptedModel, ToolCall
from tests.support.aio import run_async
from tests.support.reviewing import (
    SAFETY_SECONDS,
    Reviewer,
    approve,
    reject,
    waiting_breakpoints,
)

set_tracing_disabled(True)  # the SDK's traces would go to OpenAI's servers
RUN = {"run_config": RunConfig(tracing_disabled=True)}
RUN_ID = "ops-run-1"


class Ops:
    """A `scale` tool gated by `approvals`, and the calls it really ran."""

    def __init__(self, approvals: Approvals):
        self.ran: list[tuple[str, int]] = []

        @approvals.tool
        def scale(service: str, replicas: int) -> str:
            """Scale a service to a number of replicas."""
            self.ran.append((service, replicas))
            return f"scaled {service} to {replicas}"

        self.scale = scale

    def agent(self, model: ScriptedModel, *tools: Any) -> Agent[Any]:
        return Agent(name="ops", model=model, tools=[self.scale, *tools])


def run_with_approvals(live, token: str, ops_tools, model: ScriptedModel, **settings: Any):
    """`Approvals.run` with a fresh AsyncClient (one per event loop); the Ops and result."""

    async def scenario():
        async with AsyncClient(live.base_url, token, strict=True) as client:
            approvals = Approvals(client, run_id=RUN_ID, timeout=SAFETY_SECONDS, **settings)
            ops = Ops(approvals)
            agent = ops.agent(model, *ops_tools(approvals))
            return ops, await approvals.run(agent, "Scale web to 3 replicas", **RUN)

    return run_async(scenario())


def no_tools(approvals: Approvals) -> list[Any]:
    return []


def test_an_approved_call_runs_as_the_model_proposed(live, agent_token, reviewer: Client):
    call = ToolCall("scale", {"service": "web", "replicas": 3})
    model = ScriptedModel([call], "web scaled")
    decider = Reviewer(reviewer, approve("fine"), run_id=RUN_ID)
    ops, result = run_with_approvals(live, agent_token, no_tools, model, tags=["ops"])
    (seen,) = decider.join()
    assert ops.ran == [("web", 3)] and result.final_output == "web scaled"
    assert model.tool_outputs() == {call.call_id: "scaled web to 3"}
    assert seen.key == "openai-agents.scale" and seen.tags == ["ops"]
    assert seen.payload["proposal"] == {"service": "web", "replicas": 3}
    assert seen.payload["form"] == ops.scale.params_json_schema
    assert seen.payload["openaiAgents"] == {"agent": "ops", "tool": "scale", "callId": call.call_id}


def test_an_edited_approval_runs_the_reviewers_arguments(live, agent_token, reviewer: Client):
    call = ToolCall("scale", {"service": "web", "replicas": 3})
    model = ScriptedModel([call], "done")
    decider = Reviewer(
        reviewer, approve("3 is not enough", {"service": "web", "replicas": 5}), run_id=RUN_ID
    )
    ops, _ = run_with_approvals(live, agent_token, no_tools, model)
    decider.join()
    assert ops.ran == [("web", 5)]
    told = model.tool_outputs()[call.call_id]
    assert told.startswith("scaled web to 5\n")
    assert '{"service": "web", "replicas": 5}' in told  # the model learns of the edit


def test_a_rejection_runs_nothing_and_tells_the_model_why(live, agent_token, reviewer: Client):
    call = ToolCall("scale", {"service": "web", "replicas": 300})
    model = ScriptedModel([call], "not scaled")
    decider = Reviewer(reviewer, reject("300 replicas is far too many"), run_id=RUN_ID)
    ops, result = run_with_approvals(live, agent_token, no_tools, model)
    (seen,) = decider.join()
    assert ops.ran == [] and result.final_output == "not scaled"
    assert model.tool_outputs()[call.call_id] == (
        f"`scale` was not run: rejected by alice (approval request {seen.breakpoint_id}). "
        "Their feedback: 300 replicas is far too many"
    )


def test_an_edit_of_a_tool_it_does_not_wrap_is_a_rejection_naming_the_values(
    live, agent_token, reviewer: Client
):
    """A plain `needs_approval` tool runs the model's arguments or nothing: the edit goes
    back to the model, which may call the tool again with it (and that call asks again)."""
    restarted: list[int] = []

    def plain_tools(approvals: Approvals) -> list[Any]:
        @function_tool(needs_approval=True)
        def restart(service: str, wait_seconds: int) -> str:
            """Restart a service."""
            restarted.append(wait_seconds)
            return "restarted"

        return [restart]

    call = ToolCall("restart", {"service": "web", "wait_seconds": 0})
    model = ScriptedModel([call], "done")
    decider = Reviewer(
        reviewer, approve("drain first", {"service": "web", "wait_seconds": 30}), run_id=RUN_ID
    )
    run_with_approvals(live, agent_token, plain_tools, model)
    (seen,) = decider.join()
    assert restarted == []
    assert model.tool_outputs()[call.call_id] == (
        f"`restart` was not run: alice approved it only with these arguments instead "
        f'(approval request {seen.breakpoint_id}): {{"service": "web", "wait_seconds": 30}}. '
        "Call `restart` again with exactly these arguments to run it. Their feedback: drain first"
    )


def test_two_calls_of_one_turn_wait_together_and_are_decided_one_by_one(
    live, agent_token, reviewer: Client
):
    first = ToolCall("scale", {"service": "web", "replicas": 2})
    second = ToolCall("scale", {"service": "db", "replicas": 9})
    model = ScriptedModel([first, second], "done")

    def decide_both(client: Client, waiting: list[Any]) -> None:
        both = {bp.payload["proposal"]["service"]: bp for bp in waiting}
        client.release(both["web"].breakpoint_id, "ok")
        client.release(both["db"].breakpoint_id, "not the database", approved=False)

    decider = Reviewer(reviewer, decide_both, count=2, run_id=RUN_ID)
    ops, _ = run_with_approvals(live, agent_token, no_tools, model)
    decider.join()
    assert ops.ran == [("web", 2)]
    outputs = model.tool_outputs()
    assert outputs[first.call_id] == "scaled web to 2"
    assert outputs[second.call_id].startswith("`scale` was not run: rejected by alice")


def test_a_run_resumed_elsewhere_finds_its_breakpoint_and_the_edit(
    live, agent_token, reviewer: Client
):
    """The run stops for approval and is saved (RunState.to_string); the process answering
    it stops while it waits; the reviewer approves with an edit; another Approvals (nothing
    in memory) resumes the saved state: it finds the same breakpoint by the tool call's id,
    and the tool runs with the edited values."""
    call = ToolCall("scale", {"service": "web", "replicas": 3})

    async def first_process() -> str:
        async with AsyncClient(live.base_url, agent_token) as client:
            approvals = Approvals(client, run_id=RUN_ID, timeout=SAFETY_SECONDS)
            agent = Ops(approvals).agent(ScriptedModel([call]))
            result = await Runner.run(agent, "Scale web", **RUN)
            saved = result.to_state().to_string()
            answering = asyncio.create_task(approvals.answer(result))
            await asyncio.to_thread(waiting_breakpoints, reviewer, run_id=RUN_ID)
            answering.cancel()  # the process stops while it waits
            with pytest.raises(asyncio.CancelledError):
                await answering
            return saved

    saved = run_async(first_process())
    (waiting,) = waiting_breakpoints(reviewer, run_id=RUN_ID)
    reviewer.release(waiting.breakpoint_id, "5, please", values={"service": "web", "replicas": 5})

    async def second_process() -> tuple[Ops, Any]:
        async with AsyncClient(live.base_url, agent_token) as client:
            approvals = Approvals(client, run_id=RUN_ID, timeout=SAFETY_SECONDS)
            ops = Ops(approvals)
            agent = ops.agent(ScriptedModel("scaled to 5"))
            state = await RunState.from_string(agent, saved)
            result = await Runner.run(agent, await approvals.answer(state), **RUN)
            return ops, result

    ops, result = run_async(second_process())
    assert ops.ran == [("web", 5)] and result.final_output == "scaled to 5"
    assert [bp.breakpoint_id for bp in reviewer.list(run_id=RUN_ID)] == [waiting.breakpoint_id]


def test_a_gated_tool_approved_without_a_breakpoint_asks_one_first(
    live, agent_token, reviewer: Client
):
    """Approving in the RunState directly does not get round the gate: the tool itself asks
    (the same breakpoint answer() would have opened) and runs only what a reviewer approved."""
    call = ToolCall("scale", {"service": "web", "replicas": 3})

    async def scenario() -> tuple[Ops, dict[str, str]]:
        async with AsyncClient(live.base_url, agent_token) as client:
            approvals = Approvals(client, run_id=RUN_ID, timeout=SAFETY_SECONDS)
            ops = Ops(approvals)
            model = ScriptedModel([call], "done")
            agent = ops.agent(model)
            result = await Runner.run(agent, "Scale web", **RUN)
            state = result.to_state()
            for item in state.get_interruptions():
                state.approve(item)
            await Runner.run(agent, state, **RUN)
            return ops, model.tool_outputs()

    decider = Reviewer(reviewer, reject("no"), run_id=RUN_ID)
    ops, outputs = run_async(scenario())
    decider.join()
    assert ops.ran == []
    assert outputs[call.call_id].startswith("`scale` was not run: rejected by alice")
