"""The Tasks extension (`io.modelcontextprotocol/tasks`, 2026-07-28) for `ask` calls.

A client that declares the extension in its request's capabilities gets a task instead of
`input_required`: `{"resultType": "task", "taskId", "status": "working", ...}`. The gateway
waits on the breakpoint in the background; `tasks/get` answers the task's state and, once
decided, `completed` with the call's result (the tool's, run at most once under a verified
receipt, or the error result saying who rejected it and why); `tasks/cancel` cancels the
breakpoint with the reason "the MCP client cancelled the task" (and the client's `reason`,
a parameter the extension's schema does not have, when it sends one). A task is its agent's
(another agent's token gets "no such task"), lives in this process only, and is forgotten
KEPT_SECONDS after it finished (its `ttlMs` then says so; none while it works).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, RequestParams
from mcp_types import INVALID_PARAMS

IDENTIFIER = "io.modelcontextprotocol/tasks"
POLL_INTERVAL_MS = 2000
# A finished task (completed or cancelled) is kept this long after it finished.
KEPT_SECONDS = 3600.0
CANCELLED = "the MCP client cancelled the task"


def declared(ctx: ServerRequestContext[Any]) -> bool:
    """Whether the client declared the Tasks extension (2026-07-28 capabilities)."""
    capabilities = getattr(ctx.session, "client_capabilities", None)
    extensions = getattr(capabilities, "extensions", None) or {}
    return IDENTIFIER in extensions


class TaskParams(RequestParams):
    task_id: str
    reason: str | None = None
    """tasks/cancel: the client's reason, if it gives one (not in the extension's schema)."""


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat().replace("+00:00", "Z")


@dataclasses.dataclass
class GatedTask:
    """One `ask` call's task: its breakpoint, its agent, its state."""

    task_id: str
    breakpoint_id: str
    caller: str | None
    message: str
    cancel: Callable[[str], Awaitable[None]]
    status: str = "working"
    result: CallToolResult | None = None
    created_at: str = dataclasses.field(default_factory=_now)
    updated_at: str = dataclasses.field(default_factory=_now)
    runner: asyncio.Task[None] | None = None
    finished: float | None = None  # time.monotonic() when it stopped working

    def end(self, status: str, message: str) -> None:
        self.status, self.message, self.updated_at = status, message, _now()
        self.finished = time.monotonic()

    def wire(self) -> dict[str, Any]:
        task: dict[str, Any] = {
            "taskId": self.task_id,
            "status": self.status,
            "statusMessage": self.message,
            "createdAt": self.created_at,
            "lastUpdatedAt": self.updated_at,
            "ttlMs": None if self.finished is None else int(KEPT_SECONDS * 1000),
            "pollIntervalMs": POLL_INTERVAL_MS,
        }
        if self.result is not None:
            task["result"] = self.result.model_dump(by_alias=True, exclude_none=True, mode="json")
        return task


class Tasks:
    """The gateway's tasks, by id."""

    def __init__(self) -> None:
        self._tasks: dict[str, GatedTask] = {}

    def start(
        self,
        breakpoint_id: str,
        caller: str | None,
        message: str,
        outcome: Callable[[], Awaitable[CallToolResult]],
        cancel: Callable[[str], Awaitable[None]],
    ) -> dict[str, Any]:
        """A task waiting on `outcome()` (the call's result once decided): its handle."""
        self._forget_finished()
        task = GatedTask(f"task-{uuid.uuid4().hex}", breakpoint_id, caller, message, cancel)
        self._tasks[task.task_id] = task

        async def run() -> None:
            task.result = await outcome()
            task.end("completed", "decided")

        task.runner = asyncio.create_task(run())
        return {"resultType": "task", **task.wire()}

    def _forget_finished(self) -> None:
        horizon = time.monotonic() - KEPT_SECONDS
        for task_id in [k for k, t in self._tasks.items() if t.finished and t.finished < horizon]:
            del self._tasks[task_id]

    def _own(self, params: TaskParams, caller: str | None) -> GatedTask:
        task = self._tasks.get(params.task_id)
        if task is None or task.caller != caller:
            raise MCPError(code=INVALID_PARAMS, message=f"no such task: {params.task_id}")
        return task

    async def get(self, params: TaskParams, caller: str | None) -> dict[str, Any]:
        return {"resultType": "complete", **self._own(params, caller).wire()}

    async def cancel(self, params: TaskParams, caller: str | None) -> dict[str, Any]:
        task = self._own(params, caller)
        if task.status == "working":
            if task.runner is not None:
                task.runner.cancel()
            reason = CANCELLED + (f": {params.reason}" if params.reason else "")
            await task.cancel(reason)
            task.end("cancelled", reason)
        return {"resultType": "complete"}

    async def stop(self, reason: str) -> list[str]:
        """Cancel the breakpoint of every task still working, with `reason`."""
        working = [task for task in self._tasks.values() if task.status == "working"]
        for task in working:
            if task.runner is not None:
                task.runner.cancel()
            await task.cancel(reason)
            task.end("cancelled", reason)
        return [task.breakpoint_id for task in working]
