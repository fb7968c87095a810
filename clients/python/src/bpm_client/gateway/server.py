"""`bpm gateway`: an MCP server on stdio in front of another MCP server (the upstream).

It lists the upstream's tools (less those always denied), passes resources and prompts
through, and sends each `tools/call` through the rules: allowed calls go on as they are,
denied ones are refused, and `ask` calls wait for a human on a breakpoint whose form is the
tool's input schema and whose proposal the arguments. An approved call runs with the
approved values (maybe edited), once the signed receipt says so; anything else, including
any failure to ask, is an error result and nothing is forwarded (fail closed).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.types import (
    CallToolRequestParams,
    CallToolResult,
    CancelledNotificationParams,
    InitializeResult,
    InputRequiredResult,
    ListToolsResult,
    PaginatedRequestParams,
    Tool,
)

from ..aio import AsyncClient
from ..config import TOKEN_VARIABLE
from ..errors import BpmError
from ..models import Breakpoint, BreakpointResult
from ..operations import result_of
from ..receipts import JWKS_PATH, JwksCache, ReceiptInvalid, load_jwks, receipt_kid
from . import decisions, tasks
from .config import GatewayConfig, Rule
from .input_required import (
    RETRY_HOLD_SECONDS,
    STATE_TTL_SECONDS,
    Executions,
    PendingCall,
    asking,
    boundary,
    check,
    digest,
    negotiated_modern,
    new_gateway_id,
    shows_urls,
    still_waiting,
)
from .passthrough import page, passthrough_handlers
from .rules import decide, hidden, needs_annotations, tool_hints
from .waiting import Waiter

# While a call waits, a progress notification every this many seconds (and one at once).
PROGRESS_SECONDS = 10.0
# After the client cancels, how long to wait for its notifications/cancelled (the reason).
REASON_GRACE_SECONDS = 0.5
CANCEL_REASONS_KEPT = 1000
DISCONNECTED = "the MCP client disconnected (or the gateway stopped) before a decision"
STOPPED = "the gateway stopped"


@dataclasses.dataclass
class Service:
    """The approval service as one agent (one token): its client and its waiter."""

    client: AsyncClient
    waiter: Waiter

    async def aclose(self) -> None:
        await self.waiter.aclose()
        await self.client.aclose()


class Gateway:
    """The handlers of one gateway: the upstream session, the rules, the service.

    Over stdio the gateway asks as the agent of `token` (BPM_TOKEN). With
    `tokens_from_requests` (`--listen`) each call asks as the agent whose token its HTTP
    request carried (listen.py checked it), so a breakpoint is the calling agent's.
    """

    def __init__(
        self,
        config: GatewayConfig,
        upstream: ClientSession,
        server_name: str,
        *,
        url: str | None = None,
        token: str | None = None,
        tokens_from_requests: bool = False,
    ):
        self.config = config
        self.upstream = upstream
        self.server_name = server_name
        self.url = url
        self.token = token
        self.tokens_from_requests = tokens_from_requests
        self._services: dict[str | None, Service] = {}
        self._waiting: dict[str, Service] = {}  # the breakpoints calls wait on, by id
        self._stopping = False
        self._jwks: JwksCache | None = None
        self._cancel_reasons: dict[str, str] = {}
        # One run for every call this gateway asks about: a grant "for the rest of the run"
        # covers this session's calls, and only them.
        self.run_id = decisions.gateway_run_id(os.environ)
        self._cancelled = asyncio.Event()
        # 2026-07-28 clients: this process's id in the states, the breakpoints retries wait
        # on, the approvals already run (input_required.py).
        self.gateway_id = new_gateway_id()
        # breakpoint id -> (its agent's service, when its last state was minted)
        self._pending: dict[str, tuple[Service, float]] = {}
        self.executions = Executions()
        self.tasks = tasks.Tasks()

    @property
    def rules(self) -> Sequence[Rule]:
        return self.config.rules

    # --- tools/list ----------------------------------------------------------------------

    async def list_tools(
        self, ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        """The upstream's tools unchanged, less those every call of which is denied."""
        listed = await self.upstream.list_tools(params=page(params))
        kept = [tool for tool in listed.tools if not hidden(self.rules, tool.name, hints(tool))]
        return listed.model_copy(update={"tools": kept})

    async def _tool(self, name: str) -> Tool | None:
        """The tool as the upstream describes it now (its schema becomes the form): listed
        afresh for each call that asks, page by page until it is found."""
        cursor: str | None = None
        while True:
            page = await self.upstream.list_tools(
                params=PaginatedRequestParams(cursor=cursor) if cursor else None
            )
            found = next((tool for tool in page.tools if tool.name == name), None)
            cursor = page.next_cursor
            if found is not None or not cursor:
                return found

    # --- tools/call ----------------------------------------------------------------------

    async def call_tool(
        self, ctx: ServerRequestContext[Any], params: CallToolRequestParams
    ) -> CallToolResult | InputRequiredResult | dict[str, Any]:
        tool, arguments = params.name, dict(params.arguments or {})
        described = await self._tool(tool) if needs_annotations(self.rules, tool) else None
        rule = decide(self.rules, tool, arguments, hints(described))
        if rule is None or rule.action == "allow":
            return await self.upstream.call_tool(tool, params.arguments)
        if rule.action == "deny":
            return decisions.refusal(tool, f"the gateway's {rule.name} denies it")
        described = described or await self._tool(tool)
        if described is None:
            return decisions.refusal(tool, f"the server {self.server_name} has no such tool")
        return await self._ask(ctx, rule, described, arguments, params.request_state)

    async def _ask(
        self,
        ctx: ServerRequestContext[Any],
        rule: Rule,
        tool: Tool,
        arguments: dict[str, Any],
        state: str | None = None,
    ) -> CallToolResult | InputRequiredResult | dict[str, Any]:
        """Ask a human; on an approval whose receipt checks out, call with its values.

        A 2025-11-25 (or older) client's call waits for the decision; a 2026-07-28 client
        gets `input_required` and retries (input_required.py)."""
        if negotiated_modern(ctx) and state is not None:
            return await self._retried(ctx, tool.name, arguments, state)
        opened = await self._open(ctx, rule, tool, arguments)
        if isinstance(opened, CallToolResult):
            return opened
        service, created = opened
        if negotiated_modern(ctx) and not created.done:
            if tasks.declared(ctx):
                return self._task(ctx, service, created, tool.name)
            return self._input_required(ctx, service, created, tool.name, arguments)
        try:
            result = await self._decision(ctx, service, created)
        except Exception as error:  # fail closed, whatever went wrong while waiting
            return decisions.refusal(
                tool.name,
                f"lost the approval service while waiting on {created.breakpoint_id}: "
                f"{_line(error)}",
            )
        return await self._conclude(tool.name, result, created.breakpoint_id)

    async def _open(
        self, ctx: ServerRequestContext[Any], rule: Rule, tool: Tool, arguments: dict[str, Any]
    ) -> tuple[Service, Breakpoint] | CallToolResult:
        """The call's breakpoint (and the service as its agent), or the error result."""
        question, fields = decisions.breakpoint_fields(
            server=self.server_name,
            tool=tool.name,
            description=tool.description,
            schema=tool.input_schema,
            arguments=arguments,
            rule=rule,
            defaults=self.config.defaults,
            run_id=self.run_id,
        )
        key = f"bpm-gateway-{uuid.uuid4()}"  # one per call: the SDK's resends ask once
        try:
            service = self._service(self._token(ctx))
            # Shielded: a call cancelled while its breakpoint is being created still learns
            # the breakpoint's id, and withdraws it at its next step.
            with anyio.CancelScope(shield=True):
                created = await service.client.create(question, idempotency_key=key, **fields)
        except BpmError as error:
            return decisions.refusal(tool.name, f"could not ask for approval: {_line(error)}")
        return service, created

    async def _conclude(
        self, tool: str, result: BreakpointResult, breakpoint_id: str
    ) -> CallToolResult:
        """The decided call's answer: the tool's result under a verified receipt, or why not."""
        if not result.approved:
            return decisions.not_approved(tool, result, breakpoint_id)
        try:
            approved = await self._checked(result, breakpoint_id)
        except (ReceiptInvalid, BpmError) as error:
            return decisions.refusal(tool, f"the approval's receipt is refused: {error}")
        return await self.upstream.call_tool(tool, approved)

    # --- tools/call for 2026-07-28 clients: input_required and retries ------------------

    def _input_required(
        self,
        ctx: ServerRequestContext[Any],
        service: Service,
        created: Breakpoint,
        tool: str,
        arguments: dict[str, Any],
    ) -> InputRequiredResult:
        """The first answer: the console page to open, and the state to retry with."""
        pending = PendingCall(
            breakpoint_id=created.breakpoint_id,
            arguments=digest(arguments),
            caller=self.caller(ctx),
            gateway=self.gateway_id,
        )
        self._awaiting_retries(created.breakpoint_id, service)
        return asking(pending, tool, self.server_name, created.console_url, shows_urls(ctx))

    async def _retried(
        self, ctx: ServerRequestContext[Any], tool: str, arguments: dict[str, Any], state: str
    ) -> CallToolResult | InputRequiredResult:
        """A retry (its state verified by the boundary): the result once decided (the tool
        run at most once per approval), else `input_required` again after a short wait."""
        try:
            pending = PendingCall.loads(state)
        except ValueError:
            return decisions.refusal(tool, "the requestState names no approval request")
        wrong = check(pending, arguments, self.caller(ctx), self.gateway_id)
        if wrong is not None:
            return decisions.refusal(tool, wrong)
        ran = self.executions.ran(pending.breakpoint_id)
        if ran is not None:
            return ran
        try:
            service = self._service(self._token(ctx))
            entry = None
            with anyio.move_on_after(RETRY_HOLD_SECONDS):
                entry = await service.waiter.wait(pending.breakpoint_id)
        except Exception as error:  # fail closed, whatever went wrong while waiting
            return decisions.refusal(
                tool,
                f"lost the approval service while waiting on {pending.breakpoint_id}: "
                f"{_line(error)}",
            )
        if entry is None:
            self._awaiting_retries(pending.breakpoint_id, service)
            return still_waiting(pending)
        self._pending.pop(pending.breakpoint_id, None)
        if entry.error is not None:
            return decisions.refusal(tool, f"{pending.breakpoint_id}: {entry.error.message}")
        result = result_of(pending.breakpoint_id, entry)
        return await self.executions.once(
            pending.breakpoint_id, lambda: self._conclude(tool, result, pending.breakpoint_id)
        )

    def _task(
        self, ctx: ServerRequestContext[Any], service: Service, created: Breakpoint, tool: str
    ) -> dict[str, Any]:
        """A Tasks-extension client's answer: a task that waits on the breakpoint."""
        breakpoint_id = created.breakpoint_id

        async def outcome() -> CallToolResult:
            try:
                entry = await service.waiter.wait(breakpoint_id)
            except Exception as error:  # fail closed, whatever went wrong while waiting
                return decisions.refusal(
                    tool,
                    f"lost the approval service while waiting on {breakpoint_id}: {_line(error)}",
                )
            if entry.error is not None:
                return decisions.refusal(tool, f"{breakpoint_id}: {entry.error.message}")
            result = result_of(breakpoint_id, entry)
            return await self.executions.once(
                breakpoint_id, lambda: self._conclude(tool, result, breakpoint_id)
            )

        async def cancel(reason: str) -> None:
            with contextlib.suppress(BpmError):
                await service.client.cancel(breakpoint_id, reason)

        message = f"waiting for approval request {breakpoint_id}: {created.console_url}"
        return self.tasks.start(breakpoint_id, self.caller(ctx), message, outcome, cancel)

    async def get_task(
        self, ctx: ServerRequestContext[Any], params: tasks.TaskParams
    ) -> dict[str, Any]:
        return await self.tasks.get(params, self.caller(ctx))

    async def cancel_task(
        self, ctx: ServerRequestContext[Any], params: tasks.TaskParams
    ) -> dict[str, Any]:
        return await self.tasks.cancel(params, self.caller(ctx))

    def _awaiting_retries(self, breakpoint_id: str, service: Service) -> None:
        """Note a breakpoint a client's retries wait on (SIGTERM cancels it), forgetting
        those whose last state has expired: no retry can reach them any more."""
        now = time.monotonic()
        for expired in [
            k for k, (_, when) in self._pending.items() if when < now - STATE_TTL_SECONDS
        ]:
            del self._pending[expired]
        self._pending[breakpoint_id] = (service, now)

    def caller(self, ctx: ServerRequestContext[Any]) -> str | None:
        """The calling agent, as the requestState binds it: a digest of its token."""
        token = self._token(ctx)
        return digest(token) if token is not None else None

    async def _decision(
        self, ctx: ServerRequestContext[Any], service: Service, created: Breakpoint
    ) -> BreakpointResult:
        """The breakpoint's result: at once when decided at creation (an auto-approval),
        else once a human decides; a cancelled call cancels the breakpoint."""
        if created.done:
            return result_of(created.breakpoint_id, created)
        progress = asyncio.create_task(self._report(ctx, created))
        self._waiting[created.breakpoint_id] = service
        try:
            entry = await service.waiter.wait(created.breakpoint_id)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await self._withdraw(ctx, service, created.breakpoint_id)
            raise
        finally:
            self._waiting.pop(created.breakpoint_id, None)
            progress.cancel()
        if entry.error is not None:
            raise BpmError(f"{created.breakpoint_id}: {entry.error.message}")
        return result_of(created.breakpoint_id, entry)

    async def _report(self, ctx: ServerRequestContext[Any], created: Breakpoint) -> None:
        """Progress notifications while the call waits: the breakpoint and where to answer."""
        message = (
            f"waiting for a human to approve this call: approval request "
            f"{created.breakpoint_id}, answer at {created.console_url}"
        )
        count = 0
        while True:
            count += 1
            with contextlib.suppress(Exception):  # a closed stream: the call ends anyway
                await ctx.session.report_progress(count, message=message)
            await asyncio.sleep(PROGRESS_SECONDS)

    async def _withdraw(
        self, ctx: ServerRequestContext[Any], service: Service, breakpoint_id: str
    ) -> None:
        """The client cancelled the call or went away, or the gateway stops: cancel the
        breakpoint, saying which."""
        if self._stopping:
            with contextlib.suppress(BpmError):
                await service.client.cancel(breakpoint_id, STOPPED)
            return
        request = str(ctx.request_id)
        with anyio.move_on_after(REASON_GRACE_SECONDS):
            while request not in self._cancel_reasons:
                self._cancelled.clear()
                await self._cancelled.wait()
        given = self._cancel_reasons.pop(request, None)
        reason = DISCONNECTED
        if given is not None:
            reason = "the MCP client cancelled the call" + (f": {given}" if given else "")
        with contextlib.suppress(BpmError):
            await service.client.cancel(breakpoint_id, reason)

    async def on_cancelled(
        self, ctx: ServerRequestContext[Any], params: CancelledNotificationParams
    ) -> None:
        """notifications/cancelled: keep the client's reason for the call's breakpoint."""
        if params.request_id is not None:
            if len(self._cancel_reasons) >= CANCEL_REASONS_KEPT:  # calls that never asked
                self._cancel_reasons.pop(next(iter(self._cancel_reasons)))
            self._cancel_reasons[str(params.request_id)] = params.reason or ""
            self._cancelled.set()

    # --- the service ---------------------------------------------------------------------

    def _token(self, ctx: ServerRequestContext[Any]) -> str | None:
        """The token to ask with: the HTTP request's agent (`--listen`), else BPM_TOKEN's."""
        if not self.tokens_from_requests:
            return self.token
        user = getattr(ctx.request, "scope", {}).get("user")
        if not isinstance(user, AuthenticatedUser):  # listen.py lets no such request in
            raise BpmError("the request carries no agent token")
        return user.access_token.token

    def _service(self, token: str | None) -> Service:
        """The service as the agent of `token`, made at its first gated call (so a missing
        token is an error result the agent reads, not a gateway that fails to start)."""
        if token not in self._services:
            client = AsyncClient(self.url, token)
            self._services[token] = Service(client, Waiter(client))
            if self._jwks is None:
                base = client.base_url
                self._jwks = JwksCache(lambda: load_jwks(base + JWKS_PATH))
        return self._services[token]

    async def stop(self, reason: str = STOPPED) -> list[str]:
        """Cancel every breakpoint a call still waits on, with `reason` (each as the agent
        that opened it); the waiting calls then answer that it was cancelled. Returns the
        breakpoints cancelled."""
        self._stopping = True
        retried = [
            (breakpoint_id, service) for breakpoint_id, (service, _) in self._pending.items()
        ]
        waiting = [*self._waiting.items(), *retried]
        for breakpoint_id, service in waiting:
            with contextlib.suppress(BpmError):
                await service.client.cancel(breakpoint_id, reason)
        return [breakpoint_id for breakpoint_id, _ in waiting] + await self.tasks.stop(reason)

    async def _checked(self, result: BreakpointResult, breakpoint_id: str) -> dict[str, Any]:
        assert self._jwks is not None
        kid = receipt_kid(result.receipt) if result.receipt else None
        jwks = await asyncio.to_thread(self._jwks.get, kid=kid)
        return decisions.approved_arguments(result, jwks, breakpoint_id)

    async def aclose(self) -> None:
        for service in self._services.values():
            await service.aclose()


def hints(tool: Tool | None) -> dict[str, bool]:
    """The tool's annotation hints, as the rules match them (rules.tool_hints); a tool the
    upstream does not list declares none."""
    declared = tool.annotations if tool is not None else None
    return tool_hints(declared.model_dump(by_alias=True, exclude_none=True) if declared else None)


def _line(error: BaseException) -> str:
    return " ".join(str(error).split())


def build_server(gateway: Gateway, initialized: InitializeResult) -> Server[Any]:
    """The MCP server: the gateway's tools/list and tools/call; resources, prompts and
    completions passed through when the upstream has them."""
    info = initialized.server_info
    server: Server[Any] = Server(
        info.name,
        version=info.version,
        title=info.title,
        instructions=initialized.instructions,
        on_list_tools=gateway.list_tools,
        # A Tasks-extension handle is a wire mapping (the runner sends mappings as they
        # are); the SDK's handler type names only the core results.
        on_call_tool=cast(Any, gateway.call_tool),
        **passthrough_handlers(gateway.upstream, initialized.capabilities),
    )
    server.add_notification_handler(
        "notifications/cancelled", CancelledNotificationParams, gateway.on_cancelled
    )
    # 2026-07-28: every requestState sealed going out, verified coming back, bound to the
    # calling agent (input_required.py).
    server.extensions[tasks.IDENTIFIER] = {}
    server.add_request_handler("tasks/get", tasks.TaskParams, gateway.get_task)
    server.add_request_handler("tasks/cancel", tasks.TaskParams, gateway.cancel_task)
    server.middleware.append(
        boundary(gateway.caller, audience=f"bpm-gateway:{gateway.server_name}")
    )
    return server


def upstream_environment() -> dict[str, str]:
    """The gateway's environment, less its API token: the upstream has no use for it."""
    return {name: value for name, value in os.environ.items() if name != TOKEN_VARIABLE}


@contextlib.asynccontextmanager
async def upstream_session(
    command: Sequence[str], url: str | None
) -> AsyncIterator[tuple[ClientSession, InitializeResult]]:
    """The upstream: `command` started over stdio, or the streamable-HTTP server at `url`."""
    async with contextlib.AsyncExitStack() as stack:
        if url is not None:
            read, write = await stack.enter_async_context(streamable_http_client(url))
        else:
            program, *args = command
            params = StdioServerParameters(command=program, args=args, env=upstream_environment())
            read, write = await stack.enter_async_context(stdio_client(params))
        session = await stack.enter_async_context(ClientSession(read, write))
        yield session, await session.initialize()


# Commands that run the server named by their first argument (`python billing.py`,
# `npx -y @scope/server-postgres`, `uv run server.py`): that argument names the server.
LAUNCHERS = frozenset(
    {"python", "python3", "node", "npx", "uvx", "uv", "bunx", "bun", "deno", "pipx"}
)
LAUNCHER_WORDS = frozenset({"run", "exec", "x"})


def server_name(config: GatewayConfig, command: Sequence[str], url: str | None) -> str:
    """The upstream's name in titles and keys: the config's, else the command's (for an
    interpreter or a package runner, the script or package it runs), else the URL's host."""
    if config.defaults.server:
        return config.defaults.server
    if url is not None:
        return urlsplit(url).hostname or "upstream"
    program = Path(command[0]).name
    if program in LAUNCHERS:
        named = [arg for arg in command[1:] if not arg.startswith("-")]
        named = [arg for arg in named if arg not in LAUNCHER_WORDS]
        if named:
            return Path(named[0]).stem if named[0].endswith(".py") else Path(named[0]).name
    return program


async def serve(
    config: GatewayConfig,
    command: Sequence[str],
    *,
    upstream_url: str | None = None,
    url: str | None = None,
    token: str | None = None,
) -> None:
    """Run the gateway until the MCP client closes stdin."""
    async with upstream_session(command, upstream_url) as (session, initialized):
        name = server_name(config, command, upstream_url)
        gateway = Gateway(config, session, name, url=url, token=token)
        server = build_server(gateway, initialized)
        try:
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())
        finally:
            with anyio.CancelScope(shield=True):
                await gateway.aclose()


def main(
    config: GatewayConfig,
    command: Sequence[str],
    *,
    upstream_url: str | None = None,
    url: str | None = None,
    token: str | None = None,
) -> None:
    anyio.run(lambda: serve(config, command, upstream_url=upstream_url, url=url, token=token))


__all__ = ["Gateway", "build_server", "main", "serve"]
