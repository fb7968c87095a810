"""LangGraph: a node asks a person, and the graph goes on with the decision.

In a node, `ask("Deploy?", proposal=..., form=...)` stops the graph at LangGraph's
`interrupt()`, with the breakpoint to open as the interrupt's value. `invoke(graph, input,
config)` runs the graph; where it stopped at `ask()`, it opens that breakpoint, waits for the
decision and resumes the graph with it (`Command(resume=...)`): `ask()` then returns the
decision (a BreakpointResult: `approved`, `values`, `edited`, `feedback`...).

The breakpoint's Idempotency-Key is the thread id and the interrupt's id, both kept by the
graph's checkpointer. A process that stopped while it waited (a crash, a deploy) runs
`invoke` again with the same checkpointer and thread id: the thread is still stopped at the
same interrupt, so the same key finds the same breakpoint (the service keeps a key 24 hours),
already decided or still waiting, and nobody is asked twice.

Needs the `langgraph` extra (LangGraph and its SQLite checkpointer).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any, Unpack

from . import frameworks
from .aio import AsyncClient
from .bodies import BreakpointFields, context_file
from .client import Client
from .extras import require_extra
from .models import BreakpointResult

try:
    from langgraph.config import get_config
    from langgraph.types import Command, Interrupt, StateSnapshot, interrupt
except ImportError as error:
    require_extra(error, extra="langgraph", packages=("langgraph",))
    raise

__all__ = ["REQUEST", "ask", "ainvoke", "invoke"]

# The key of an interrupt's value that holds a breakpoint to open: {REQUEST: {"question",
# "fields"}} (JSON, so that any checkpointer keeps it).
REQUEST = "bpm.breakpoint"


def ask(question: str, **fields: Unpack[BreakpointFields]) -> BreakpointResult:
    """In a node: ask a person `question` (and the `Client.breakpoint` fields: `form`,
    `proposal`, `tags`, `expert`, `ttl`, `files`...) and return the decision.

    The graph stops here until `invoke` (or `ainvoke`) resumes it with the decision; as with
    any `interrupt()`, the node then runs again from its start, so what comes before `ask()`
    must be safe to repeat. The key defaults to `langgraph.<node>` (auto-approval rules and
    autoApproveAfterN count per node); files are read now, by the node.
    """
    answer = interrupt({REQUEST: {"question": question, "fields": _json_fields(fields)}})
    return decision(answer)


def _json_fields(fields: BreakpointFields) -> dict[str, Any]:
    """`fields` as JSON, as the checkpointer keeps them; files read into their contents."""
    data: dict[str, Any] = {}
    for name, value in fields.items():
        if value is None:
            continue
        if name == "files":
            value = [context_file(item) for item in value]  # type: ignore[attr-defined]
        elif isinstance(value, Mapping):
            value = dict(value)
        elif not isinstance(value, str) and isinstance(value, Sequence | set | frozenset):
            value = list(value)
        data[name] = value
    if "key" not in data:
        node = get_config().get("metadata", {}).get("langgraph_node")
        if isinstance(node, str) and node:
            data["key"] = frameworks.breakpoint_key("langgraph", node)
    return data


def decision(answer: Any) -> BreakpointResult:
    """The BreakpointResult that `invoke` resumed the graph with (a JSON object)."""
    if not isinstance(answer, Mapping) or "approved" not in answer:
        raise TypeError(
            f"ask() was resumed with {answer!r}, not a breakpoint's decision: resume the "
            "graph with bpm_client.langgraph.invoke (or ainvoke)"
        )
    data = dict(answer)
    breakpoint_id, status, verified = (
        data.pop(k, None) for k in ("breakpointId", "status", "verified")
    )
    result = BreakpointResult.from_json(data)
    result.breakpoint_id, result.status, result.verified = breakpoint_id, status, verified
    return result


def invoke(
    graph: Any,
    input: Any,
    config: Mapping[str, Any],
    *,
    client: Client | None = None,
    timeout: float | None = None,
    **options: Any,
) -> Any:
    """Run `graph` (compiled with a checkpointer) on `input` until it finishes, answering
    each `ask()` it stops at with a breakpoint's decision; returns the last output.

    A thread already stopped at `ask()` (a process that stopped while it waited) is resumed
    from the decision, and `input` is not applied again. `client`: the SDK's (BPM_URL and
    BPM_TOKEN by default); `timeout`: seconds to wait for a decision before WaitTimeout (the
    thread stays stopped: `invoke` again later); `options` go to each `graph.invoke`.
    Interrupts of your own (not `ask()`) end the run as they would without this: the output
    holds them under `__interrupt__`.
    """
    thread = _thread_id(graph, config)
    own = client is None
    client = client or Client()
    try:
        output = None
        if not _requests(graph.get_state(config)):
            output = graph.invoke(input, config, **options)
        while requests := _requests(graph.get_state(config)):
            calls = {request.id: _breakpoint_call(thread, request) for request in requests}
            if len(calls) > 1:  # open them all before waiting for the first
                for call in calls.values():
                    client.create(**call)
            answers = {
                interrupt_id: _answer(client.breakpoint(**call, timeout=timeout))
                for interrupt_id, call in calls.items()
            }
            output = graph.invoke(Command(resume=answers), config, **options)
        return output
    finally:
        if own:
            client.close()


async def ainvoke(
    graph: Any,
    input: Any,
    config: Mapping[str, Any],
    *,
    client: AsyncClient | None = None,
    timeout: float | None = None,
    **options: Any,
) -> Any:
    """`invoke` for asyncio code: `graph.ainvoke`, the SDK's AsyncClient."""
    thread = _thread_id(graph, config)
    own = client is None
    client = client or AsyncClient()
    try:
        output = None
        if not _requests(await graph.aget_state(config)):
            output = await graph.ainvoke(input, config, **options)
        while requests := _requests(await graph.aget_state(config)):
            results = await asyncio.gather(
                *(
                    client.breakpoint(**_breakpoint_call(thread, r), timeout=timeout)
                    for r in requests
                )
            )
            answers = {r.id: _answer(result) for r, result in zip(requests, results, strict=True)}
            output = await graph.ainvoke(Command(resume=answers), config, **options)
        return output
    finally:
        if own:
            await client.aclose()


def _thread_id(graph: Any, config: Mapping[str, Any]) -> str:
    if getattr(graph, "checkpointer", None) in (None, False):
        raise ValueError(
            "ask() stops the graph at interrupt(), which needs a checkpointer: compile the "
            "graph with one (builder.compile(checkpointer=...))"
        )
    thread = (config.get("configurable") or {}).get("thread_id")
    if thread is None or str(thread) == "":
        raise ValueError(
            "the graph's config needs a thread id: "
            "{'configurable': {'thread_id': 'deploy-42'}} (its breakpoints are found by it)"
        )
    return str(thread)


def _requests(snapshot: StateSnapshot) -> list[Interrupt]:
    """The interrupts the thread is stopped at that `ask()` raised."""
    return [
        item
        for item in snapshot.interrupts
        if isinstance(item.value, Mapping) and isinstance(item.value.get(REQUEST), Mapping)
    ]


def _breakpoint_call(thread: str, request: Interrupt) -> dict[str, Any]:
    """The keyword arguments of `Client.create` (and `breakpoint`) for one `ask()`."""
    asked = request.value[REQUEST]
    fields = dict(asked.get("fields") or {})
    fields.setdefault("run_id", frameworks.run_id(thread))
    return {
        "question": asked["question"],
        "idempotency_key": frameworks.idempotency_key("langgraph", thread, request.id),
        **fields,
    }


def _answer(result: BreakpointResult) -> dict[str, Any]:
    """The resume value: the result as JSON (any checkpointer keeps it), with the client's
    check of its receipt."""
    return {**result.to_json(), "verified": result.verified}
