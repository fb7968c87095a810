"""BufferedBodyApp's limits, in process: the read deadline (408), the uploads one address
may have arriving at once (429), and a declared length over the limit (413, nothing read).

Bodies with a Content-Length are read whole before the app (Django on its thread pool) is
called at all: a slow body never holds a thread (issue 19; the live-server check is
tests/live/integration/test_slow_bodies.py).
"""

import asyncio
import json
from typing import Any

from django.test import override_settings

from tests.support.aio import run_async
from web.asgi_body import BufferedBodyApp

Headers = list[tuple[bytes, bytes]]


class Client:
    """One request to the middleware: its body arrives when the test says so."""

    def __init__(self, headers: Headers, address: str = "10.0.0.1", method: str = "POST"):
        self.scope = {
            "type": "http",
            "method": method,
            "path": "/api/events/gh",
            "headers": headers,
            "client": (address, 5000),
        }
        self.messages: asyncio.Queue[dict] = asyncio.Queue()
        self.sent: list[dict] = []
        self.received = 0

    async def receive(self) -> dict:
        self.received += 1
        return await self.messages.get()

    async def send(self, message: dict) -> None:
        self.sent.append(message)

    def body(self, chunk: bytes, more: bool = False) -> None:
        self.messages.put_nowait({"type": "http.request", "body": chunk, "more_body": more})

    @property
    def status(self) -> int | None:
        return self.sent[0]["status"] if self.sent else None

    def answer(self) -> dict[str, Any]:
        return json.loads(self.sent[1]["body"])

    def header(self, name: bytes) -> bytes | None:
        return dict(self.sent[0]["headers"]).get(name)


class Recorder:
    """The app behind the middleware: records each request it is handed, and its body."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.headers: list[Headers] = []

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        self.headers.append(scope["headers"])
        self.bodies.append((await receive()).get("body", b""))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


def length(n: int) -> Headers:
    return [(b"content-length", str(n).encode())]


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_a_body_is_read_whole_before_the_app_is_called():
    app = Recorder()

    async def scenario() -> Client:
        client = Client(length(1000))
        task = asyncio.ensure_future(
            BufferedBodyApp(app)(client.scope, client.receive, client.send)
        )
        client.body(b'{"', more=True)
        await settle()
        assert app.bodies == []  # two bytes of a thousand: nobody is handed the request yet
        client.body(b"x" * 998)
        await task
        return client

    client = run_async(scenario())

    assert app.bodies == [b'{"' + b"x" * 998]
    assert app.headers == [length(1000)]
    assert client.status == 200


@override_settings(BPM_BODY_READ_SECONDS=0.05)
def test_a_body_that_does_not_arrive_in_time_is_408_and_never_reaches_the_app():
    app = Recorder()

    async def scenario() -> Client:
        client = Client(length(1000))
        client.body(b'{"', more=True)  # and then nothing
        await BufferedBodyApp(app)(client.scope, client.receive, client.send)
        return client

    client = run_async(scenario())

    assert client.status == 408
    assert client.answer() == {
        "error": {
            "code": "request_timeout",
            "message": "The request body did not arrive within 0.05 seconds.",
            "details": {"limit": 0.05},
        }
    }
    assert client.header(b"connection") == b"close"
    assert client.header(b"x-request-id")
    assert app.bodies == []


@override_settings(BPM_MAX_BODY_BYTES=100)
def test_a_declared_length_over_the_limit_is_413_before_anything_is_read():
    app = Recorder()
    client = Client(length(101))

    run_async(BufferedBodyApp(app)(client.scope, client.receive, client.send))

    assert client.status == 413
    assert client.answer()["error"]["code"] == "payload_too_large"
    assert client.answer()["error"]["details"] == {"limit": 100}
    assert client.received == 0
    assert app.bodies == []


@override_settings(BPM_MAX_UPLOADS_PER_ADDRESS=2, BPM_BODY_READ_SECONDS=30)
def test_an_address_may_have_only_a_few_bodies_arriving_at_once():
    app = Recorder()
    middleware = BufferedBodyApp(app)

    def start(client: Client) -> asyncio.Future:
        return asyncio.ensure_future(middleware(client.scope, client.receive, client.send))

    async def scenario() -> dict[str, Client]:
        slow = [Client(length(10)), Client(length(10))]
        tasks = [start(client) for client in slow]
        await settle()
        clients = {
            "third": Client(length(10)),
            "other address": Client(length(2), address="10.0.0.2"),
            "no body": Client([], method="GET"),
        }
        clients["other address"].body(b"ok")
        clients["no body"].body(b"")
        for client in clients.values():
            await start(client)
        for client in slow:  # their bodies end: the address's slots are free again
            client.body(b"0123456789")
        await asyncio.gather(*tasks)
        clients["later"] = Client(length(2))
        clients["later"].body(b"ok")
        await start(clients["later"])
        return clients

    clients = run_async(scenario())

    third = clients["third"]
    assert third.status == 429
    assert third.answer()["error"]["code"] == "throttled"
    assert third.answer()["error"]["details"] == {"retryAfter": 1}
    assert third.header(b"retry-after") == b"1"
    assert third.received == 0
    assert clients["other address"].status == 200
    assert clients["no body"].status == 200  # a read is never held back by uploads
    assert clients["later"].status == 200
    assert middleware.uploads == {}


@override_settings(BPM_MAX_UPLOADS_PER_ADDRESS=1, BPM_BODY_READ_SECONDS=0.05)
def test_a_timed_out_or_abandoned_upload_frees_its_slot():
    app = Recorder()
    middleware = BufferedBodyApp(app)

    async def scenario() -> list[Client]:
        timed_out, gone, later = Client(length(10)), Client(length(10)), Client(length(2))
        await middleware(timed_out.scope, timed_out.receive, timed_out.send)
        gone.messages.put_nowait({"type": "http.disconnect"})
        await middleware(gone.scope, gone.receive, gone.send)
        later.body(b"ok")
        await middleware(later.scope, later.receive, later.send)
        return [timed_out, gone, later]

    timed_out, gone, later = run_async(scenario())

    assert timed_out.status == 408
    assert gone.sent == []
    assert later.status == 200
    assert app.bodies == [b"ok"]
    assert middleware.uploads == {}


@override_settings(BPM_MAX_UPLOADS_PER_ADDRESS=1, BPM_BODY_READ_SECONDS=30, BPM_NUM_PROXIES=1)
def test_behind_a_trusted_proxy_the_forwarded_address_is_the_one_counted():
    middleware = BufferedBodyApp(Recorder())

    def behind_proxy(forwarded: bytes) -> Client:
        return Client([*length(2), (b"x-forwarded-for", forwarded)], address="127.0.0.1")

    async def scenario() -> list[Client]:
        first, second, same = (
            behind_proxy(b"1.1.1.1"),
            behind_proxy(b"2.2.2.2"),
            behind_proxy(b"1.1.1.1"),
        )
        task = asyncio.ensure_future(middleware(first.scope, first.receive, first.send))
        await settle()
        second.body(b"ok")
        await middleware(second.scope, second.receive, second.send)
        await middleware(same.scope, same.receive, same.send)
        first.body(b"ok")
        await task
        return [first, second, same]

    first, second, same = run_async(scenario())

    assert (first.status, second.status, same.status) == (200, 200, 429)


@override_settings(BPM_BODY_READ_SECONDS=1)
def test_the_408_says_one_second_not_one_seconds():
    client = Client(length(1000))
    client.body(b'{"', more=True)

    run_async(BufferedBodyApp(Recorder())(client.scope, client.receive, client.send))

    assert client.status == 408
    assert client.answer()["error"]["message"] == (
        "The request body did not arrive within 1 second."
    )
