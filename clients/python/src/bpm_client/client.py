"""The blocking client. `AsyncClient` (aio.py) has the same methods, awaited."""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar, Unpack

import httpx

from . import models, receipts
from .bodies import (
    BreakpointFields,
    ListFilters,
    breakpoint_body,
    feedback_body,
    list_params,
    rule_body,
)
from .config import http_options, request_arguments
from .interrupts import interruptible
from .operations import Operations, next_params
from .steps import Op, Retry, Sleep

T = TypeVar("T")


class Client:
    """Talk to Breakpoint Manager as an agent (or a reviewer, with a reviewer's token).

    `base_url` and `token` default to the environment's `BPM_URL` and `BPM_TOKEN`.
    `reconnect_for`: while waiting, how long the server may stay unreachable (a restart, a
    network blip) before the wait fails with ConnectionFailed.
    """

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
        transport: httpx.BaseTransport | None = None,
        jwks: str | Path | Mapping[str, Any] | None = None,
    ):
        options = http_options(base_url, token, timeout)
        self.base_url: str = options["base_url"]
        self._ops = Operations.configured(retry, reconnect_for, hold=hold, strict=strict)
        self._http = httpx.Client(**options, transport=transport)
        # Receipts verify with a pinned JWKS (`jwks`: a file, a URL, a JWK Set), else the
        # server's own /.well-known/jwks.json, fetched once and cached.
        self._pinned_jwks = receipts.load_jwks(jwks) if jwks is not None else None
        self._server_jwks = receipts.JwksCache(
            lambda: receipts.load_jwks(receipts.JWKS_PATH, http=self._http)
        )

    # --- receipts ---------------------------------------------------------------------

    def verify(
        self,
        result: models.BreakpointResult,
        *,
        breakpoint_id: str | None = None,
        values: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The claims of `result.receipt` once it verifies (pinned JWKS, else the
        server's) and states this result of this breakpoint (`breakpoint_id`, else the
        result's own: one of them is required) and these values (`values`, else the
        result's: its valuesDigest); raises ReceiptInvalid otherwise."""
        receipts.expected_breakpoint(result, breakpoint_id)  # before any JWKS is fetched
        if self._pinned_jwks is not None:
            jwks = self._pinned_jwks
        else:
            jwks = self._server_jwks.get(kid=receipts.receipt_kid(result.receipt or ""))
        return receipts.check_result(result, jwks, breakpoint_id=breakpoint_id, values=values)

    def _verified(self, result: models.BreakpointResult) -> models.BreakpointResult:
        """`result` with `verified` set (None without a receipt or when no JWKS is at hand)."""
        if not result.receipt:
            return result
        try:
            self.verify(result)
        except receipts.ReceiptInvalid:
            return dataclasses.replace(result, verified=False)
        except receipts.JwksUnavailable:
            return result
        return dataclasses.replace(result, verified=True)

    # --- the one-call way ------------------------------------------------------------

    def breakpoint(
        self,
        question: str,
        *,
        timeout: float | None = None,
        cancel_on_interrupt: bool = False,
        idempotency_key: str | None = None,
        on_created: Callable[[models.Breakpoint], None] | None = None,
        **fields: Unpack[BreakpointFields],
    ) -> models.BreakpointResult:
        """Ask a human and wait for the answer (babysitter's `ctx.breakpoint()`).

        Returns the BreakpointResult (`approved`, `response`, `feedback`, `option`,
        `responded_by`, `all_responses`, `values` and `edited` (the answer to `form=` /
        `proposal=`), `payload_digest`, `values_digest`, `receipt`, plus `status`,
        `breakpoint_id` and `verified`: whether its receipt checked out); raises
        WaitTimeout when `timeout` seconds pass first (the breakpoint keeps waiting).
        """
        body = breakpoint_body(question, **fields)
        result = self._run(
            self._ops.ask(
                body,
                key=idempotency_key,
                timeout=timeout,
                cancel_on_interrupt=cancel_on_interrupt,
                on_created=on_created,
            )
        )
        return self._verified(result)

    # --- agent -----------------------------------------------------------------------

    def create(
        self,
        question: str | None = None,
        *,
        idempotency_key: str | None = None,
        **fields: Unpack[BreakpointFields],
    ) -> models.Breakpoint:
        return self._run(self._ops.create(breakpoint_body(question, **fields), idempotency_key))

    def get(self, breakpoint_id: str) -> models.Breakpoint:
        return self._run(self._ops.get(breakpoint_id))

    def status(self, breakpoint_id: str) -> models.Status:
        return self._run(self._ops.status(breakpoint_id))

    def wait(self, breakpoint_id: str, timeout: float | None = None) -> models.Status:
        """Long-poll until decided (reconnecting as needed); WaitTimeout after `timeout` s."""
        return self._run(self._ops.wait(breakpoint_id, timeout))

    def wait_any(
        self, breakpoint_ids: Sequence[str], timeout: float | None = None
    ) -> list[models.StatusEntry]:
        """Long-poll up to 100 at once; returns every entry once any is decided."""
        return self._run(self._ops.wait_any(breakpoint_ids, timeout))

    def cancel(self, breakpoint_id: str, reason: str | None = None) -> str:
        return self._run(self._ops.cancel(breakpoint_id, reason))

    def events(self, breakpoint_id: str) -> list[models.Event]:
        return self._run(self._ops.events(breakpoint_id))

    def list(self, **filters: Unpack[ListFilters]) -> Iterator[models.Breakpoint]:
        """Every matching breakpoint, newest first, fetching cursor pages as it goes."""
        params: list[tuple[str, str]] | None = list_params(**filters)
        while params is not None:
            page = self._run(self._ops.page(params))
            yield from page.results
            params = next_params(page)

    # --- reviewer --------------------------------------------------------------------

    def feedback(self, breakpoint_id: str, comment: str) -> models.FeedbackCreated:
        """Comment without deciding."""
        return self._run(self._ops.feedback(breakpoint_id, feedback_body(comment, release=False)))

    def release(
        self,
        breakpoint_id: str,
        comment: str = "",
        *,
        approved: bool = True,
        option: str | None = None,
        values: Mapping[str, Any] | None = None,
    ) -> models.FeedbackCreated:
        """Decide: approve (default), reject with `approved=False`, or pick an `option`."""
        body = feedback_body(comment, release=True, approved=approved, option=option, values=values)
        return self._run(self._ops.feedback(breakpoint_id, body))

    def expire(self, breakpoint_id: str) -> str:
        """Expire now (admins only)."""
        return self._run(self._ops.expire(breakpoint_id))

    # --- admin -----------------------------------------------------------------------

    def simulate_rule(
        self,
        pattern: str | None = None,
        *,
        action: str | None = None,
        key: str | None = None,
        n: int | None = None,
        since: str | None = None,
    ) -> models.RuleReplay:
        """What a rule would have done over the finished breakpoints since `since` (an ISO
        8601 time or a duration such as "90d"; the server's default: 90 days), with the
        rules that exist now (admins only). `action="autoApproveAfterN"` takes `key` and `n`."""
        body = rule_body(pattern, action=action, key=key, n=n, since=since)
        return self._run(self._ops.simulate_rule(body))

    # --- plumbing --------------------------------------------------------------------

    def _run(self, op: Op[T]) -> T:
        """Drive a step generator with blocking I/O (see steps.py)."""
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
                    time.sleep(step.seconds)
                else:
                    arguments = request_arguments(step, self._http.timeout)
                    value = interruptible(functools.partial(self._http.request, **arguments))
            except (httpx.TransportError, KeyboardInterrupt) as exc:
                error = exc

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
