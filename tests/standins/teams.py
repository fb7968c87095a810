"""A stand-in for the Bot Framework and Teams on 127.0.0.1: what the bot calls, and the
button presses Teams sends it.

- Its own OpenID metadata and keys: an RSA key made here (cryptography), published with
  its kid and the `msteams` endorsement at the metadata's jwks_uri.
- The Entra token endpoint: client credentials of the one app it knows give a bot token.
- The connector: activities posted to a conversation (or in reply to one) are kept and
  answered with an id, a PUT replaces one; a conversation's members are looked up.
- Presses: `press` signs an `adaptiveCard/action` invoke of a card it holds as the Bot
  Framework would (RS256, issuer https://api.botframework.com, audience the app id, the
  serviceurl claim) and posts it to the bot's messaging endpoint; `forged=` signs it
  wrong instead (another key, expired, another audience, another serviceurl).
Faults on demand: the next connector calls answer `fail_next`'s status. Never talks to
Microsoft.
"""

import itertools
import json
import threading
import time
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import httpx
import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

ISSUER = "https://api.botframework.com"
FORGERIES = ("other-key", "expired", "audience", "serviceurl", "no-serviceurl", "issuer", "none")


@dataclass(frozen=True)
class Member:
    """A Teams user as the roster shows them."""

    user_id: str  # 29:...
    email: str
    object_id: str = ""

    def roster(self) -> dict[str, Any]:
        return {
            "id": self.user_id,
            "name": self.email.split("@")[0] or self.user_id,
            "aadObjectId": self.object_id,
            "email": self.email,
            "userPrincipalName": self.email,
        }


def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


class TeamsStandIn:
    """A threaded HTTP server speaking the Bot Framework's side; see the module docstring."""

    def __init__(
        self,
        *,
        app_id: str,
        app_password: str,
        tenant: str = "tenant-standin",
        members: list[Member] | None = None,
        messaging_url: str = "",
    ):
        self.app_id, self.app_password, self.tenant = app_id, app_password, tenant
        self.members = {member.user_id: member for member in members or []}
        self.messaging_url = messaging_url
        self.kid = f"standin-{uuid.uuid4().hex[:8]}"
        self.key = rsa_key()
        self.rogue_key = rsa_key()  # published nowhere: what a forger signs with
        self.activities: dict[tuple[str, str], dict[str, Any]] = {}  # (conversation, id)
        self.calls: list[tuple[str, str, int]] = []  # (method, path, status)
        self.tokens_issued: list[str] = []
        self._faults: list[int] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._port = 0
        self._server: ThreadingHTTPServer | None = None

    # --- lifecycle ------------------------------------------------------------------

    def start(self) -> "TeamsStandIn":
        server = ThreadingHTTPServer(("127.0.0.1", self._port), _handler(self))
        server.daemon_threads = True
        self._port = server.server_address[1]
        self._server = server
        threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    @property
    def service_url(self) -> str:
        """TEAMS_SERVICE_URL, and the serviceUrl of the activities it sends."""
        return f"{self.url}/teams/"

    def settings(self) -> dict[str, str]:
        """The app's settings (environment variables) that point it here."""
        return {
            "TEAMS_APP_ID": self.app_id,
            "TEAMS_APP_PASSWORD": self.app_password,
            "TEAMS_TENANT_ID": self.tenant,
            "TEAMS_OPENID_METADATA_URL": f"{self.url}/v1/.well-known/openidconfiguration",
            "TEAMS_TOKEN_URL": f"{self.url}/{{tenant}}/oauth2/v2.0/token",
            "TEAMS_SERVICE_URL": self.service_url,
        }

    def fail_next(self, count: int = 1, status: int = 500) -> None:
        with self._lock:
            self._faults.extend([status] * count)

    def posted(self, conversation: str | None = None) -> list[tuple[str, dict[str, Any]]]:
        """(activity id, activity) of the activities posted, oldest first."""
        with self._lock:
            return [
                (activity_id, dict(activity))
                for (conv, activity_id), activity in self.activities.items()
                if conversation is None or conv == conversation
            ]

    def card(self, conversation: str, activity_id: str) -> dict[str, Any]:
        """The Adaptive Card an activity shows now."""
        with self._lock:
            return self.activities[(conversation, activity_id)]["attachments"][0]["content"]

    # --- the Bot Framework's side of a press ---------------------------------------------

    def token(
        self, *, forged: str = "", service_url: str | None = None, kid: str | None = None
    ) -> str:
        """A Bot Framework token for the bot (`forged`: one of FORGERIES, signed wrong)."""
        now = int(time.time())
        claims = {
            "iss": "https://sts.example.test/" if forged == "issuer" else ISSUER,
            "aud": "someone-elses-bot" if forged == "audience" else self.app_id,
            "serviceurl": "https://evil.example.test/"
            if forged == "serviceurl"
            else service_url or self.service_url,
            "nbf": now - 60,
            "iat": now - 60,
            "exp": now - 3600 if forged == "expired" else now + 3600,
        }
        if forged == "no-serviceurl":
            del claims["serviceurl"]
        headers = {"kid": kid or self.kid}
        if forged == "none":
            return jwt.encode(claims, None, algorithm="none", headers=headers)
        key = self.rogue_key if forged == "other-key" else self.key
        return jwt.encode(claims, key, algorithm="RS256", headers=headers)

    def invoke(
        self,
        conversation: str,
        activity_id: str,
        user_id: str,
        verb: str,
        *,
        comment: str = "",
        option: str | None = None,
    ) -> dict[str, Any]:
        """The invoke activity of a press on the card of an activity it holds: the data of
        the pressed Action.Execute, with the card's inputs merged in as Teams does."""
        card = self.card(conversation, activity_id)
        (action,) = [a for a in card.get("actions", []) if a.get("verb") == verb]
        data: dict[str, Any] = {**action["data"], "comment": comment}
        if option is not None:
            data["option"] = option
        member = self.members.get(user_id)
        return {
            "type": "invoke",
            "name": "adaptiveCard/action",
            "id": f"invoke-{next(self._ids)}",
            "channelId": "msteams",
            "serviceUrl": self.service_url,
            "from": {
                "id": user_id,
                "name": user_id,
                "aadObjectId": member.object_id if member else str(uuid.uuid4()),
            },
            "conversation": {"id": conversation, "tenantId": self.tenant},
            "recipient": {"id": f"28:{self.app_id}", "name": "Breakpoint Manager"},
            "replyToId": activity_id,
            "channelData": {"tenant": {"id": self.tenant}},
            "value": {"action": {"type": "Action.Execute", "verb": verb, "data": data}},
        }

    def post(self, activity: dict[str, Any], *, forged: str = "", token: str | None = None):
        """POST an activity to the bot's messaging endpoint, signed (or `forged`)."""
        bearer = token if token is not None else self.token(forged=forged)
        return httpx.post(
            self.messaging_url,
            content=json.dumps(activity).encode(),
            headers={"Authorization": f"Bearer {bearer}", "Content-Type": "application/json"},
            timeout=15,
        )

    def press(
        self, conversation: str, activity_id: str, user_id: str, verb: str, **kwargs: Any
    ) -> httpx.Response:
        """A user presses a button of a card (comment=, option=, forged=)."""
        forged = kwargs.pop("forged", "")
        activity = self.invoke(conversation, activity_id, user_id, verb, **kwargs)
        return self.post(activity, forged=forged)

    # --- answers ------------------------------------------------------------------------

    def metadata(self) -> dict[str, Any]:
        return {
            "issuer": ISSUER,
            "authorization_endpoint": f"{self.url}/authorize",
            "jwks_uri": f"{self.url}/v1/.well-known/keys",
            "id_token_signing_alg_values_supported": ["RS256"],
            "token_endpoint_auth_methods_supported": ["private_key_jwt"],
        }

    def jwks(self) -> dict[str, Any]:
        public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        return {"keys": [{**public, "kid": self.kid, "use": "sig", "endorsements": ["msteams"]}]}

    def token_answer(self, path: str, form: dict[str, str]) -> tuple[int, dict[str, Any]]:
        wanted = f"/{self.tenant}/oauth2/v2.0/token"
        known = (form.get("client_id"), form.get("client_secret")) == (
            self.app_id,
            self.app_password,
        )
        if path != wanted or not known or form.get("grant_type") != "client_credentials":
            return 401, {"error": "invalid_client"}
        if form.get("scope") != "https://api.botframework.com/.default":
            return 400, {"error": "invalid_scope"}
        token = f"standin-bot-token-{next(self._ids)}"
        with self._lock:
            self.tokens_issued.append(token)
        return 200, {"token_type": "Bearer", "expires_in": 3599, "access_token": token}

    def connector(
        self, method: str, parts: list[str], auth: str, body: dict[str, Any]
    ) -> tuple[int, dict[str, Any]]:
        """parts: the path after /teams/v3/conversations/, decoded."""
        with self._lock:
            if self._faults:
                return self._faults.pop(0), {"error": {"code": "ServiceError"}}
            if auth.removeprefix("Bearer ") not in self.tokens_issued:
                return 401, {"message": "Authorization has been denied for this request."}
            return self._conversation_call(method, parts, body)

    def _conversation_call(
        self, method: str, parts: list[str], body: dict[str, Any]
    ) -> tuple[int, dict[str, Any]]:
        if len(parts) == 3 and parts[1] == "members" and method == "GET":
            member = self.members.get(parts[2])
            return (200, member.roster()) if member else (404, {"error": {"code": "NotFound"}})
        if len(parts) >= 2 and parts[1] == "activities" and method == "POST":
            activity_id = f"1{next(self._ids):012d}"
            replying = parts[2] if len(parts) == 3 else None
            self.activities[(parts[0], activity_id)] = {**body, "replyToId": replying}
            return 201, {"id": activity_id}
        if len(parts) == 3 and parts[1] == "activities" and method == "PUT":
            if (parts[0], parts[2]) not in self.activities:
                return 404, {"error": {"code": "ActivityNotFoundInConversation"}}
            self.activities[(parts[0], parts[2])] = {**body, "updated": True}
            return 200, {"id": parts[2]}
        return 404, {"error": {"code": "BadSyntax"}}


def _handler(standin: TeamsStandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _body(self) -> bytes:
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length) if length else b""

        def _route(self, method: str) -> None:
            path = urlsplit(self.path).path
            raw = self._body()
            if path == "/v1/.well-known/openidconfiguration" and method == "GET":
                status, body = 200, standin.metadata()
            elif path == "/v1/.well-known/keys" and method == "GET":
                status, body = 200, standin.jwks()
            elif path.endswith("/oauth2/v2.0/token") and method == "POST":
                status, body = standin.token_answer(path, dict(parse_qsl(raw.decode())))
            elif path.startswith("/teams/v3/conversations/"):
                parts = [
                    unquote(p) for p in path.removeprefix("/teams/v3/conversations/").split("/")
                ]
                payload = json.loads(raw) if raw else {}
                status, body = standin.connector(
                    method, parts, self.headers.get("Authorization", ""), payload
                )
            else:
                status, body = 404, {"error": "not_found"}
            with standin._lock:
                standin.calls.append((method, path, status))
            data = json.dumps(body).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:
                pass

        def do_GET(self) -> None:  # noqa: N802
            self._route("GET")

        def do_POST(self) -> None:  # noqa: N802
            self._route("POST")

        def do_PUT(self) -> None:  # noqa: N802
            self._route("PUT")

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

    return Handler
