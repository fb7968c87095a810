"""Who sent this? Each source kind's signature, checked on the raw body before parsing.

- standard-webhooks: `webhook-id`, `webhook-timestamp`, `webhook-signature` (the
  standardwebhooks package; a timestamp more than 5 minutes off is refused);
- github: `X-Hub-Signature-256: sha256=<hex HMAC of the body>`, `X-GitHub-Delivery`,
  `X-GitHub-Event` (GitHub signs no timestamp; the delivery id makes replays harmless);
- gitlab: `X-Gitlab-Token` (the secret itself), `X-Gitlab-Event-UUID`, `X-Gitlab-Event`;
- generic-hmac: `X-Bpm-Signature: sha256=<hex HMAC of "<timestamp>.<body>">`,
  `X-Bpm-Timestamp` (unix seconds, 5 minutes either way), `X-Bpm-Event-Id`,
  `X-Bpm-Event-Type` (what `bpm events send` sends: bpm_client.events.sending signs it).
"""

import hashlib
import hmac
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass

from standardwebhooks.webhooks import Webhook as StandardWebhook
from standardwebhooks.webhooks import WebhookVerificationError

from core.exceptions import InvalidInput, NotAuthenticated
from core.limits import EVENT_TOLERANCE_SECONDS, MAX_DELIVERY_ID_LENGTH, MAX_EVENT_TYPE_LENGTH
from core.storable import text_problem
from triggers.models import STANDARD_WEBHOOKS_PREFIX, EventSource, SourceKind

UNIX_SECONDS = re.compile(r"[0-9]{1,12}")


@dataclass(frozen=True)
class Verified:
    """What the signature vouches for: the sender's delivery id and, if it says, the type."""

    delivery_id: str
    event_type: str | None
    headers: dict[str, str]  # the ones worth keeping with the event


def verify(source: EventSource, body: bytes, headers: Mapping[str, str]) -> Verified:
    """Verify a delivery's signature for its source's kind; NotAuthenticated if it fails.

    `headers` must be case-insensitive (Django's request.headers is).
    """
    verifier = {
        SourceKind.STANDARD_WEBHOOKS: _standard_webhooks,
        SourceKind.GITHUB: _github,
        SourceKind.GITLAB: _gitlab,
        SourceKind.GENERIC_HMAC: _generic_hmac,
    }[SourceKind(source.kind)]
    return verifier(source.secret, body, headers)


def sign_generic(secret: str, body: bytes, timestamp: int) -> str:
    """The X-Bpm-Signature of a generic-hmac delivery (what `bpm events send` sends)."""
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return "sha256=" + digest.hexdigest()


def sign_github(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def _same(sent: str, expected: str) -> bool:
    """Constant-time comparison that any header (even non-ASCII) can go through."""
    return hmac.compare_digest(
        sent.encode("utf-8", "surrogateescape"), expected.encode("utf-8", "surrogateescape")
    )


def _refused(why: str) -> NotAuthenticated:
    return NotAuthenticated(f"The event's signature was refused: {why}.")


def _required(headers: Mapping[str, str], name: str, limit: int = MAX_DELIVERY_ID_LENGTH) -> str:
    value = (headers.get(name) or "").strip()
    if not value:
        raise InvalidInput(f"The {name} header is required.", {name: ["Required."]})
    if len(value) > limit:
        raise InvalidInput(f"The {name} header is too long.", {name: [f"At most {limit}."]})
    if problem := text_problem(value):
        raise InvalidInput(f"The {name} header cannot be stored.", {name: [problem]})
    return value


def _optional_type(headers: Mapping[str, str], name: str) -> str | None:
    value = (headers.get(name) or "").strip()
    return _required(headers, name, MAX_EVENT_TYPE_LENGTH) if value else None


def _standard_webhooks(secret: str, body: bytes, headers: Mapping[str, str]) -> Verified:
    wanted = ("webhook-id", "webhook-timestamp", "webhook-signature")
    sent = {name: headers.get(name, "") for name in wanted}
    try:
        # The spec's whsec_ form is decoded by the package; older secrets are their UTF-8 bytes.
        prefixed = secret.startswith(STANDARD_WEBHOOKS_PREFIX)
        signer = StandardWebhook(secret if prefixed else secret.encode())
    except ValueError:
        raise _refused("the source's secret is not usable") from None
    try:
        text = body.decode("utf-8")  # the package signs text: other bytes it cannot verify
    except UnicodeDecodeError:
        raise InvalidInput("The body must be UTF-8 JSON.", {"body": ["Not UTF-8."]}) from None
    try:
        signer.verify(text, sent, json_parse=False)  # the body is parsed (and refused) later
    except WebhookVerificationError as exc:
        raise _refused(str(exc).lower().rstrip(".")) from None
    except (ValueError, TypeError, UnicodeError):  # the package's own parse of the headers
        raise _refused("webhook-signature is malformed") from None
    return Verified(_required(headers, "webhook-id"), None, {"webhook-id": sent["webhook-id"]})


def _github(secret: str, body: bytes, headers: Mapping[str, str]) -> Verified:
    if not _same(headers.get("X-Hub-Signature-256", ""), sign_github(secret, body)):
        raise _refused("X-Hub-Signature-256 does not match")
    delivery = _required(headers, "X-GitHub-Delivery")
    event_type = _required(headers, "X-GitHub-Event", MAX_EVENT_TYPE_LENGTH)
    return Verified(delivery, event_type, {"X-GitHub-Delivery": delivery})


def _gitlab(secret: str, body: bytes, headers: Mapping[str, str]) -> Verified:
    if not _same(headers.get("X-Gitlab-Token", ""), secret):
        raise _refused("X-Gitlab-Token does not match")
    delivery = _required(headers, "X-Gitlab-Event-UUID")
    event_type = _required(headers, "X-Gitlab-Event", MAX_EVENT_TYPE_LENGTH)
    return Verified(delivery, event_type, {"X-Gitlab-Event-UUID": delivery})


def _generic_hmac(secret: str, body: bytes, headers: Mapping[str, str]) -> Verified:
    raw_timestamp = headers.get("X-Bpm-Timestamp", "").strip()
    if not UNIX_SECONDS.fullmatch(raw_timestamp):  # not str.isdigit(): "²" is a digit too
        raise _refused("X-Bpm-Timestamp must be unix seconds")
    timestamp = int(raw_timestamp)
    if abs(time.time() - timestamp) > EVENT_TOLERANCE_SECONDS:
        raise _refused("the timestamp is more than 5 minutes off")
    expected = sign_generic(secret, body, timestamp)
    if not _same(headers.get("X-Bpm-Signature", ""), expected):
        raise _refused("X-Bpm-Signature does not match")
    delivery = _required(headers, "X-Bpm-Event-Id")
    return Verified(
        delivery, _optional_type(headers, "X-Bpm-Event-Type"), {"X-Bpm-Event-Id": delivery}
    )
