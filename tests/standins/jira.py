"""A local stand-in for JIRA's REST API v2: enough of it for the JIRA channel, never the real thing.

A ThreadingHTTPServer on 127.0.0.1 (a free port unless told) speaks:
- POST /rest/api/2/issue                     create (keys OPS-1, OPS-2, ... per project)
- GET  /rest/api/2/issue/{key}               the issue, with its status and comments, and
                                             with `?expand=changelog` its changelog (the
                                             histories: id, author, items)
- POST /rest/api/2/issue/{key}/comment       add a comment
- GET  /rest/api/2/issue/{key}/transitions   the transitions available from its status
- POST /rest/api/2/issue/{key}/transitions   apply one (optionally with a comment)
- GET  /rest/api/2/search?jql=...            `project = "X"` and `labels = "y"` only
Every request must carry basic auth of a known user (`users`: name -> token), else 401.
The workflow: To Do -> Approve / Reject / Done / Won't Do; Approved and Rejected -> those
and "To Do" (back to To Do); Done and Won't Do -> Reopen. A person's email is their name
when it has an @ (`emails` overrides it; an empty one is hidden, as JIRA Cloud's privacy
settings do).

Everything that arrives is recorded (`calls`); each status change is a history of the
issue's changelog (its author the user who made it) and records the `jira:issue_updated`
webhook JIRA would send (`webhooks`, `changelog.id` the history's id), POSTed to
`webhook_url` when set. Faults: `fail_next(500)`, `fail_next(429, retry_after=120)`, `lose_next_create()`
(the issue is created but the answer is a 502), `stop()` and `start()` on the same port.

    python -m tests.standins.jira --port 8092 [--user bpm-bot:jira-token] [--webhook-url URL]
"""

import argparse
import base64
import binascii
import itertools
import json
import re
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

API = "/rest/api/2"
TRANSITIONS = [
    ("11", "Approve", "Approved"),
    ("21", "Reject", "Rejected"),
    ("31", "Done", "Done"),
    ("41", "Won't Do", "Won't Do"),
]
REOPEN = ("51", "Reopen", "To Do")
BACK = ("61", "To Do", "To Do")  # from Approved or Rejected: the service's refused-decision undo
FINAL = {"Done", "Won't Do"}
DEFAULT_USERS = {"bpm-bot": "jira-test-token"}


@dataclass(frozen=True)
class Call:
    """One request as it arrived: who (basic-auth user, or None), what, and the JSON body."""

    method: str
    path: str
    query: dict[str, list[str]]
    user: str | None
    body: Any
    status: int = 0


@dataclass
class Issue:
    key: str
    id: str
    fields: dict[str, Any]
    status: str = "To Do"
    comments: list[dict[str, Any]] = field(default_factory=list)
    histories: list[dict[str, Any]] = field(default_factory=list)  # the changelog, oldest first


class Answer(Exception):
    """Raised by a route to answer at once: a status and a JSON body (or text)."""

    def __init__(self, status: int, body: Any = None, headers: dict[str, str] | None = None):
        super().__init__(status)
        self.status, self.body, self.headers = status, body, headers or {}


def jira_error(status: int, *messages: str, **errors: str) -> Answer:
    return Answer(status, {"errorMessages": list(messages), "errors": errors})


class JiraStandIn:
    def __init__(
        self,
        *,
        port: int = 0,
        users: dict[str, str] | None = None,
        emails: dict[str, str] | None = None,
        projects: tuple[str, ...] = ("OPS", "SEC"),
        webhook_url: str = "",
        on_request: Callable[[Call], None] | None = None,
    ):
        self.users = dict(users or DEFAULT_USERS)
        self.emails = dict(emails or {})  # name -> email; default: the name when it has an @
        self.projects = set(projects)
        self.webhook_url = webhook_url
        self.on_request = on_request
        self.issues: dict[str, Issue] = {}
        self.webhooks: list[dict[str, Any]] = []
        self._calls: list[Call] = []
        self._faults: list[tuple[int, float | None, str, str]] = []
        self._lose_create = 0
        self._ids = itertools.count(10001)
        self._numbers: dict[str, itertools.count] = {}
        self._lock = threading.RLock()
        self._port = port
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ----------------------------------------------------------------

    def start(self) -> "JiraStandIn":
        """Listen (again, on the same port after stop()); what was recorded is kept."""
        server = ThreadingHTTPServer(("127.0.0.1", self._port), self._handler_class())
        server.daemon_threads = True
        server.block_on_close = False
        self._server, self._port = server, server.server_address[1]
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening: connections are refused until start()."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            if self._thread is not None:
                self._thread.join(timeout=5)
            self._server = None

    close = stop

    def __enter__(self) -> "JiraStandIn":
        return self.start()

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    # --- faults and what arrived --------------------------------------------------

    def fail_next(
        self,
        status: int = 500,
        *,
        times: int = 1,
        retry_after: float | None = None,
        method: str = "",
        path: str = "",
    ) -> None:
        """Answer the next `times` requests (of `method`, whose path after /rest/api/2
        matches the regex `path`, when given) with `status` and Retry-After, doing nothing."""
        with self._lock:
            self._faults.extend([(status, retry_after, method, path)] * times)

    def lose_next_create(self) -> None:
        """Create the next issue but answer 502, as a proxy timing out after JIRA committed."""
        with self._lock:
            self._lose_create += 1

    @property
    def calls(self) -> list[Call]:
        with self._lock:
            return list(self._calls)

    def calls_to(self, method: str, pattern: str) -> list[Call]:
        """The calls of `method` whose path (after /rest/api/2) matches the regex `pattern`."""
        return [
            c
            for c in self.calls
            if c.method == method and re.fullmatch(pattern, c.path.removeprefix(API))
        ]

    def reset_calls(self) -> None:
        with self._lock:
            self._calls.clear()

    # --- the API --------------------------------------------------------------------

    def _route(self, method: str, path: str, query: dict, user: str, body: Any) -> tuple[int, Any]:
        rest = path.removeprefix(API)
        if method == "POST" and rest == "/issue":
            return self._create(body)
        if method == "GET" and rest == "/search":
            return 200, self._search(query.get("jql", [""])[0])
        match = re.fullmatch(r"/issue/([^/]+)(/comment|/transitions)?", rest)
        if not match:
            raise jira_error(404, f"No route for {method} {path} in the stand-in.")
        issue = self._issue(unquote(match.group(1)))
        action = (method, match.group(2) or "")
        if action == ("GET", ""):
            expand = ",".join(query.get("expand", [])).split(",")
            return 200, self._issue_json(issue, changelog="changelog" in expand)
        if action == ("POST", "/comment"):
            return 201, self._comment(issue, user, _text(body, "body"))
        if action == ("GET", "/transitions"):
            return 200, {"transitions": [_transition_json(t) for t in _available(issue.status)]}
        if action == ("POST", "/transitions"):
            self._transition(issue, user, body)
            return 204, None
        raise jira_error(405, f"{method} is not allowed on {rest}.")

    def _create(self, body: Any) -> tuple[int, Any]:
        fields = body.get("fields") if isinstance(body, dict) else None
        if not isinstance(fields, dict):
            raise jira_error(400, "The request body must be an object with fields.")
        project = (fields.get("project") or {}).get("key")
        if project not in self.projects:
            raise jira_error(400, project="valid project is required")
        summary = fields.get("summary")
        if not isinstance(summary, str) or not summary.strip() or "\n" in summary:
            raise jira_error(400, summary="You must specify a summary of the issue.")
        if len(summary) > 255:
            raise jira_error(400, summary="Summary must be less than 255 characters.")
        labels = fields.get("labels") or []
        if any(not isinstance(label, str) or " " in label for label in labels):
            raise jira_error(400, labels="The label must not contain spaces.")
        with self._lock:
            number = next(self._numbers.setdefault(project, itertools.count(1)))
            issue = Issue(key=f"{project}-{number}", id=str(next(self._ids)), fields=fields)
            self.issues[issue.key] = issue
            if self._lose_create:
                self._lose_create -= 1
                raise Answer(502, "Bad Gateway (the stand-in lost the answer)")
        return 201, {"id": issue.id, "key": issue.key, "self": f"{self.url}{API}/issue/{issue.id}"}

    def _issue(self, key: str) -> Issue:
        with self._lock:
            issue = self.issues.get(key)
        if issue is None:
            raise jira_error(404, "Issue does not exist or you do not have permission to see it.")
        return issue

    def _issue_json(self, issue: Issue, *, changelog: bool = False) -> dict[str, Any]:
        with self._lock:
            fields = {**issue.fields, "status": {"name": issue.status}}
            fields["comment"] = {"comments": list(issue.comments), "total": len(issue.comments)}
            answer = {"id": issue.id, "key": issue.key, "fields": fields}
            if changelog:
                histories = list(issue.histories)
                answer["changelog"] = {
                    "startAt": 0,
                    "maxResults": len(histories),
                    "total": len(histories),
                    "histories": histories,
                }
        return answer

    def _comment(self, issue: Issue, user: str, text: str) -> dict[str, Any]:
        with self._lock:
            comment = {"id": str(next(self._ids)), "body": text, "author": self._user_json(user)}
            issue.comments.append(comment)
        return comment

    def _transition(self, issue: Issue, user: str, body: Any) -> None:
        body = body if isinstance(body, dict) else {}
        wanted = str((body.get("transition") or {}).get("id", ""))
        chosen = next((t for t in _available(issue.status) if t[0] == wanted), None)
        if chosen is None:
            raise jira_error(400, f"Transition id '{wanted}' is not valid for this issue.")
        added = (((body.get("update") or {}).get("comment") or [{}])[0]).get("add") or {}
        comment = self._comment(issue, user, added["body"]) if added.get("body") else None
        with self._lock:
            before, issue.status = issue.status, chosen[2]
            issue.histories.append(self._history(user, before, issue.status))
        self._emit(issue_updated(self, issue, user, comment))

    def _history(self, user: str, before: str, after: str) -> dict[str, Any]:
        """A changelog history of a status change, as JIRA records it."""
        return {
            "id": str(next(self._ids)),
            "author": self._user_json(user),
            "created": time.strftime("%Y-%m-%dT%H:%M:%S.000+0000", time.gmtime()),
            "items": [
                {
                    "field": "status",
                    "fieldtype": "jira",
                    "fieldId": "status",
                    "fromString": before,
                    "toString": after,
                }
            ],
        }

    def _search(self, jql: str) -> dict[str, Any]:
        wanted = dict(re.findall(r'(project|labels)\s*=\s*"((?:[^"\\]|\\.)*)"', jql))
        with self._lock:
            found = [
                issue
                for issue in self.issues.values()
                if wanted.get("project", issue.key.split("-")[0]) == issue.key.split("-")[0]
                and ("labels" not in wanted or wanted["labels"] in issue.fields.get("labels", []))
            ]
        return {"issues": [{"id": i.id, "key": i.key} for i in found], "total": len(found)}

    def _user_json(self, name: str) -> dict[str, Any]:
        user: dict[str, Any] = {"name": name, "accountId": f"acct-{name}", "displayName": name}
        email = self.emails[name] if name in self.emails else (name if "@" in name else "")
        if email:
            user["emailAddress"] = email
        return user

    def _emit(self, payload: dict[str, Any]) -> None:
        with self._lock:
            self.webhooks.append(payload)
        if self.webhook_url:
            threading.Thread(
                target=_post_json, args=(self.webhook_url, payload), daemon=True
            ).start()

    # --- HTTP -------------------------------------------------------------------------

    def _authenticated(self, header: str) -> str | None:
        scheme, _, value = header.partition(" ")
        if scheme.lower() != "basic":
            return None
        try:
            name, _, token = base64.b64decode(value, validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return None
        return name if name in self.users and self.users[name] == token else None

    def _handle(self, method: str, raw_path: str, headers: Any, raw: bytes) -> Answer:
        parts = urlsplit(raw_path)
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        user = self._authenticated(headers.get("authorization", ""))
        answer = self._answer(method, parts.path, parse_qs(parts.query), user, body)
        call = Call(method, parts.path, parse_qs(parts.query), user, body, answer.status)
        with self._lock:
            self._calls.append(call)
        if self.on_request is not None:
            self.on_request(call)
        return answer

    def _answer(self, method: str, path: str, query: dict, user: str | None, body: Any) -> Answer:
        fault = self._fault_for(method, path)
        if fault is not None:
            status, retry_after = fault
            headers = {"Retry-After": f"{retry_after:g}"} if retry_after is not None else {}
            return Answer(status, {"errorMessages": [f"Injected fault {status}"]}, headers)
        if user is None:
            return jira_error(401, "You are not authenticated. Authentication required.")
        try:
            status, answer = self._route(method, path, query, user, body)
        except Answer as answered:
            return answered
        return Answer(status, answer)

    def _fault_for(self, method: str, path: str) -> tuple[int, float | None] | None:
        with self._lock:
            for index, (status, retry_after, only_method, pattern) in enumerate(self._faults):
                if only_method and only_method != method:
                    continue
                if pattern and not re.fullmatch(pattern, path.removeprefix(API)):
                    continue
                del self._faults[index]
                return status, retry_after
        return None

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        standin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _serve(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                answer = standin._handle(self.command, self.path, self.headers, raw)
                text = answer.body if isinstance(answer.body, str) else None
                data = b"" if answer.body is None else (text or json.dumps(answer.body)).encode()
                self.send_response(answer.status)
                kind = "text/plain" if text is not None else "application/json"
                self.send_header("content-type", kind)
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = _serve

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        return Handler


def _available(status: str) -> list[tuple[str, str, str]]:
    if status in FINAL:
        return [REOPEN]
    offered = [t for t in TRANSITIONS if t[2] != status]
    return offered if status == "To Do" else [*offered, BACK]


def _transition_json(transition: tuple[str, str, str]) -> dict[str, Any]:
    tid, name, to = transition
    return {"id": tid, "name": name, "to": {"name": to}, "hasScreen": False}


def _text(body: Any, key: str) -> str:
    value = body.get(key) if isinstance(body, dict) else None
    if not isinstance(value, str) or not value.strip():
        raise jira_error(400, **{key: f"{key} is required."})
    return value


def issue_updated(
    standin: JiraStandIn, issue: Issue, user: str, comment: dict | None
) -> dict[str, Any]:
    """The `jira:issue_updated` webhook JIRA Cloud sends for a status change (its shape):
    `changelog` is the issue's newest history."""
    with standin._lock:
        history = issue.histories[-1]
    payload: dict[str, Any] = {
        "timestamp": int(time.time() * 1000),
        "webhookEvent": "jira:issue_updated",
        "issue_event_type_name": "issue_generic",
        "user": standin._user_json(user),
        "issue": {
            "id": issue.id,
            "key": issue.key,
            "self": f"{standin.url}{API}/issue/{issue.id}",
            "fields": {**issue.fields, "status": {"name": issue.status}},
        },
        "changelog": {"id": history["id"], "items": history["items"]},
    }
    if comment is not None:
        payload["comment"] = comment
    return payload


def _post_json(url: str, payload: dict[str, Any]) -> None:
    """Forward a webhook (the demo's): as JIRA does, a JSON POST; failures are printed."""
    request = urllib.request.Request(
        url, data=json.dumps(payload).encode(), headers={"content-type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 - local demo
            print(f"  webhook -> {response.status}", flush=True)
    except OSError as exc:
        print(f"  webhook failed: {exc}", flush=True)


def _print_call(call: Call) -> None:
    body = "" if call.body is None else json.dumps(call.body, indent=2, ensure_ascii=False)
    print(f"{call.method} {call.path} as {call.user or '(nobody)'} -> {call.status}", flush=True)
    if body:
        print(body[:4000], flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description="A local JIRA REST v2 stand-in (127.0.0.1).")
    parser.add_argument("--port", type=int, default=8092)
    parser.add_argument(
        "--user",
        action="append",
        default=[],
        help="NAME:TOKEN for basic auth (repeatable; default bpm-bot:jira-test-token)",
    )
    parser.add_argument("--webhook-url", default="", help="where status changes are POSTed")
    args = parser.parse_args()
    users = dict(u.split(":", 1) for u in args.user) if args.user else None
    standin = JiraStandIn(
        port=args.port, users=users, webhook_url=args.webhook_url, on_request=_print_call
    ).start()
    print(f"JIRA stand-in on {standin.url} (users: {', '.join(standin.users)})", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        standin.stop()


if __name__ == "__main__":
    main()
