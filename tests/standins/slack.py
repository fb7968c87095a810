"""A stand-in for Slack on 127.0.0.1: enough of its Web API for slack-sdk, and its clicks.

The real `slack_sdk.WebClient` is pointed at it (SLACK_API_URL = `standin.url`): every
call crosses a socket, is recorded, and is answered as Slack would (`{"ok": ...}`), with
faults on demand: the next calls answer 500, or 429 with Retry-After, or the server is
stopped and started again on the same port. Like Slack, it also posts signed interaction
payloads back to the app: `click` a button of a message it holds, `submit` a modal it
opened. Never talks to the real Slack.

Demo: `python -m tests.standins.slack --port 8091 --signing-secret S --user U1:alice@example.com
--interactions-url http://127.0.0.1:8000/integrations/slack/interactions` prints each call;
`POST /_click?ts=<ts>&action=bpm_approve&user=U1`, `POST /_submit?view=<id>&user=U1&text=why`
and `GET /_messages` drive and show it.
"""

import argparse
import hashlib
import hmac
import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import httpx

TEAM = {"id": "T0STANDIN", "domain": "standin"}


def signed_interaction(
    payload: dict[str, Any], signing_secret: str, timestamp: int | None = None
) -> tuple[bytes, dict[str, str]]:
    """The form body and headers Slack sends for an interaction (v0 signature, by hand)."""
    body = urlencode({"payload": json.dumps(payload)}).encode()
    stamp = str(int(time.time()) if timestamp is None else timestamp)
    base = b"v0:" + stamp.encode() + b":" + body
    digest = hmac.new(signing_secret.encode(), base, hashlib.sha256).hexdigest()
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": stamp,
        "X-Slack-Signature": f"v0={digest}",
    }
    return body, headers


def post_interaction(
    url: str, payload: dict[str, Any], signing_secret: str, timestamp: int | None = None
) -> httpx.Response:
    """POST a signed interaction to the app, as Slack does (3 s, Slack's own patience)."""
    body, headers = signed_interaction(payload, signing_secret, timestamp)
    return httpx.post(url, content=body, headers=headers, timeout=3.0)


@dataclass(frozen=True)
class Call:
    """One Web API call as it arrived, and the HTTP status it was answered with."""

    method: str
    params: dict[str, Any]
    status: int
    ok: bool
    at: float = field(default_factory=time.monotonic)


class SlackStandIn:
    """A threaded HTTP server speaking Slack's Web API; see the module docstring."""

    def __init__(
        self,
        *,
        token: str = "xoxb-standin-token",
        signing_secret: str = "",
        users: dict[str, str] | None = None,
        interactions_url: str = "",
        port: int = 0,
        echo: bool = False,
    ):
        self.token = token
        self.signing_secret = signing_secret
        self.users = dict(users or {})  # Slack user id -> email
        self.interactions_url = interactions_url
        self.missing_channels: set[str] = set()
        self.echo = echo
        self._port = port
        self._lock = threading.Lock()
        self._calls: list[Call] = []
        self._faults: list[tuple[int, float | None]] = []  # (status, Retry-After)
        self._delays: list[float] = []
        self.messages: dict[tuple[str, str], dict[str, Any]] = {}
        self.views: dict[str, dict[str, Any]] = {}
        self.ephemerals: list[dict[str, Any]] = []
        self._ids = itertools.count(1)
        self._server: ThreadingHTTPServer | None = None

    # --- lifecycle ------------------------------------------------------------------

    def start(self) -> "SlackStandIn":
        """Serve (again) on the same port; the state and records are kept."""
        server = ThreadingHTTPServer(("127.0.0.1", self._port), _handler(self))
        server.daemon_threads = True
        self._port = server.server_address[1]
        self._server = server
        threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        return self

    def stop(self) -> None:
        """Stop answering: connections are refused until start()."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def url(self) -> str:
        """SLACK_API_URL for slack-sdk (its base_url)."""
        return f"http://127.0.0.1:{self._port}/api/"

    # --- faults and records ---------------------------------------------------------

    def fail_next(self, count: int = 1, status: int = 500) -> None:
        with self._lock:
            self._faults.extend([(status, None)] * count)

    def rate_limit_next(self, count: int = 1, retry_after: float = 30) -> None:
        with self._lock:
            self._faults.extend([(429, retry_after)] * count)

    def delay_next(self, count: int = 1, seconds: float = 5.0) -> None:
        """The next calls answer normally, but only after `seconds` (a slow Slack)."""
        with self._lock:
            self._delays.extend([seconds] * count)

    def calls(self, method: str | None = None) -> list[Call]:
        with self._lock:
            return [c for c in self._calls if method is None or c.method == method]

    def succeeded(self, method: str) -> list[dict[str, Any]]:
        """The params of the calls of `method` that were answered ok."""
        return [call.params for call in self.calls(method) if call.ok]

    def message(self, channel: str, ts: str) -> dict[str, Any]:
        with self._lock:
            return dict(self.messages[(channel, ts)])

    # --- Slack's side of an interaction ---------------------------------------------

    def click_payload(self, channel: str, ts: str, action_id: str, user_id: str) -> dict:
        """The block_actions payload of a click on the button `action_id` of a message."""
        message = self.message(channel, ts)
        button = _button(message.get("blocks") or [], action_id)
        return {
            "type": "block_actions",
            "team": TEAM,
            "user": {"id": user_id, "username": user_id.lower(), "team_id": TEAM["id"]},
            "api_app_id": "A0STANDIN",
            "trigger_id": f"trigger-{next(self._ids)}",
            "container": {"type": "message", "message_ts": ts, "channel_id": channel},
            "channel": {"id": channel, "name": "standin"},
            "message": {"ts": ts, **message},
            "response_url": f"http://127.0.0.1:{self._port}/_response",
            "actions": [{**button, "action_ts": f"{time.time():.6f}"}],
        }

    def submit_payload(self, view_id: str, user_id: str, text: str | None) -> dict:
        """The view_submission payload of an opened modal, `text` in its (first) input."""
        view = self.views[view_id]["view"]
        values: dict[str, Any] = {}
        for block in view.get("blocks", []):
            if block.get("type") == "input" and not values:
                element = block["element"]
                values[block["block_id"]] = {
                    element["action_id"]: {"type": element["type"], "value": text}
                }
        return {
            "type": "view_submission",
            "team": TEAM,
            "user": {"id": user_id, "username": user_id.lower(), "team_id": TEAM["id"]},
            "api_app_id": "A0STANDIN",
            "trigger_id": f"trigger-{next(self._ids)}",
            "view": {**view, "id": view_id, "state": {"values": values}},
        }

    def click(
        self, channel: str, ts: str, action_id: str, user_id: str, **signing: Any
    ) -> httpx.Response:
        """A user clicks a button: the signed payload goes to interactions_url."""
        return self.interact(self.click_payload(channel, ts, action_id, user_id), **signing)

    def submit(
        self, view_id: str, user_id: str, text: str | None, **signing: Any
    ) -> httpx.Response:
        """A user submits an opened modal: the signed payload goes to interactions_url."""
        return self.interact(self.submit_payload(view_id, user_id, text), **signing)

    def interact(self, payload: dict[str, Any], **signing: Any) -> httpx.Response:
        """POST a signed payload to the app (signing: secret=..., timestamp=...)."""
        secret = signing.get("secret", self.signing_secret)
        return post_interaction(self.interactions_url, payload, secret, signing.get("timestamp"))

    # --- the Web API ------------------------------------------------------------------

    def answer(self, method: str, params: dict[str, Any], auth: str) -> tuple[int, dict, dict]:
        """(status, headers, body) for one call; records it."""
        with self._lock:
            fault = self._faults.pop(0) if self._faults else None
            delay = self._delays.pop(0) if self._delays else 0.0
        time.sleep(delay)
        if fault is not None:
            status, retry_after = fault
            headers = {"Retry-After": str(int(retry_after))} if retry_after is not None else {}
            body = {"ok": False, "error": "ratelimited" if status == 429 else "internal_error"}
        elif auth != f"Bearer {self.token}":
            status, headers, body = 200, {}, {"ok": False, "error": "invalid_auth"}
        else:
            status, headers = 200, {}
            with self._lock:
                body = self._method(method, params)
        with self._lock:
            self._calls.append(Call(method, params, status, bool(body.get("ok"))))
        if self.echo:
            print(
                f"{status} {method} {json.dumps(params)[:400]} -> {json.dumps(body)[:200]}",
                flush=True,
            )
        return status, headers, body

    def _method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        handlers = {
            "chat.postMessage": self._post_message,
            "chat.update": self._update,
            "chat.postEphemeral": self._ephemeral,
            "views.open": self._view_open,
            "users.info": self._user_info,
            "users.lookupByEmail": self._lookup_by_email,
        }
        handler = handlers.get(method)
        return handler(params) if handler else {"ok": False, "error": "unknown_method"}

    def _post_message(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = str(params.get("channel") or "")
        if channel.startswith("U") and channel in self.users:
            channel = "D" + channel[1:]  # the bot's DM with that user
        elif not channel or channel in self.missing_channels:
            return {"ok": False, "error": "channel_not_found"}
        ts = f"{int(time.time())}.{next(self._ids):06d}"
        message = {key: params.get(key) for key in ("text", "blocks", "thread_ts")}
        self.messages[(channel, ts)] = message
        return {"ok": True, "channel": channel, "ts": ts, "message": {"ts": ts, **message}}

    def _update(self, params: dict[str, Any]) -> dict[str, Any]:
        key = (str(params.get("channel")), str(params.get("ts")))
        if key not in self.messages:
            return {"ok": False, "error": "message_not_found"}
        self.messages[key].update(text=params.get("text"), blocks=params.get("blocks"))
        return {"ok": True, "channel": key[0], "ts": key[1], "text": params.get("text")}

    def _ephemeral(self, params: dict[str, Any]) -> dict[str, Any]:
        self.ephemerals.append(params)
        return {"ok": True, "message_ts": f"{int(time.time())}.{next(self._ids):06d}"}

    def _view_open(self, params: dict[str, Any]) -> dict[str, Any]:
        view = params.get("view")
        view = json.loads(view) if isinstance(view, str) else view
        if not params.get("trigger_id") or not isinstance(view, dict):
            return {"ok": False, "error": "invalid_arguments"}
        view_id = f"V{next(self._ids):08d}"
        self.views[view_id] = {"view": view, "trigger_id": params["trigger_id"]}
        return {"ok": True, "view": {"id": view_id, **view}}

    def _user(self, user_id: str) -> dict[str, Any]:
        email = self.users[user_id]
        profile = {"email": email} if email else {}
        return {"id": user_id, "name": user_id.lower(), "deleted": False, "profile": profile}

    def _user_info(self, params: dict[str, Any]) -> dict[str, Any]:
        user_id = str(params.get("user"))
        if user_id not in self.users:
            return {"ok": False, "error": "user_not_found"}
        return {"ok": True, "user": self._user(user_id)}

    def _lookup_by_email(self, params: dict[str, Any]) -> dict[str, Any]:
        wanted = str(params.get("email", "")).lower()
        for user_id, email in self.users.items():
            if email and email.lower() == wanted:
                return {"ok": True, "user": self._user(user_id)}
        return {"ok": False, "error": "users_not_found"}


def _button(blocks: list[dict[str, Any]], action_id: str) -> dict[str, Any]:
    for block in blocks:
        for element in block.get("elements", []) if block.get("type") == "actions" else []:
            if element.get("action_id") == action_id:
                return {**element, "block_id": block.get("block_id", "")}
    raise KeyError(f"no button {action_id!r} in the message")


def _params(handler: BaseHTTPRequestHandler, body: bytes) -> dict[str, Any]:
    """Query string, then a form or JSON body, as slack-sdk sends them."""
    params: dict[str, Any] = dict(parse_qsl(urlsplit(handler.path).query))
    kind = handler.headers.get("content-type", "")
    if kind.startswith("application/json") and body:
        params.update(json.loads(body))
    elif body:
        params.update(parse_qsl(body.decode()))
    return params


def _handler(standin: SlackStandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            path = urlsplit(self.path).path
            params = _params(self, body)
            if path.startswith("/api/"):
                auth = self.headers.get("authorization", "")
                self._reply(*standin.answer(path.removeprefix("/api/"), params, auth))
            elif path in ("/_click", "/_submit"):
                self._reply(*_control(standin, path, params))
            else:
                self._reply(404, {}, {"ok": False, "error": "not_found"})

        def do_GET(self) -> None:  # noqa: N802
            if urlsplit(self.path).path == "/_messages":
                with standin._lock:
                    listed = [
                        {"channel": c, "ts": t, **m} for (c, t), m in standin.messages.items()
                    ]
                self._reply(200, {}, {"ok": True, "messages": listed, "views": list(standin.views)})
            else:
                self._reply(404, {}, {"ok": False, "error": "not_found"})

        def _reply(self, status: int, headers: dict[str, str], body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            try:
                self.send_response(status)
                for name, value in {**headers, "Content-Type": "application/json"}.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:
                pass  # the client gave up (a timeout) before the answer

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

    return Handler


def _control(standin: SlackStandIn, path: str, params: dict[str, Any]) -> tuple[int, dict, dict]:
    """The demo's buttons: click a message's button, submit a modal; the app's answer."""
    try:
        if path == "/_click":
            channel = params.get("channel") or next(
                c for c, t in standin.messages if t == params["ts"]
            )
            response = standin.click(channel, params["ts"], params["action"], params["user"])
        else:
            response = standin.submit(params["view"], params["user"], params.get("text"))
    except (KeyError, StopIteration, httpx.HTTPError) as exc:
        return 400, {}, {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    return 200, {}, {"ok": True, "appStatus": response.status_code, "appBody": response.text}


def main() -> None:
    parser = argparse.ArgumentParser(description="A Slack Web API stand-in on 127.0.0.1.")
    parser.add_argument("--port", type=int, default=8091)
    parser.add_argument("--token", default="xoxb-standin-token", help="the bot token to accept")
    parser.add_argument("--signing-secret", default="", help="signs interactions posted back")
    parser.add_argument("--interactions-url", default="")
    parser.add_argument(
        "--user", action="append", default=[], help="ID:email, e.g. U1:alice@example.com"
    )
    args = parser.parse_args()
    users = dict(item.split(":", 1) for item in args.user)
    standin = SlackStandIn(
        token=args.token,
        signing_secret=args.signing_secret,
        users=users,
        interactions_url=args.interactions_url,
        port=args.port,
        echo=True,
    ).start()
    print(f"Slack stand-in on {standin.url} (Ctrl-C stops it)", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        standin.stop()


if __name__ == "__main__":
    main()
