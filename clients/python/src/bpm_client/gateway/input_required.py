"""MCP 2026-07-28 clients are not held: an `ask` call answers `input_required`.

The revision has no server-to-client requests: a server that needs a person answers a
`tools/call` with `input_required` (here a URL-mode elicitation whose URL is the
breakpoint's console page) and a `requestState` the client echoes on its retry. Each retry
waits a little (RETRY_HOLD_SECONDS) for the decision, then answers the tool's result, an
error result, or `input_required` again.

The `requestState` is sealed by the SDK's `RequestStateBoundary` (AES-256-GCM under a key
random to this gateway process, expiring after STATE_TTL_SECONDS) which also binds the
tool, the arguments' digest and the caller (a digest of the agent's token). Inside it,
`PendingCall` names the breakpoint, the arguments' digest, the caller and this gateway
process again: the handler checks them too, so a state is good only for the call, the
agent and the process that minted it.

At most once: `Executions` remembers each breakpoint whose approval ran the tool, with
its result, for as long as any state naming it can still be replayed; a repeat gets the
stored result. The memory is this process's: a state minted by another gateway process (a
restarted one) is refused by its key and by `PendingCall.gateway`, so it never runs there.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import os
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.types import CallToolResult, ElicitRequest, ElicitRequestURLParams, InputRequiredResult
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from . import decisions

# How long one retry waits for the decision before answering `input_required` again.
RETRY_HOLD_SECONDS = 3.0
# How long a sealed requestState stays good after it was minted (each answer mints anew).
STATE_TTL_SECONDS = 600.0
ELICITATION = "approval"


def negotiated_modern(ctx: ServerRequestContext[Any] | None) -> bool:
    """Whether the client negotiated a revision without server-to-client requests (no
    context: a call made in process, as the older revisions make it)."""
    return getattr(ctx, "protocol_version", None) in MODERN_PROTOCOL_VERSIONS


def shows_urls(ctx: ServerRequestContext[Any]) -> bool:
    """Whether the client declared URL-mode elicitation (the SDK's client does when it has
    an elicitation callback). One that did not is sent no elicitation (it could only
    refuse it): it retries on the state alone, the reviewers are told by the service."""
    declared = getattr(ctx.session, "client_capabilities", None)
    elicitation = declared.elicitation if declared is not None else None
    return elicitation is not None and elicitation.url is not None


def digest(value: Any) -> str:
    """A SHA-256 of `value`'s canonical JSON (arguments) or of a token."""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def boundary(
    caller: Callable[[ServerRequestContext[Any]], str | None],
    audience: str,
    key: bytes | None = None,
) -> RequestStateBoundary:
    """The SDK's request-state boundary: seals every `requestState` the gateway answers,
    verifies every one a client echoes (a forged, altered, expired or another caller's
    state is refused before the handler runs). `caller` names the calling agent."""
    security = RequestStateSecurity(
        keys=[key or os.urandom(32)], ttl=STATE_TTL_SECONDS, bind_principal=caller
    )
    return RequestStateBoundary(security, default_audience=audience)


@dataclasses.dataclass(frozen=True)
class PendingCall:
    """The plaintext of a `requestState`: the call that waits on a breakpoint."""

    breakpoint_id: str
    arguments: str  # digest()
    caller: str | None  # digest() of the agent's token
    gateway: str  # the gateway process that asked

    def dumps(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def loads(cls, text: str) -> PendingCall:
        """The pending call `text` names; ValueError when it names none."""
        try:
            fields = json.loads(text)
            return cls(**{field.name: fields[field.name] for field in dataclasses.fields(cls)})
        except (TypeError, KeyError, AttributeError) as error:
            raise ValueError("not a pending call") from error


def asking(
    pending: PendingCall, tool: str, server: str, console_url: str, shows_urls: bool
) -> InputRequiredResult:
    """The first answer: a URL-mode elicitation of the breakpoint's console page (for a
    client that shows URLs; else the state alone)."""
    if not shows_urls:
        return still_waiting(pending)
    message = (
        f"Approval needed: an agent wants to run the tool `{tool}` on the MCP server "
        f"`{server}`. A reviewer approves, edits or rejects it at approval request "
        f"{pending.breakpoint_id}; the call goes on once they decide."
    )
    request = ElicitRequest(params=ElicitRequestURLParams(message=message, url=console_url))
    return InputRequiredResult(input_requests={ELICITATION: request}, request_state=pending.dumps())


def still_waiting(pending: PendingCall) -> InputRequiredResult:
    """A retry before the decision: retry again (the state only, the page was shown)."""
    return InputRequiredResult(request_state=pending.dumps())


class Executions:
    """The tool runs at most once per approval: each breakpoint's result, kept while a
    state naming it can still be replayed (STATE_TTL_SECONDS after the run)."""

    def __init__(self, kept_seconds: float = STATE_TTL_SECONDS):
        self.kept_seconds = kept_seconds
        self._results: dict[str, tuple[float, CallToolResult]] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def once(
        self, breakpoint_id: str, run: Callable[[], Awaitable[CallToolResult]]
    ) -> CallToolResult:
        """`run()`'s result, run only by the first caller for `breakpoint_id`; a failure
        is kept as an error result too (the tool may have run: never run it again)."""
        self._forget_old()
        lock = self._locks.setdefault(breakpoint_id, asyncio.Lock())
        async with lock:
            if breakpoint_id in self._results:
                return self._results[breakpoint_id][1]
            try:
                result = await run()
            except Exception as error:
                result = decisions.error_result(
                    f"the call approved by {breakpoint_id} failed: {' '.join(str(error).split())}"
                )
            self._results[breakpoint_id] = (time.monotonic(), result)
        self._locks.pop(breakpoint_id, None)
        return result

    def ran(self, breakpoint_id: str) -> CallToolResult | None:
        return self._results.get(breakpoint_id, (0.0, None))[1]

    def _forget_old(self) -> None:
        horizon = time.monotonic() - self.kept_seconds
        for breakpoint_id in [k for k, (when, _) in self._results.items() if when < horizon]:
            del self._results[breakpoint_id]


def new_gateway_id() -> str:
    return uuid.uuid4().hex


def check(
    pending: PendingCall, arguments: Mapping[str, Any], caller: str | None, gateway: str
) -> str | None:
    """Why `pending` is not this retry's (None when it is)."""
    if pending.gateway != gateway:
        return "the gateway process that asked has stopped since (call the tool again)"
    if pending.caller != caller:
        return "the approval request was opened by another agent"
    if pending.arguments != digest(dict(arguments)):
        return "the arguments differ from those the approval request asks about"
    return None
