"""API tokens: minting (shown once), hashing, lookup and revocation."""

import hashlib
import secrets
import time
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.db.models import Q
from django.utils import timezone

from breakpoints.choices import TokenKind
from breakpoints.limits import MAX_AGENT_ID_LENGTH
from breakpoints.models import ApiToken
from config.exceptions import InvalidInput, NotFound

TOKEN_PREFIX = "bpm_"
PREFIX_LENGTH = 12
LAST_USED_RESOLUTION = timedelta(minutes=5)


def hash_token(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def _mint() -> tuple[str, str, str]:
    raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
    return raw, raw[:PREFIX_LENGTH], hash_token(raw)


def token_create_for_agent(*, agent_id: str, name: str = "") -> tuple[ApiToken, str]:
    """Return the stored token and the raw secret, which is never stored or shown again."""
    agent_id = agent_id.strip()
    if not agent_id or len(agent_id) > MAX_AGENT_ID_LENGTH:
        raise InvalidInput(
            f"agentId must be 1 to {MAX_AGENT_ID_LENGTH} characters.", {"agentId": ["Invalid."]}
        )
    raw, prefix, digest = _mint()
    token = ApiToken.objects.create(
        kind=TokenKind.AGENT, agent_id=agent_id, name=name, prefix=prefix, token_hash=digest
    )
    return token, raw


def token_create_for_user(*, user: User, name: str = "") -> tuple[ApiToken, str]:
    raw, prefix, digest = _mint()
    token = ApiToken.objects.create(
        kind=TokenKind.USER, user=user, name=name, prefix=prefix, token_hash=digest
    )
    return token, raw


def token_revoke(*, prefix_or_id: str) -> ApiToken:
    """Revoke by database id or by the printed prefix (or the whole token)."""
    value = prefix_or_id.strip()
    query = Q(prefix=value[:PREFIX_LENGTH]) if value.startswith(TOKEN_PREFIX) else Q()
    if value.isdigit():
        query |= Q(pk=int(value))
    matches = list(ApiToken.objects.filter(query)[:2]) if query else []
    if value.startswith(TOKEN_PREFIX) and len(value) > PREFIX_LENGTH:
        matches = [t for t in matches if t.token_hash == hash_token(value)]
    if not matches:
        raise NotFound(f"No token matches {value!r}.")
    if len(matches) > 1:
        raise InvalidInput(f"{value!r} matches more than one token; use its id.")
    token = matches[0]
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
    _verified.pop(token.token_hash, None)
    return token


# hash -> (monotonic deadline, token): verified tokens, trusted for BPM_TOKEN_CACHE_SECONDS.
_verified: dict[str, tuple[float, ApiToken]] = {}
_VERIFIED_MAX = 10_000


def token_cached(raw: str) -> ApiToken | None:
    """The token for `raw` if this process verified it within BPM_TOKEN_CACHE_SECONDS."""
    return _verified_token(hash_token(raw))


def _verified_token(digest: str) -> ApiToken | None:
    cached = _verified.get(digest)
    return cached[1] if cached is not None and cached[0] > time.monotonic() else None


def token_authenticate(raw: str) -> ApiToken | None:
    """The active token for `raw`, or None.

    One indexed lookup by hash, then trusted for BPM_TOKEN_CACHE_SECONDS in this process,
    so a poll costs one query: a revocation elsewhere takes effect within that bound (in
    the revoking process at once). Only verified tokens are kept; misses always ask.
    """
    if not raw.startswith(TOKEN_PREFIX) or len(raw) > 200:
        return None
    digest = hash_token(raw)
    cached = _verified_token(digest)
    if cached is not None:
        return cached
    token = _token_lookup(digest)
    ttl = settings.BPM_TOKEN_CACHE_SECONDS
    if token is not None and ttl > 0:
        if len(_verified) >= _VERIFIED_MAX:
            _verified.clear()
        _verified[digest] = (time.monotonic() + ttl, token)
    return token


def token_cache_clear() -> None:
    _verified.clear()


def _token_lookup(digest: str) -> ApiToken | None:
    token = (
        ApiToken.objects.select_related("user")
        .filter(token_hash=digest, revoked_at__isnull=True)
        .first()
    )
    if token is None:
        return None
    if token.kind == TokenKind.USER and (token.user is None or not token.user.is_active):
        return None
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
        # Coarse on purpose: a poll every few seconds must not write every time.
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token
