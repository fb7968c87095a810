"""Reviewers' devices (channels.models.PushSubscription): which subscriptions a browser may
save, whose they are, and who hears about a breakpoint.

A subscription names a URL the service will POST to (the push service's endpoint), so it
is checked like any address a caller gives: a push service BPM_PUSH_SERVICES lists, https
(http only for a loopback host), no credentials in it, and keys that are a P-256 point and
a 16-byte secret, or encryption would fail at every send.
"""

import base64
import binascii
import ipaddress
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from cryptography.hazmat.primitives.asymmetric import ec
from django.conf import settings
from django.db import transaction
from django.db.models import Q, QuerySet

from channels.models import (
    MAX_DEVICE_LABEL_LENGTH,
    MAX_ENDPOINT_LENGTH,
    MAX_PUSH_KEY_LENGTH,
    PushSubscription,
)
from core.actors import ADMINS_GROUP, REVIEWERS_GROUP, is_reviewer
from core.exceptions import Forbidden, InvalidInput
from core.storable import storable_text

# A reviewer's devices: a phone, a laptop, a few browsers; a bound on rows one person adds.
MAX_DEVICES_PER_USER = 20
AUTH_SECRET_BYTES = 16


def base64url_bytes(text: str) -> bytes | None:
    """`text` decoded as base64url (padding optional), or None."""
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        return None


def endpoint_problem(endpoint: Any) -> str | None:
    """Why the service will not POST to `endpoint`, or None."""
    if not isinstance(endpoint, str) or not endpoint or len(endpoint) > MAX_ENDPOINT_LENGTH:
        return f"Must be a URL of at most {MAX_ENDPOINT_LENGTH} characters."
    try:
        parts = urlsplit(endpoint)
        host = (parts.hostname or "").lower()
        parts.port  # noqa: B018 - a malformed port raises here
    except ValueError:
        return "Must be a URL."
    if parts.username or parts.password or not storable_text(endpoint):
        return "Must be a URL without credentials or control characters."
    if parts.scheme != "https" and not (parts.scheme == "http" and _loopback(host)):
        return "Must be an https URL."
    if not any(host == allowed or host.endswith(f".{allowed}") for allowed in _services()):
        return (
            f"{host or 'This host'} is not a push service this server sends to (BPM_PUSH_SERVICES)."
        )
    return None


def _services() -> list[str]:
    return [str(name).strip().lower().strip(".") for name in settings.BPM_PUSH_SERVICES if name]


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _keys_problems(keys: Any) -> dict[str, list[str]]:
    if not isinstance(keys, Mapping):
        return {"keys": ["Must be an object with p256dh and auth."]}
    problems: dict[str, list[str]] = {}
    p256dh, auth = keys.get("p256dh"), keys.get("auth")
    point = base64url_bytes(p256dh) if isinstance(p256dh, str) else None
    if not isinstance(p256dh, str) or len(p256dh) > MAX_PUSH_KEY_LENGTH or not _p256(point):
        problems["keys.p256dh"] = ["Must be a P-256 public key, base64url (uncompressed)."]
    secret = base64url_bytes(auth) if isinstance(auth, str) else None
    if not isinstance(auth, str) or secret is None or len(secret) != AUTH_SECRET_BYTES:
        problems["keys.auth"] = [f"Must be {AUTH_SECRET_BYTES} bytes, base64url."]
    return problems


def _p256(point: bytes | None) -> bool:
    if not point or len(point) != 65 or point[0] != 4:
        return False
    try:
        ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), point)
    except ValueError:
        return False
    return True


def subscription_save(*, user: Any, data: Any, label: str = "") -> PushSubscription:
    """Save the Push API subscription a reviewer's browser gave ({endpoint, keys: {p256dh,
    auth}}, as PushSubscription.toJSON() spells it) as one of their devices. The same
    endpoint again (the same browser) updates its row, and becomes this user's."""
    if not is_reviewer(user):
        raise Forbidden("Only reviewers receive notifications.")
    if not isinstance(data, Mapping):
        raise InvalidInput("A subscription is an object: {endpoint, keys: {p256dh, auth}}.")
    problems = _keys_problems(data.get("keys"))
    endpoint = data.get("endpoint")
    if (problem := endpoint_problem(endpoint)) is not None:
        problems["endpoint"] = [problem]
    if problems:
        raise InvalidInput("This subscription cannot be used.", problems)
    keys = data["keys"]
    label = "".join(c for c in str(label) if c.isprintable())[:MAX_DEVICE_LABEL_LENGTH]
    with transaction.atomic():
        others = PushSubscription.objects.filter(user=user).exclude(endpoint=endpoint)
        if others.count() >= MAX_DEVICES_PER_USER:
            raise InvalidInput(
                f"You have {MAX_DEVICES_PER_USER} devices already: remove one first.",
                {"endpoint": [f"At most {MAX_DEVICES_PER_USER} devices per person."]},
            )
        subscription, _ = PushSubscription.objects.update_or_create(
            endpoint=endpoint,
            defaults={"user": user, "p256dh": keys["p256dh"], "auth": keys["auth"], "label": label},
        )
    return subscription


def subscription_remove(*, user: Any, endpoint: Any = None, subscription_id: Any = None) -> int:
    """Remove one of `user`'s devices, by its endpoint or its id: how many were removed
    (0 when it is not theirs or already gone)."""
    mine = PushSubscription.objects.filter(user=user)
    if isinstance(endpoint, str) and endpoint:
        return mine.filter(endpoint=endpoint).delete()[0]
    if isinstance(subscription_id, int) or str(subscription_id or "").isdigit():
        return mine.filter(pk=int(subscription_id)).delete()[0]
    return 0


def subscriptions_of(user: Any) -> QuerySet[PushSubscription]:
    return PushSubscription.objects.filter(user=user).order_by("-created_at", "-pk")


def subscription_targets(user_ids: list[Any] | None) -> list[dict[str, Any]]:
    """One target per device of these users (None: of every active reviewer and admin)."""
    devices = PushSubscription.objects.filter(user__is_active=True)
    if user_ids is None:
        reviewers = Q(user__is_superuser=True) | Q(
            user__groups__name__in=(REVIEWERS_GROUP, ADMINS_GROUP)
        )
        devices = devices.filter(reviewers)
    else:
        devices = devices.filter(user_id__in=user_ids)
    rows = devices.distinct().order_by("pk").values_list("pk", "user_id")
    return [{"subscription": pk, "user": user_id} for pk, user_id in rows]
