"""The asyncio client: `Client`'s methods, awaited, over the same operations (operations.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, TypeVar, Unpack

import httpx

from . import models
from .bodies import (
    BreakpointFields,
    ListFilters,
    breakpoint_body,
    feedback_body,
    list_params,
    rule_body,
)
from .config import http_options, request_arguments
from .operations import Operations, next_params
from .steps import Op, Retry, Sleep

T = TypeVar("T")


class AsyncClient:
    """`Client` for asyncio code; see `Client` for the arguments and each method."""

    def __init__(
        self,
        base_url: str | None = None,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        retry: Retry | None = None,
        reconnect_for: float = 300.0,
        hold: int = 50,
        strict: bool = False,
        transport: httpx.AsyncBaseTransport | None = None,
    ):
        options = http_options(base_url, token, timeout)
        self.base_url: str = options["base_url"]
        self._ops = Operations.configured(retry, reconnect_for, hold=hold, strict=strict)
        self._http = httpx.AsyncClient(**options, transport=transport)

    async def breakpoint(
        self,
        question: str,
        *,
        timeout: float | None = None,
        cancel_on_interrupt: bool = False,
        idempotency_key: str | None = None,
        on_created: Callable[[models.Breakpoint], None] | None = None,
        **fields: Unpack[BreakpointFields],
    ) -> models.BreakpointResult:
        body = breakpoint_body(question, **fields)
        op = self._ops.ask(
            body,
            key=idempotency_key,
            timeout=timeout,
            cancel_on_interrupt=cancel_on_interrupt,
            on_created=on_created,
        )
        return await self._run(op)

    async def create(
        self,
        question: str | None = None,
        *,
        idempotency_key: str | None = None,
        **fields: Unpack[BreakpointFields],
    ) -> models.Breakpoint:
        body = breakpoint_body(question, **fields)
        return await self._run(self._ops.create(body, idempotency_key))

    async def get(self, breakpoint_id: str) -> models.Breakpoint:
        return await self._run(self._ops.get(breakpoint_id))

    async def status(self, breakpoint_id: str) -> models.Status:
        return await self._run(self._ops.status(breakpoint_id))

    async def wait(self, breakpoint_id: str, timeout: float | None = None) -> models.Status:
        return await self._run(self._ops.wait(breakpoint_id, timeout))

    async def wait_any(
        self, breakpoint_ids: Sequence[str], timeout: float | None = None
    ) -> list[models.StatusEntry]:
        return await self._run(self._ops.wait_any(breakpoint_ids, timeout))

    async def cancel(self, breakpoint_id: str, reason: str | None = None) -> str:
        return await self._run(self._ops.cancel(breakpoint_id, reason))

    async def events(self, breakpoint_id: str) -> list[models.Event]:
        return await self._run(self._ops.events(breakpoint_id))

    async def list(self, **filters: Unpack[ListFilters]) -> AsyncIterator[models.Breakpoint]:
        params: list[tuple[str, str]] | None = list_params(**filters)
        while params is not None:
            page = await self._run(self._ops.page(params))
            for item in page.results:
                yield item
            params = next_params(page)

    async def feedback(self, breakpoint_id: str, comment: str) -> models.FeedbackCreated:
        body = feedback_body(comment, release=False)
        return await self._run(self._ops.feedback(breakpoint_id, body))

    async def release(
        self,
        breakpoint_id: str,
        comment: str = "",
        *,
        approved: bool = True,
        option: str | None = None,
        values: Mapping[str, Any] | None = None,
    ) -> models.FeedbackCreated:
        body = feedback_body(comment, release=True, approved=approved, option=option, values=values)
        return await self._run(self._ops.feedback(breakpoint_id, body))

    async def expire(self, breakpoint_id: str) -> str:
        return await self._run(self._ops.expire(breakpoint_id))

    async def simulate_rule(
        self,
        pattern: str | None = None,
        *,
        action: str | None = None,
        key: str | None = None,
        n: int | None = None,
        since: str | None = None,
    ) -> models.RuleReplay:
        """As Client.simulate_rule."""
        body = rule_body(pattern, action=action, key=key, n=n, since=since)
        return await self._run(self._ops.simulate_rule(body))

    async def _run(self, op: Op[T]) -> T:
        """Drive a step generator with asyncio I/O (see steps.py)."""
        value: Any = None
        error: BaseException | None = None
        while True:
            try:
                step = op.throw(error) if error is not None else op.send(value)
            except StopIteration as stop:
                return stop.value
            value, error = None, None
            try:
                if isinstance(step, Sleep):
                    await asyncio.sleep(step.seconds)
                else:
                    value = await self._http.request(**request_arguments(step, self._http.timeout))
            except (httpx.TransportError, asyncio.CancelledError) as exc:
                error = exc

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
