"""One-time, expiring, signed decision links for mails, and their use.

A link's token is `django.core.signing.dumps` of the breakpoint, the user it was mailed
to, a random nonce and the verdict of the button followed, under its own salt: it can be
neither forged nor altered without SECRET_KEY, and `loads` refuses it after
BPM_EMAIL_LINK_MAX_AGE_SECONDS. Nothing is stored when a mail is sent; a decision stores
the nonce (DecisionLinkUse, unique) in its own transaction, so each link decides once
(channels.email.views). No service is imported here: the senders load with
the outbox, which the services import.
The two links of one mail share their nonce: using either spends both.
"""

import secrets
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core import signing
from django.urls import reverse

from channels.models import DecisionLinkUse

# Fixed: links already mailed carry it (it predates the move to channels.email).
SALT = "breakpoints.channels.email.decide"
APPROVE, REJECT = "approve", "reject"
VERDICTS = (APPROVE, REJECT)


class LinkInvalid(Exception):
    """The token is not one we signed (tampered, truncated, another key or salt)."""


class LinkExpired(Exception):
    """An authentic token, past its age: `link` says which breakpoint and user."""

    def __init__(self, link: "Link"):
        super().__init__("This link has expired.")
        self.link = link


@dataclass(frozen=True)
class Link:
    breakpoint_id: str
    user_id: int
    nonce: str
    verdict: str

    def as_token(self) -> str:
        data = {"b": self.breakpoint_id, "u": self.user_id, "n": self.nonce, "v": self.verdict}
        return signing.dumps(data, salt=SALT)


def new_nonce() -> str:
    return secrets.token_urlsafe(16)


def decision_url(link: Link) -> str:
    """The absolute /decide/<token> address of a link (BPM_PUBLIC_URL)."""
    path = reverse("email-decide", kwargs={"token": link.as_token()})
    return settings.BPM_PUBLIC_URL.rstrip("/") + path


def decision_urls(breakpoint_id: str, user_id: int) -> dict[str, str]:
    """The Approve and Reject links of one mail to one user (one nonce for both)."""
    nonce = new_nonce()
    return {
        verdict: decision_url(Link(breakpoint_id, user_id, nonce, verdict)) for verdict in VERDICTS
    }


def _link_of(data: Any) -> Link:
    """The signed data as a Link; signed by us, so a wrong shape means an older format."""
    if not isinstance(data, dict):
        raise LinkInvalid("unexpected token content")
    bp, user, nonce, verdict = data.get("b"), data.get("u"), data.get("n"), data.get("v")
    if not (
        isinstance(bp, str)
        and isinstance(user, int)
        and isinstance(nonce, str)
        and verdict in VERDICTS
    ):
        raise LinkInvalid("unexpected token content")
    return Link(bp, user, nonce, verdict)


def link_read(token: str) -> Link:
    """The link a token carries; raises LinkInvalid, or LinkExpired (authentic, too old)."""
    max_age = settings.BPM_EMAIL_LINK_MAX_AGE_SECONDS
    try:
        return _link_of(signing.loads(token, salt=SALT, max_age=max_age))
    except signing.SignatureExpired:
        # The signature held (only its age failed): the content can be trusted.
        raise LinkExpired(_link_of(signing.loads(token, salt=SALT))) from None
    except (signing.BadSignature, ValueError, UnicodeError) as exc:
        raise LinkInvalid(type(exc).__name__) from None


def link_use(link: Link) -> DecisionLinkUse | None:
    """How this link was used, if it was."""
    return DecisionLinkUse.objects.filter(nonce=link.nonce).first()


def link_user(link: Link) -> Any | None:
    """The active user the link was mailed to (None once deleted or deactivated)."""
    return get_user_model().objects.filter(pk=link.user_id, is_active=True).first()
