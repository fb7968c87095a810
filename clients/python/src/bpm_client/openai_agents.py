"""OpenAI Agents SDK: the tool calls a run stops for (`needs_approval`) are answered by
breakpoints.

`Approvals.answer(result)` takes a run result's pending approvals (`result.interruptions`),
opens a breakpoint per tool call (the call's arguments as the proposal, the tool's parameter
schema as the form), waits for the decisions, and approves or rejects each call in the
RunState it returns; `Runner.run(agent, state)` then goes on. `Approvals.run` does all of it
until the run finishes.

Edited arguments: the SDK's `RunState.approve()` approves a call as the model made it (it
has no way to change the arguments). So a tool made by `Approvals.tool` (or wrapped by
`Approvals.gate`) reads the values the reviewer approved for its call (by the call id) and
runs with those, saying so in its output when they differ from the model's. Any other tool
cannot: its edited approval becomes a rejection whose message gives the reviewer's values,
so that the model can call it again with them (that call asks again).

The breakpoint's Idempotency-Key is the tool call's id: a run resumed elsewhere (its
RunState saved with `to_string()` and loaded with `RunState.from_string`) finds the
breakpoint it opened (the service keeps a key 24 hours) instead of asking again.

Needs the `openai-agents` extra.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from typing import Any

from . import frameworks
from .aio import AsyncClient
from .bodies import BreakpointFields
from .extras import require_extra
from .models import BreakpointResult

try:
    from agents import Agent, FunctionTool, Runner, RunResult, RunState, function_tool
    from agents.items import ToolApprovalItem
    from agents.tool_context import ToolContext
except ImportError as error:
    require_extra(error, extra="openai-agents", packages=("agents", "openai"))
    raise

__all__ = ["Approvals"]

FRAMEWORK = "openai-agents"


class Approvals:
    """Answers an Agents SDK run's tool approvals with breakpoints.

    `client`: the SDK's AsyncClient (by default one from BPM_URL and BPM_TOKEN for each
    answer); `timeout`: seconds to wait for a decision before WaitTimeout; `run_id`, `tags`,
    `expert`, `ttl`: for every breakpoint opened (see `Client.breakpoint`).
    """

    def __init__(
        self,
        client: AsyncClient | None = None,
        *,
        timeout: float | None = None,
        run_id: str | None = None,
        tags: Iterable[str] = (),
        expert: str | list[str] | None = None,
        ttl: int | None = None,
    ):
        self.client = client
        self.timeout = timeout
        self.run_id = run_id
        self.tags = list(tags)
        self.expert = expert
        self.ttl = ttl
        # The values reviewers approved, by tool call id (a gated tool runs with them).
        self._approved: dict[str, dict[str, Any]] = {}

    # --- tools ------------------------------------------------------------------------

    def tool(self, func: Callable[..., Any] | None = None, **options: Any) -> Any:
        """`@function_tool` with `needs_approval=True` whose calls run with the arguments a
        reviewer approved (edited or not): `@approvals.tool` or `@approvals.tool(name_override=...)`."""

        def make(function: Callable[..., Any]) -> FunctionTool:
            return self.gate(function_tool(function, needs_approval=True, **options))

        return make if func is None else make(func)

    def gate(self, tool: FunctionTool) -> FunctionTool:
        """`tool`, changed in place: its calls need approval and run with the approved
        arguments (fetched from the breakpoint when this process has not seen the decision)."""
        if not tool.needs_approval:
            tool.needs_approval = True
        if not self.gates(tool):
            tool.on_invoke_tool = _GatedInvoker(self, tool, tool.on_invoke_tool)
        return tool

    def gates(self, tool: Any) -> bool:
        """Whether `tool` runs with the values this Approvals' reviewers approved."""
        invoker = getattr(tool, "on_invoke_tool", None)
        return isinstance(invoker, _GatedInvoker) and invoker.approvals is self

    # --- answering --------------------------------------------------------------------

    async def answer(self, pending: RunResult | RunState[Any, Any]) -> RunState[Any, Any]:
        """The RunState of `pending` (a run result, or a state loaded with
        `RunState.from_string`) with each pending approval decided by a breakpoint:
        approved (with the reviewer's values) or rejected (the model reads why)."""
        state = pending if isinstance(pending, RunState) else pending.to_state()
        items = state.get_interruptions()
        async with self._connection() as client:
            results = await asyncio.gather(*(self._ask(client, _call_of(item)) for item in items))
        for item, result in zip(items, results, strict=True):
            self._apply(state, item, result)
        return state

    async def run(self, agent: Agent[Any], input: Any, **options: Any) -> RunResult:
        """`Runner.run(agent, input, **options)`, answering its approvals by breakpoints
        and resuming until the run stops needing any."""
        result = await Runner.run(agent, input, **options)
        while result.interruptions:
            result = await Runner.run(agent, await self.answer(result), **options)
        return result

    def run_sync(self, agent: Agent[Any], input: Any, **options: Any) -> RunResult:
        """`run` for code without an event loop."""
        return asyncio.run(self.run(agent, input, **options))

    def _apply(
        self, state: RunState[Any, Any], item: ToolApprovalItem, result: BreakpointResult
    ) -> None:
        """Approve or reject `item` in `state` as `result` decided."""
        call = _call_of(item)
        if not result.approved:
            state.reject(item, rejection_message=_not_run(call.tool_name, result))
            return
        if result.values is not None and call.call_id:
            self._approved[call.call_id] = result.values
        if result.edited and not self.gates(call.tool):
            state.reject(item, rejection_message=_edit_message(call.tool_name, result))
            return
        state.approve(item)

    async def _ask(self, client: AsyncClient, call: _ToolCall) -> BreakpointResult:
        """Open (or find again, by the call's id) the breakpoint about `call`; its decision."""
        question, fields = self._breakpoint(call)
        key = frameworks.idempotency_key(FRAMEWORK, call.call_id) if call.call_id else None
        return await client.breakpoint(
            question, idempotency_key=key, timeout=self.timeout, **fields
        )

    async def _decision_for(self, call: _ToolCall) -> BreakpointResult:
        """The decision on `call` (its breakpoint, found again by the call id)."""
        async with self._connection() as client:
            return await self._ask(client, call)

    def _breakpoint(self, call: _ToolCall) -> tuple[str, BreakpointFields]:
        """The question and the fields of the breakpoint that asks about `call`."""
        about = f"\n\nWhat the tool does: {call.description.strip()}" if call.description else ""
        question = (
            f"The agent `{call.agent_name}` wants to call the tool `{call.tool_name}` with the "
            f"arguments below. Approve to run it with these arguments (edit them first if "
            f"they are not right); reject, with a reason, to stop it: the agent reads your "
            f"comment.{about}"
        )
        fields = BreakpointFields(
            title=f"Call {call.tool_name}?",
            payload={
                "openaiAgents": {
                    "agent": call.agent_name,
                    "tool": call.tool_name,
                    "callId": call.call_id,
                }
            },
            key=frameworks.breakpoint_key(FRAMEWORK, call.tool_name),
            tags=self.tags,
            expert=self.expert,
            ttl=self.ttl,
            run_id=frameworks.run_id(self.run_id),
        )
        if call.arguments is not None:
            fields["proposal"] = call.arguments
            if call.schema is not None:
                fields["form"] = call.schema
        return question, fields

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[AsyncClient]:
        if self.client is not None:
            yield self.client
            return
        async with AsyncClient() as client:
            yield client


class _ToolCall:
    """What a breakpoint about one tool call says: the same from a pending approval and
    from the tool's own invocation, so that both find the same breakpoint."""

    def __init__(self, *, agent: Any, tool_name: str, call_id: str | None, arguments: str | None):
        self.agent_name: str = getattr(agent, "name", None) or "agent"
        self.tool_name = tool_name
        self.call_id = call_id
        self.arguments = _object(arguments)
        tools = getattr(agent, "tools", None) or []
        self.tool: FunctionTool | None = next(
            (t for t in tools if isinstance(t, FunctionTool) and t.name == tool_name), None
        )
        self.schema = self.tool.params_json_schema if self.tool is not None else None
        self.description = self.tool.description if self.tool is not None else None


def _call_of(item: ToolApprovalItem) -> _ToolCall:
    return _ToolCall(
        agent=item.agent,
        tool_name=item.tool_name or item.name or "tool",
        call_id=item.call_id,
        arguments=item.arguments,
    )


def _object(arguments: str | None) -> dict[str, Any] | None:
    """The call's arguments when they are a JSON object (the form's proposal), else None."""
    try:
        value = json.loads(arguments) if arguments else None
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _not_run(tool: str, result: BreakpointResult) -> str:
    return f"`{tool}` was not run: {frameworks.not_approved(result)}"


def _edit_message(tool: str, result: BreakpointResult) -> str:
    who = frameworks.people(result.responded_by) or "a reviewer"
    message = (
        f"`{tool}` was not run: {who} approved it only with these arguments instead "
        f"(approval request {result.breakpoint_id}): {json.dumps(result.values)}. Call "
        f"`{tool}` again with exactly these arguments to run it."
    )
    feedback = (result.feedback or "").strip()
    return f"{message} Their feedback: {feedback}" if feedback else message


class _GatedInvoker:
    """A gated tool's `on_invoke_tool`: runs the tool with the approved values."""

    def __init__(self, approvals: Approvals, tool: FunctionTool, invoke: Any):
        self.approvals = approvals
        self.tool = tool
        self.invoke = invoke

    async def __call__(self, context: ToolContext[Any], arguments: str) -> Any:
        values = self.approvals._approved.get(context.tool_call_id)
        if values is None:  # decided in another process, or approved without a breakpoint
            call = _ToolCall(
                agent=context.agent,
                tool_name=self.tool.name,
                call_id=context.tool_call_id,
                arguments=arguments,
            )
            result = await self.approvals._decision_for(call)
            if not result.approved:
                return _not_run(self.tool.name, result)
            values = result.values
        if values is None:  # arguments that are not a JSON object: approved as they were
            return await self.invoke(context, arguments)
        output = await self.invoke(context, json.dumps(values))
        if values != _object(arguments) and isinstance(output, str):
            output += (
                f"\n(Run with the arguments a reviewer approved, which differ from those "
                f"proposed: {json.dumps(values)})"
            )
        return output
