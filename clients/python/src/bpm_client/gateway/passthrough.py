"""Resources, prompts and completions: passed to the upstream and answered unchanged.

Only what the upstream offers (its `initialize` capabilities) is served, so the gateway
advertises exactly the upstream's capabilities besides tools.
"""

from __future__ import annotations

from typing import Any

from mcp import ClientSession
from mcp.server.context import ServerRequestContext
from mcp.types import (
    CompleteRequestParams,
    CompleteResult,
    GetPromptRequestParams,
    GetPromptResult,
    ListPromptsResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    PaginatedRequestParams,
    ReadResourceRequestParams,
    ReadResourceResult,
    ServerCapabilities,
)


def page(params: PaginatedRequestParams | None) -> PaginatedRequestParams | None:
    """The client's page request as the upstream takes it: its cursor only. The client's
    `_meta` (a 2026-07-28 client's per-request envelope) is not the upstream's: the
    gateway's own session with the upstream negotiated its own version."""
    cursor = params.cursor if params is not None else None
    return PaginatedRequestParams(cursor=cursor) if cursor else None


def passthrough_handlers(
    upstream: ClientSession, capabilities: ServerCapabilities
) -> dict[str, Any]:
    """The Server's on_* keyword arguments that pass each request to `upstream`."""
    handlers: dict[str, Any] = {}
    if capabilities.resources is not None:
        handlers.update(_resources(upstream))
    if capabilities.prompts is not None:
        handlers.update(_prompts(upstream))
    if capabilities.completions is not None:

        async def complete(
            ctx: ServerRequestContext[Any], params: CompleteRequestParams
        ) -> CompleteResult:
            context = params.context.arguments if params.context else None
            argument = params.argument.model_dump()
            return await upstream.complete(params.ref, argument, context)

        handlers["on_completion"] = complete
    return handlers


def _resources(upstream: ClientSession) -> dict[str, Any]:
    async def list_resources(
        ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListResourcesResult:
        return await upstream.list_resources(params=page(params))

    async def list_templates(
        ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListResourceTemplatesResult:
        return await upstream.list_resource_templates(params=page(params))

    async def read_resource(
        ctx: ServerRequestContext[Any], params: ReadResourceRequestParams
    ) -> ReadResourceResult:
        return await upstream.read_resource(str(params.uri))

    return {
        "on_list_resources": list_resources,
        "on_list_resource_templates": list_templates,
        "on_read_resource": read_resource,
    }


def _prompts(upstream: ClientSession) -> dict[str, Any]:
    async def list_prompts(
        ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListPromptsResult:
        return await upstream.list_prompts(params=page(params))

    async def get_prompt(
        ctx: ServerRequestContext[Any], params: GetPromptRequestParams
    ) -> GetPromptResult:
        return await upstream.get_prompt(params.name, params.arguments)

    return {"on_list_prompts": list_prompts, "on_get_prompt": get_prompt}
