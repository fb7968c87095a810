"""A thin ASGI handler in front of Django for the status paths, so a wait holds no thread.

    GET /api/breakpoints/{id}/status[?wait=N]
    GET /api/breakpoints/status?id=A&id=B…[&wait=N]

with a Bearer token are answered here; everything else (and these paths without a Bearer
token, e.g. a console session) goes to Django unchanged. Django's own ASGI handler runs
every request in a thread of its own for its whole life, which is why waits bypass it.
The token check, validation, scoping and bodies are the DRF views' own (reads, query,
bodies); the only new thing here is waiting on the hub instead of sleeping in a thread.
"""

import asyncio
import logging
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl

from django.db import DatabaseError
from django.utils import timezone
from psycopg_pool import PoolTimeout

from accounts.authentication import WWW_AUTHENTICATE, bearer_credentials
from accounts.tokens import hash_token
from breakpoints.waiting import reads
from breakpoints.waiting.bodies import many_body, poll_rate, status_body
from breakpoints.waiting.bridge import run_sync
from breakpoints.waiting.hub import GONE, TIMED_OUT, TooManyWaiters, get_hub, stop_hub
from breakpoints.waiting.metrics import count_status_request
from breakpoints.waiting.query import StatusQuery
from core.choices import Status
from core.exceptions import DomainError, RateLimited
from infra.logging import current_request_id
from web import asgi_http, outage
from web.errors import envelope, http_status, unavailable_envelope

logger = logging.getLogger(__name__)

STATUS_PATH = re.compile(r"^/api/breakpoints/(?:(?P<id>[^/]+)/)?status/?$")
RETRY_AFTER_SECONDS = 1
Rows = dict[str, dict[str, Any]]
Scope = dict[str, Any]


class WaitingApp:
    """The project's ASGI application: status paths here, the rest to `django_app`."""

    def __init__(self, django_app: Any, on_startup: Callable[[], None] | None = None):
        self.django_app = django_app
        self.on_startup = on_startup  # raises to refuse to start

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] == "http" and scope["method"] == "GET":
            match = STATUS_PATH.match(scope["path"])
            raw_token = _bearer(scope) if match else None
            if match and raw_token is not None:
                await self._status(scope, receive, send, match["id"], raw_token)
                return
        await self.django_app(scope, receive, send)

    async def _lifespan(self, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    if self.on_startup is not None:
                        self.on_startup()
                except Exception as exc:  # noqa: BLE001 - the server prints it and exits
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                get_hub()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await stop_hub()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _status(
        self, scope: Scope, receive: Any, send: Any, path_id: str | None, raw_token: str
    ) -> None:
        request_id = asgi_http.request_id(scope)
        current_request_id.set(request_id)  # this request's task: its own context
        params = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        many = path_id is None
        ids = [v for k, v in params if k == "id"] if many else [path_id or ""]
        wait = [v for k, v in params if k == "wait"]
        poll_rate.hit()
        count_status_request(many=many)
        if outage.failing_fast():  # as Django's paths (web.middleware)
            await _unavailable(send, request_id)
            return
        try:
            principal, query, rows = await run_sync(
                reads.begin,
                raw_token,
                address=asgi_http.scope_address(scope),
                ids=ids,
                wait=wait,
                many=many,
            )
            if rows is None:
                rows = await self._wait(principal, query, hash_token(raw_token), receive)
                if rows is None:
                    return  # the client went away: nobody to answer
            if many:
                await _respond(send, 200, many_body(query.ids, rows), request_id)
            elif (row := rows.get(query.ids[0])) is not None:
                await _respond(send, 200, status_body(row), request_id)
            else:
                await _respond(
                    send, 404, envelope("not_found", "Breakpoint not found."), request_id
                )
        except DomainError as exc:
            body = envelope(exc.code, exc.message, exc.details)
            retry_after = exc.retry_after if isinstance(exc, RateLimited) else RETRY_AFTER_SECONDS
            await _respond(send, http_status(exc), body, request_id, retry_after=retry_after)
        except TooManyWaiters as exc:
            await _too_many(send, exc, request_id)
        except (DatabaseError, PoolTimeout) as exc:
            logger.warning("Status request failed on the database", exc_info=True)
            outage.record_failure(exc)
            await _unavailable(send, request_id)
        except Exception:
            logger.exception("Status request failed")
            body = envelope("server_error", "Internal server error.")
            await _respond(send, 500, body, request_id)

    async def _wait(
        self, principal: Any, query: StatusQuery, owner: str, receive: Any
    ) -> Rows | None:
        """Hold the answer while every visible breakpoint asked for is still waiting.

        Subscribes before reading, so a change between the read and the wait still wakes
        it. Returns the rows to answer with, or None if the client disconnected.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + query.wait
        hub = get_hub()
        waiter = hub.subscribe(query.ids, owner)
        # One future per waiter, set by whichever comes first: the hub (rows), the client
        # leaving (GONE) or a timer (TIMED_OUT); thousands are held at once, so each costs
        # as little as it can (no asyncio.wait, no timeout task).
        disconnected = asyncio.ensure_future(_until_disconnect(receive))
        disconnected.add_done_callback(lambda _: waiter.wake(GONE))
        try:
            rows = await run_sync(reads.statuses, principal, query.ids)
            if len(rows) < len(query.ids):  # watch only what the caller may see
                hub.rearm(waiter, tuple(rows))
            while _all_waiting(rows) and (remaining := deadline - loop.time()) > 0:
                if disconnected.done():
                    return None
                timer = loop.call_later(min(remaining, _until_due(rows)), waiter.wake, TIMED_OUT)
                try:
                    woke = await waiter.future
                finally:
                    timer.cancel()
                if woke is GONE:
                    return None
                if isinstance(woke, dict) and len(query.ids) == 1:
                    return {**rows, **woke}  # the row the hub just read: no second query
                hub.rearm(waiter, waiter.ids)
                # Woken for one of many, past an expiresAt, or at the deadline: read again
                # (an overdue breakpoint expires on this read).
                rows = await run_sync(reads.statuses, principal, query.ids)
            return rows
        finally:
            hub.unsubscribe(waiter)
            disconnected.cancel()


async def _until_disconnect(receive: Any) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


def _all_waiting(rows: Rows) -> bool:
    return bool(rows) and all(row["status"] == Status.WAITING for row in rows.values())


def _until_due(rows: Rows) -> float:
    """Seconds until the first of these breakpoints is due to expire (inf if none)."""
    now = timezone.now()
    due = [(row["expires_at"] - now).total_seconds() for row in rows.values() if row["expires_at"]]
    return max(0.0, min(due)) + 0.01 if due else float("inf")


def _bearer(scope: Scope) -> str | None:
    header = asgi_http.header(scope, b"authorization")
    return bearer_credentials(header) if header else None


async def _too_many(send: Any, exc: TooManyWaiters, request_id: str) -> None:
    """429 or 503 with Retry-After, and the connection closed: a client past the cap does
    not keep its sockets (the process's open files) to itself."""
    if exc.per_token:
        body = envelope("throttled", "Too many waits open for this token; retry shortly.")
        await _respond(send, 429, body, request_id, close=True)
    else:
        body = envelope("unavailable", "This server holds too many waits; retry shortly.")
        await _respond(send, 503, body, request_id, close=True)


async def _unavailable(send: Any, request_id: str) -> None:
    retry_after = outage.retry_after_seconds()
    await _respond(
        send, 503, unavailable_envelope(retry_after), request_id, retry_after=retry_after
    )


async def _respond(
    send: Any,
    status: int,
    body: dict[str, Any],
    request_id: str,
    *,
    retry_after: int = RETRY_AFTER_SECONDS,
    close: bool = False,
) -> None:
    extra = [(b"connection", b"close")] if close else []
    if status in (429, 503):
        extra.append((b"retry-after", str(retry_after).encode()))
    if status == 401:
        extra.append((b"www-authenticate", WWW_AUTHENTICATE.encode()))
    await asgi_http.send_json(send, status, body, request_id, extra)
