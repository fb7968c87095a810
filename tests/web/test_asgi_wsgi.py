"""web.asgi_wsgi: Django's WSGI answers sent from the event loop, whole or streamed."""

import threading

import pytest

from tests.support.aio import run_async
from web.asgi_wsgi import BODY, DjangoApp


class Answer:
    """A WSGI iterable like Django's responses: `streaming` says which kind it is."""

    def __init__(self, chunks, *, streaming):
        self.chunks, self.streaming = chunks, streaming
        self.closed_in: str | None = None

    def __iter__(self):
        return iter(self.chunks)

    def close(self):
        self.closed_in = threading.current_thread().name


def call(app, *, method="GET", scope_extra=None, receive=None):
    sent = []

    async def send(message):
        sent.append(message)

    async def no_receive():
        raise AssertionError("the body was read from the connection")

    scope = {
        "type": "http",
        "method": method,
        "path": "/x",
        "query_string": b"",
        "headers": [(b"content-length", b"3")] if scope_extra else [],
        "http_version": "1.1",
        **(scope_extra or {}),
    }
    run_async(DjangoApp(app, workers=2)(scope, receive or no_receive, send))
    return sent


def test_a_whole_response_is_two_messages_and_closed_in_the_worker_thread():
    answer = Answer([b"he", b"llo"], streaming=False)

    def app(environ, start_response):
        start_response("201 Created", [("Content-Type", "text/plain"), ("X-A", " b ")])
        return answer

    sent = call(app)
    assert sent == [
        {
            "type": "http.response.start",
            "status": 201,
            "headers": [(b"content-type", b"text/plain"), (b"x-a", b"b")],
        },
        {"type": "http.response.body", "body": b"hello"},
    ]
    assert answer.closed_in is not None and answer.closed_in.startswith("WSGI")


def test_a_streaming_response_is_sent_chunk_by_chunk_then_ended():
    answer = Answer([b"1", b"", b"2"], streaming=True)

    def app(environ, start_response):
        start_response("200 OK", [])
        return answer

    sent = call(app)
    assert [message.get("body") for message in sent] == [None, b"1", b"2", b""]
    assert sent[0] == {"type": "http.response.start", "status": 200, "headers": []}
    assert [message.get("more_body", False) for message in sent[1:]] == [True, True, False]
    assert answer.closed_in is not None


def test_an_empty_streaming_response_still_starts_and_ends():
    def app(environ, start_response):
        start_response("204 No Content", [])
        return Answer([], streaming=True)

    sent = call(app)
    assert sent == [
        {"type": "http.response.start", "status": 204, "headers": []},
        {"type": "http.response.body", "body": b""},
    ]


def test_write_before_the_iterable_is_sent_first():
    def app(environ, start_response):
        write = start_response("200 OK", [])
        write(b"early ")
        return Answer([b"late"], streaming=False)

    sent = call(app)
    assert b"".join(message.get("body", b"") for message in sent) == b"early late"
    assert sent[0]["type"] == "http.response.start"
    assert sent[-1] == {"type": "http.response.body", "body": b""}


def test_the_buffered_body_is_read_from_memory_not_the_connection():
    def app(environ, start_response):
        start_response("200 OK", [])
        length = int(environ["CONTENT_LENGTH"])
        return Answer([environ["wsgi.input"].read(length)[::-1]], streaming=False)

    sent = call(app, method="POST", scope_extra={BODY: b"abc"})
    assert sent[-1]["body"] == b"cba"


def test_without_a_buffered_body_the_connection_is_read():
    async def receive():
        return {"type": "http.request", "body": b"xyz", "more_body": False}

    def app(environ, start_response):
        start_response("200 OK", [])
        return Answer([environ["wsgi.input"].read(3)], streaming=False)

    sent = call(app, method="POST", receive=receive)
    assert sent[-1]["body"] == b"xyz"


def test_an_application_error_before_any_answer_reaches_the_server():
    def app(environ, start_response):
        raise RuntimeError("boom")

    sent = []

    async def send(message):
        sent.append(message)

    scope = {
        "type": "http",
        "method": "GET",
        "path": "/",
        "query_string": b"",
        "headers": [],
        "http_version": "1.1",
    }
    with pytest.raises(RuntimeError, match="boom"):
        run_async(DjangoApp(app, workers=1)(scope, None, send))
    assert sent == []  # the server answers 500 itself


def test_lifespan_is_acknowledged():
    messages = iter([{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}])
    sent = []

    async def receive():
        return next(messages)

    async def send(message):
        sent.append(message["type"])

    run_async(DjangoApp(lambda e, s: [], workers=1)({"type": "lifespan"}, receive, send))
    assert sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
