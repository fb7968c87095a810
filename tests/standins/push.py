"""A local stand-in for a browser's push service and the browser behind it: it receives
pushes as FCM or Mozilla's autopush would, and reads them as the device would.

A ThreadingHTTPServer on 127.0.0.1 (a free port) takes POST /push/<device>. Each device
is a subscriber of its own: a P-256 key pair and a 16-byte auth secret, made here, whose
public half `subscription(device)` gives as a browser's PushSubscription.toJSON() does.
Each push is checked as a push service does (a VAPID Authorization header whose ES256
token verifies with the key it names, its `aud` this server's origin, `exp` ahead, a
`sub`; a TTL header; Content-Encoding aes128gcm), then decrypted with the device's private
key and auth secret (RFC 8291, http_ece) and recorded (`received`).

Answers: 201, unless `answer_next(device, status, retry_after=...)` queued another (a 410
for a dropped subscription, a 500 for an outage); an unknown device answers 404. Faults a
push service would refuse (a bad VAPID token, a body that does not decrypt) answer 400
or 401/403 and are recorded in `refused`.
"""

import base64
import json
import os
import threading
import time
from collections import defaultdict, deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import http_ece
import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True)
class Push:
    """One push as the device read it."""

    device: str
    notice: dict[str, Any]  # the decrypted JSON
    headers: dict[str, str]
    vapid_claims: dict[str, Any]
    status: int  # what the stand-in answered


@dataclass
class Device:
    private_key: ec.EllipticCurvePrivateKey
    auth_secret: bytes

    @property
    def public_key(self) -> str:
        point = self.private_key.public_key().public_bytes(
            serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
        )
        return b64url(point)


class PushService:
    def __init__(self) -> None:
        self.devices: dict[str, Device] = {}
        self.received: list[Push] = []
        self.refused: list[tuple[str, int, str]] = []  # (device, status, why)
        self._answers: dict[str, deque[tuple[int, str | None]]] = defaultdict(deque)
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        service = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                status, headers = service._receive(self.path, dict(self.headers.items()), body)
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # --- the browser's side ---------------------------------------------------------------

    def subscription(self, device: str) -> dict[str, Any]:
        """A new device's subscription, as PushSubscription.toJSON() gives it."""
        with self._lock:
            self.devices[device] = Device(ec.generate_private_key(ec.SECP256R1()), os.urandom(16))
            keys = {
                "p256dh": self.devices[device].public_key,
                "auth": b64url(self.devices[device].auth_secret),
            }
        return {"endpoint": self.endpoint(device), "expirationTime": None, "keys": keys}

    def endpoint(self, device: str) -> str:
        return f"{self.origin}/push/{device}"

    def answer_next(self, device: str, status: int, *, retry_after: str | None = None) -> None:
        with self._lock:
            self._answers[device].append((status, retry_after))

    def wait_for(self, count: int, timeout: float = 30.0) -> list[Push]:
        """The pushes received once there are `count` (or all there are at the timeout)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while len(self.received) < count and time.monotonic() < deadline:
                self._changed.wait(deadline - time.monotonic())
            return list(self.received)

    # --- the push service's side ----------------------------------------------------------

    def _receive(
        self, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, str]]:
        headers = {name.lower(): value for name, value in headers.items()}
        device_name = path.rsplit("/", 1)[-1]
        with self._lock:
            device = self.devices.get(device_name)
        if device is None:
            return self._refuse(device_name, 404, "no such subscription")
        try:
            claims = self._vapid_claims(headers.get("authorization", ""))
        except (ValueError, jwt.PyJWTError) as exc:
            return self._refuse(device_name, 401, f"VAPID: {exc}")
        if headers.get("content-encoding") != "aes128gcm" or "ttl" not in headers:
            return self._refuse(device_name, 400, "Content-Encoding aes128gcm and TTL required")
        try:
            plain = http_ece.decrypt(
                body,
                private_key=device.private_key,
                auth_secret=device.auth_secret,
                version="aes128gcm",
            )
            notice = json.loads(plain)
        except Exception as exc:  # noqa: BLE001 - any failure to read it is the sender's
            return self._refuse(device_name, 400, f"does not decrypt: {exc!r}")
        with self._changed:
            queued = self._answers[device_name]
            status, retry_after = queued.popleft() if queued else (201, None)
            self.received.append(Push(device_name, notice, headers, claims, status))
            self._changed.notify_all()
        if status in (404, 410):
            with self._lock:
                self.devices.pop(device_name, None)
        return status, ({"Retry-After": retry_after} if retry_after else {})

    def _refuse(self, device: str, status: int, why: str) -> tuple[int, dict[str, str]]:
        with self._changed:
            self.refused.append((device, status, why))
            self._changed.notify_all()
        return status, {}

    def _vapid_claims(self, authorization: str) -> dict[str, Any]:
        scheme, _, params = authorization.partition(" ")
        if scheme.lower() != "vapid":
            raise ValueError(f"scheme {scheme!r}, not vapid")
        fields = dict(part.strip().split("=", 1) for part in params.split(",") if "=" in part)
        point = unb64url(fields["k"])
        key = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), point)
        claims = jwt.decode(fields["t"], key, algorithms=["ES256"], audience=self.origin)
        if not str(claims.get("sub", "")).startswith(("mailto:", "https:")):
            raise ValueError("sub must be a mailto: or https: URL")
        if claims["exp"] > time.time() + 24 * 60 * 60:
            raise ValueError("exp more than 24 hours ahead")
        return claims
