"""A real HTTP endpoint for webhook tests: records what arrives, answers as scripted.

It runs a ThreadingHTTPServer on 127.0.0.1 (a free port) in a background thread, so
both the test process (`webhooks.delivery_attempt`) and Celery worker subprocesses can
POST to it. Nothing here imitates the sender: the tests inspect exactly the bytes and
headers that crossed the socket.
"""

import base64
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Received:
    """One request as it arrived: lower-cased headers and the raw body bytes."""

    path: str
    headers: dict[str, str]
    body: bytes
    received_at: float = field(default_factory=time.monotonic)

    @property
    def webhook_id(self) -> str:
        return self.headers.get("webhook-id", "")

    def json(self) -> Any:
        return json.loads(self.body)


def expected_signature(secret: str, msg_id: str, timestamp: str, body: bytes) -> str:
    """The contract's signature, computed by hand (not with the library the sender uses).

    `v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`; a `whsec_` secret is used
    base64-decoded, any other secret as its UTF-8 bytes.
    """
    if secret.startswith("whsec_"):
        key = base64.b64decode(secret[len("whsec_") :])
    else:
        key = secret.encode("utf-8")
    signed = f"{msg_id}.{timestamp}.".encode() + body
    digest = hmac.new(key, signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


class WebhookReceiver:
    """Records every POST; answers `statuses` in order (then `default_status`).

    `hold_first=N, hold_seconds=S` delays the answer to the first N requests by S seconds
    (the request is recorded before the delay, so a test can see it arrived).
    `max_in_flight` is the most requests it was ever handling at the same time.
    """

    def __init__(
        self,
        *,
        statuses: list[int] | None = None,
        default_status: int = 200,
        hold_first: int = 0,
        hold_seconds: float = 0.0,
    ):
        self._statuses = list(statuses or [])
        self.default_status = default_status
        self.hold_first = hold_first
        self.hold_seconds = hold_seconds
        self._received: list[Received] = []
        self._answered: list[tuple[str, int]] = []
        self._in_flight = 0
        self.max_in_flight = 0
        self._condition = threading.Condition()
        self._stop_holding = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._server.block_on_close = False
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="webhook-receiver",
            daemon=True,
        )

    # --- lifecycle ----------------------------------------------------------------

    def start(self) -> "WebhookReceiver":
        self._thread.start()
        return self

    def release_held(self) -> None:
        """Answer the held requests now (and hold no more)."""
        self._stop_holding.set()

    def close(self) -> None:
        self._stop_holding.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> "WebhookReceiver":
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.close()

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    # --- what arrived ---------------------------------------------------------------

    @property
    def received(self) -> list[Received]:
        with self._condition:
            return list(self._received)

    @property
    def answered(self) -> list[tuple[str, int]]:
        """(webhook-id, status) for every answer actually written back."""
        with self._condition:
            return list(self._answered)

    def with_id(self, webhook_id: str) -> list[Received]:
        return [r for r in self.received if r.webhook_id == webhook_id]

    def of_type(self, event_type: str) -> list[Received]:
        return [r for r in self.received if r.json().get("type") == event_type]

    def wait_for(
        self, predicate: Callable[[list[Received]], bool], timeout: float, what: str = ""
    ) -> list[Received]:
        """Block until predicate(received) holds; AssertionError after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        with self._condition:
            while not predicate(list(self._received)):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(
                        f"Timed out after {timeout}s waiting for {what or 'webhooks'}; "
                        f"received {len(self._received)}: "
                        f"{[(r.webhook_id, r.json().get('type')) for r in self._received]}"
                    )
                self._condition.wait(min(remaining, 0.2))
            return list(self._received)

    # --- the server side ------------------------------------------------------------

    def _next_answer(self, received: Received) -> tuple[int, float]:
        with self._condition:
            self._received.append(received)
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
            index = len(self._received)
            status = self._statuses.pop(0) if self._statuses else self.default_status
            self._condition.notify_all()
        delay = self.hold_seconds if index <= self.hold_first else 0.0
        return status, delay

    def _answered_with(self, webhook_id: str, status: int | None) -> None:
        """The request is over: answered with `status`, or None when the sender left."""
        with self._condition:
            self._in_flight -= 1
            if status is not None:
                self._answered.append((webhook_id, status))
            self._condition.notify_all()

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length)
                headers = {name.lower(): value for name, value in self.headers.items()}
                received = Received(path=self.path, headers=headers, body=body)
                status, delay = receiver._next_answer(received)
                if delay:
                    receiver._stop_holding.wait(delay)
                answer = json.dumps({"ok": 200 <= status < 300}).encode()
                answered: int | None = status
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(answer)))
                    self.send_header("connection", "close")
                    self.end_headers()
                    self.wfile.write(answer)
                    self.wfile.flush()
                except OSError:  # the sender went away meanwhile (e.g. its worker was killed)
                    answered = None
                receiver._answered_with(received.webhook_id, answered)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        return Handler
