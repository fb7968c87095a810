"""A real HTTP server on 127.0.0.1 that answers from a script: the SDK, `bpm` and `bpm mcp`
against answers a live system would rarely give (refusals, retries, warnings).

Each server is a stdlib `http.server` in a thread that answers from a script (status, body,
headers) and records every request it received, so the tests count what really went over
the wire. No Django server and no database are needed.
"""

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

NOW = "2026-01-01T00:00:00Z"


def breakpoint_json(**changes: Any) -> dict[str, Any]:
    """A complete representation, as the API answers it (strict decoding accepts it)."""
    body = {
        "breakpointId": "bp_1", "status": "waiting", "agentId": "agent-a", "runId": None,
        "title": None, "key": "ship", "question": "Ship?", "payload": {"question": "Ship?"},
        "tags": [], "ttlSeconds": None, "expiresAt": None, "createdAt": NOW, "updatedAt": NOW,
        "releasedAt": None, "expiredAt": None, "cancelledAt": None, "feedback": [],
        "result": None, "autoApproval": None, "strategy": "single", "experts": [], "votes": [],
        "requestedBy": None, "payloadDigest": None,
        "consoleUrl": "http://127.0.0.1:8000/admin/breakpoints/breakpoint/bp_1/change/",
        "expectedDecision": None,
    }  # fmt: skip
    return {**body, **changes}


def status_json(**changes: Any) -> dict[str, Any]:
    body = {"status": "waiting", "updatedAt": NOW, "result": None, "pollAfterMs": 1000}
    return {**body, "expectedDecision": None, **changes}


def envelope(code: str, message: str = "Nope.", **details: Any) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "details": details}}


@dataclass
class Answer:
    status: int
    body: dict[str, Any] | str
    headers: dict[str, str] | None = None


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    at: float  # time.monotonic() when it arrived


class ScriptedServer:
    """Answers requests in order from `answers` (the last one repeats); records each request."""

    def __init__(self, answers: list[Answer]):
        self.answers = list(answers)
        self.seen: list[Seen] = []
        self._lock = threading.Lock()
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self._http.server_address[1]}"
        self._thread = threading.Thread(
            target=self._http.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def _next(self, seen: Seen) -> Answer:
        with self._lock:
            self.seen.append(seen)
            return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                headers = {k.lower(): v for k, v in self.headers.items()}
                answer = server._next(
                    Seen(self.command, self.path, headers, body, time.monotonic())
                )
                text = answer.body if isinstance(answer.body, str) else json.dumps(answer.body)
                kind = "text/html" if isinstance(answer.body, str) else "application/json"
                data = text.encode()
                self.send_response(answer.status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                for name, value in (answer.headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _answer

            def log_message(self, format: str, *args: Any) -> None:
                pass  # keep the test output clean

        return Handler

    def __enter__(self) -> "ScriptedServer":
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._http.shutdown()
        self._http.server_close()
        self._thread.join(timeout=5)
