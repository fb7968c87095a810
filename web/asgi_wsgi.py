"""Django (WSGI) served from the ASGI server on a fixed pool of threads.

a2wsgi's WSGIMiddleware, which this replaced, hands every step between the view's
thread and the event loop over as its own round trip: the body read, the response's
start, each chunk, the end, each one a coroutine scheduled from the thread and waited
for. On the create and release paths those hand-overs cost about a fifth of the web
process's CPU (docs/benchmarks.md, the write paths). Here:

- the request body is the one BufferedBodyApp already read whole (`BODY`): the view reads
  it from memory; a request that came without one reads through a2wsgi's Body as before;
- a response that does not stream (an HttpResponse: every API answer) is made whole in
  the thread, its iterable closed there (Django's request_finished: the database connection
  goes back to the pool), and sent by the event loop in two messages, with no round trip;
- a streaming response (StreamingHttpResponse, FileResponse) is sent chunk by chunk from
  the thread as it is produced, each chunk waited for, as a2wsgi did.

Lifespan events are acknowledged and websockets closed, as a2wsgi did.
"""

import asyncio
import contextvars
import functools
import io
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from a2wsgi.wsgi import Body, build_environ

Scope = dict[str, Any]
Message = dict[str, Any]

# The scope key under which BufferedBodyApp hands on the body it read whole.
BODY = "bpm.body"


class _Whole:
    """A response made whole in the thread: sent by the event loop."""

    __slots__ = ("status", "headers", "body")

    def __init__(self, status: int, headers: list[tuple[bytes, bytes]], body: bytes):
        self.status, self.headers, self.body = status, headers, body


class _Response:
    """start_response's state for one request, in the thread that runs the view."""

    def __init__(self, loop: asyncio.AbstractEventLoop, send: Any):
        self.loop, self.send_async = loop, send
        self.status = 500
        self.headers: list[tuple[bytes, bytes]] = []
        self.started = False  # a streaming response's start was sent

    def start_response(self, status: str, headers: list[tuple[str, str]], exc_info: Any = None):
        if exc_info is not None and self.started:
            raise exc_info[1].with_traceback(exc_info[2])
        self.status = int(status.split(" ", 1)[0])
        self.headers = [
            (name.strip().encode("latin1").lower(), value.strip().encode("latin1"))
            for name, value in headers
        ]
        return self.write

    def write(self, chunk: bytes) -> None:
        """WSGI's write(), and a streaming response's chunks: sent now, waited for."""
        if not self.started:
            self.started = True
            self.send(
                {"type": "http.response.start", "status": self.status, "headers": self.headers}
            )
        self.send({"type": "http.response.body", "body": chunk, "more_body": True})

    def send(self, message: Message) -> None:
        asyncio.run_coroutine_threadsafe(self.send_async(message), self.loop).result()


class DjangoApp:
    """ASGI app running the WSGI application `app` on `workers` threads."""

    def __init__(self, app: Any, workers: int):
        self.app = app
        self.executor = ThreadPoolExecutor(thread_name_prefix="WSGI", max_workers=workers)

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            await send({"type": "websocket.close", "code": 1000})
            return
        loop = asyncio.get_running_loop()
        body = scope.get(BODY)
        environ = build_environ(
            scope,  # type: ignore[arg-type]
            io.BytesIO(body) if body is not None else Body(loop, receive),  # type: ignore[arg-type]
        )
        response = _Response(loop, send)
        context = contextvars.copy_context()  # the request's (its id in the logs)
        whole = await loop.run_in_executor(
            self.executor, functools.partial(context.run, self._respond, environ, response)
        )
        if whole is not None:
            await send(
                {"type": "http.response.start", "status": whole.status, "headers": whole.headers}
            )
        await send({"type": "http.response.body", "body": whole.body if whole else b""})

    def _respond(self, environ: Any, response: _Response) -> _Whole | None:
        """In a worker thread: the view's answer, whole unless it streams (then sent, and
        None: the event loop ends it). A streaming answer that sent nothing is whole."""
        iterable = self.app(environ, response.start_response)
        try:
            if getattr(iterable, "streaming", True) or response.started:
                for chunk in iterable:
                    if chunk:
                        response.write(chunk)
                body = b""
            else:
                body = b"".join(iterable)
        finally:
            close = getattr(iterable, "close", None)
            if close is not None:
                close()
        return None if response.started else _Whole(response.status, response.headers, body)


async def _lifespan(receive: Any, send: Any) -> None:
    message = await receive()
    assert message["type"] == "lifespan.startup"
    await send({"type": "lifespan.startup.complete"})
    message = await receive()
    assert message["type"] == "lifespan.shutdown"
    await send({"type": "lifespan.shutdown.complete"})
