"""Every API operation as a step generator (see steps.py), shared by Client and AsyncClient."""

from __future__ import annotations

import asyncio
import dataclasses
import math
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit

from . import models
from .errors import WaitTimeout
from .steps import Call, Op, Retry, Sleep, send

MAX_HOLD_SECONDS = 60  # the server holds a long-poll at most this long
MAX_IDS_PER_WAIT = 100
# How much longer than the hold the HTTP read may take (network, a busy server).
READ_MARGIN_SECONDS = 15.0


def new_idempotency_key() -> str:
    return f"bpm-{uuid.uuid4()}"


def _path(breakpoint_id: str, action: str = "") -> str:
    # quote with safe="": an id is one path segment, whatever it holds.
    return f"/api/breakpoints/{quote(breakpoint_id, safe='')}{action}"


@dataclasses.dataclass(frozen=True)
class Operations:
    """The operations, with the client's settings.

    `retry` governs ordinary calls. `reconnect` governs waiting: while an agent waits, a
    lost connection or a restarting server is retried until `reconnect.give_up_after`
    seconds of consecutive failures. `hold` is the long-poll length asked of the server.
    """

    retry: Retry = Retry()
    reconnect: Retry = Retry(attempts=None, give_up_after=300.0, cap=5.0)
    hold: int = 50
    strict: bool = False  # decode answers strictly (the SDK's own tests use it)

    @classmethod
    def configured(
        cls, retry: Retry | None, reconnect_for: float, *, hold: int, strict: bool
    ) -> Operations:
        """The clients' settings: `reconnect_for` seconds of failures end a wait."""
        reconnect = Retry(attempts=None, give_up_after=reconnect_for, cap=5.0)
        return cls(retry=retry or Retry(), reconnect=reconnect, hold=hold, strict=strict)

    def _decode(self, model: type[models.M], data: Any) -> models.M:
        return model.from_json(data, strict=self.strict)

    # --- agent -----------------------------------------------------------------------

    def create(
        self, body: dict[str, Any], idempotency_key: str | None = None
    ) -> Op[models.Breakpoint]:
        """Create; with an Idempotency-Key (one is made when none is given) a resend is safe."""
        headers = {"Idempotency-Key": idempotency_key or new_idempotency_key()}
        call = Call("POST", "/api/breakpoints", json=body, headers=headers, idempotent=True)
        return self._decode(models.Breakpoint, (yield from send(call, self.retry)))

    def get(self, breakpoint_id: str) -> Op[models.Breakpoint]:
        data = yield from send(Call("GET", _path(breakpoint_id)), self.retry)
        return self._decode(models.Breakpoint, data)

    def status(self, breakpoint_id: str, *, hold: int = 0) -> Op[models.Status]:
        params = [("wait", str(hold))] if hold else []
        call = Call(
            "GET",
            _path(breakpoint_id, "/status"),
            params=params,
            timeout=hold + READ_MARGIN_SECONDS if hold else None,
        )
        retry = self.reconnect if hold else self.retry
        return self._decode(models.Status, (yield from send(call, retry)))

    def cancel(self, breakpoint_id: str, reason: str | None = None) -> Op[str]:
        """Cancel (cancelling a cancelled one again is fine); returns the new status."""
        body = {"reason": reason} if reason else {}
        call = Call("POST", _path(breakpoint_id, "/cancel"), json=body, idempotent=True)
        return self._decode(models.StatusOnly, (yield from send(call, self.retry))).status

    def events(self, breakpoint_id: str) -> Op[list[models.Event]]:
        data = yield from send(Call("GET", _path(breakpoint_id, "/events")), self.retry)
        return self._decode(models.EventList, data).results

    def page(self, params: list[tuple[str, str]]) -> Op[models.BreakpointPage]:
        data = yield from send(Call("GET", "/api/breakpoints", params=params), self.retry)
        return self._decode(models.BreakpointPage, data)

    # --- waiting ---------------------------------------------------------------------

    def wait(self, breakpoint_id: str, timeout: float | None = None) -> Op[models.Status]:
        """Long-poll until the breakpoint is decided; WaitTimeout after `timeout` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            hold = self._hold(deadline)
            started = time.monotonic()
            status = yield from self.status(breakpoint_id, hold=hold)
            if status.done:
                return status
            if deadline is not None and time.monotonic() >= deadline:
                raise WaitTimeout(breakpoint_id, timeout or 0)
            yield from self._pace(started, hold, status.poll_after_ms, deadline)

    def wait_any(
        self, breakpoint_ids: Sequence[str], timeout: float | None = None
    ) -> Op[list[models.StatusEntry]]:
        """Long-poll several until any is decided (or not visible): every entry, in order."""
        ids = list(dict.fromkeys(breakpoint_ids))
        if not 1 <= len(ids) <= MAX_IDS_PER_WAIT:
            raise ValueError(f"wait_any takes 1 to {MAX_IDS_PER_WAIT} distinct ids")
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            hold = self._hold(deadline)
            started = time.monotonic()
            call = Call(
                "GET",
                "/api/breakpoints/status",
                params=[*(("id", i) for i in ids), ("wait", str(hold))],
                timeout=hold + READ_MARGIN_SECONDS,
            )
            data = yield from send(call, self.reconnect)
            entries = self._decode(models.ManyStatus, data).results
            if any(entry.done or entry.error for entry in entries):
                return entries
            if deadline is not None and time.monotonic() >= deadline:
                raise WaitTimeout(ids, timeout or 0)
            hint = min((e.poll_after_ms or 0 for e in entries), default=0)
            yield from self._pace(started, hold, hint, deadline)

    def _hold(self, deadline: float | None) -> int:
        if deadline is None:
            return self.hold
        remaining = deadline - time.monotonic()
        return max(1, min(self.hold, math.ceil(remaining)))

    def _pace(
        self, started: float, hold: int, poll_after_ms: int | None, deadline: float | None
    ) -> Op[None]:
        """After an early 'still waiting', pause as the server's pollAfterMs hint says."""
        if time.monotonic() - started >= hold - 1 or not poll_after_ms:
            return
        pause = poll_after_ms / 1000
        if deadline is not None:
            pause = min(pause, max(0.0, deadline - time.monotonic()))
        if pause > 0:
            yield Sleep(pause)

    def ask(
        self,
        body: dict[str, Any],
        *,
        key: str | None = None,
        timeout: float | None = None,
        cancel_on_interrupt: bool = False,
        on_created: Callable[[models.Breakpoint], None] | None = None,
    ) -> Op[models.BreakpointResult]:
        """Create, wait, return the result: babysitter's ctx.breakpoint() in one call.

        Interrupted while waiting (Ctrl-C, task cancelled), nothing changes on the server
        unless `cancel_on_interrupt`: then the breakpoint is cancelled before re-raising.
        `on_created` hears of the breakpoint before the wait begins (to show its id).
        """
        key = key or new_idempotency_key()
        created: models.Breakpoint | None = None
        try:
            created = yield from self.create(body, key)
            if on_created is not None:
                on_created(created)
            status: models.Status | models.Breakpoint = created
            if not created.done:
                status = yield from self.wait(created.breakpoint_id, timeout)
        except (KeyboardInterrupt, asyncio.CancelledError):
            if cancel_on_interrupt:
                # Interrupted mid-create: the same key answers with the breakpoint if it
                # was made (or makes it), so there is always an id to cancel.
                target = created or (yield from self.create(body, key))
                yield from self.cancel(target.breakpoint_id, "interrupted by the agent")
            raise
        return result_of(created.breakpoint_id, status)

    # --- reviewer --------------------------------------------------------------------

    def feedback(self, breakpoint_id: str, body: dict[str, Any]) -> Op[models.FeedbackCreated]:
        """Comment, or release: never resent once it may have reached the server."""
        call = Call("POST", _path(breakpoint_id, "/feedback"), json=body, idempotent=False)
        return self._decode(models.FeedbackCreated, (yield from send(call, self.retry)))

    def expire(self, breakpoint_id: str) -> Op[str]:
        call = Call("POST", _path(breakpoint_id, "/expire"), json={}, idempotent=True)
        return self._decode(models.StatusOnly, (yield from send(call, self.retry))).status

    # --- admin -----------------------------------------------------------------------

    def simulate_rule(self, body: dict[str, Any]) -> Op[models.RuleReplay]:
        """Replay a rule over the decisions already made; nothing is saved, so a resend is
        safe."""
        call = Call("POST", "/api/rules/simulate", json=body, idempotent=True)
        return self._decode(models.RuleReplay, (yield from send(call, self.retry)))


def result_of(
    breakpoint_id: str, status: models.Status | models.Breakpoint | models.StatusEntry
) -> models.BreakpointResult:
    """The BreakpointResult of a decided breakpoint, with its id and status filled in."""
    result = status.result or models.BreakpointResult(approved=False)
    return dataclasses.replace(result, status=status.status, breakpoint_id=breakpoint_id)


def next_params(page: models.BreakpointPage) -> list[tuple[str, str]] | None:
    """The query of the next page (taken from `next`; the host is always the client's own)."""
    if not page.next:
        return None
    return parse_qsl(urlsplit(page.next).query, keep_blank_values=True)
