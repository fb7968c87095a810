"""API tokens: minting (shown once), hashing, lookup and revocation.

A token is `bpma_` (agent) or `bpmu_` (personal user token), 43 random base62 characters
(256 bits) and 6 base62 characters of CRC32 over everything before them, as GitHub's are:
a mistyped, truncated or made-up token is refused by token_well_formed() without a lookup.
Tokens minted before that (`bpm_` and 43 URL-safe base64 characters) are still looked up.
"""

import hashlib
import re
import secrets
import string
import time
import zlib
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.db.models import Q
from django.utils import timezone

from accounts.models import ApiToken
from core.choices import TokenKind
from core.exceptions import InvalidInput, NotFound
from core.limits import MAX_AGENT_ID_LENGTH, MAX_REQUESTED_BY_LENGTH

TOKEN_PREFIXES = {TokenKind.AGENT: "bpma_", TokenKind.USER: "bpmu_"}
LEGACY_PREFIX = "bpm_"
PREFIX_LENGTH = 12  # the stored, printed prefix: enough to tell tokens apart, not to use one
LAST_USED_RESOLUTION = timedelta(minutes=5)

_BASE62 = string.digits + string.ascii_uppercase + string.ascii_lowercase
_RANDOM_LENGTH = 43  # 62**43 > 2**256
_CHECKSUM_LENGTH = 6  # 62**6 > 2**32
_CURRENT = re.compile(
    "(?:{})[0-9A-Za-z]{{{}}}".format(
        "|".join(map(re.escape, TOKEN_PREFIXES.values())), _RANDOM_LENGTH + _CHECKSUM_LENGTH
    )
)
_LEGACY = re.compile(re.escape(LEGACY_PREFIX) + r"[0-9A-Za-z_-]{43}")


def hash_token(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def _checksum(body: str) -> str:
    number, digits = zlib.crc32(body.encode()), []
    for _ in range(_CHECKSUM_LENGTH):
        number, digit = divmod(number, 62)
        digits.append(_BASE62[digit])
    return "".join(reversed(digits))


def token_well_formed(raw: str) -> bool:
    """Whether `raw` could be a token this service issued, decided without any lookup:
    the current form with a matching checksum, or the legacy form."""
    if _CURRENT.fullmatch(raw):
        return raw[-_CHECKSUM_LENGTH:] == _checksum(raw[:-_CHECKSUM_LENGTH])
    return _LEGACY.fullmatch(raw) is not None


def _mint(kind: TokenKind) -> tuple[str, str, str]:
    body = TOKEN_PREFIXES[kind] + "".join(secrets.choice(_BASE62) for _ in range(_RANDOM_LENGTH))
    raw = body + _checksum(body)
    return raw, raw[:PREFIX_LENGTH], hash_token(raw)


def token_create_for_agent(
    *, agent_id: str, name: str = "", owner: str | None = None
) -> tuple[ApiToken, str]:
    """Return the stored token and the raw secret, which is never stored or shown again.
    `owner` (a username or email) is the person the agent acts for: the requestedBy of its
    breakpoints that name none."""
    agent_id = agent_id.strip()
    owner = (owner or "").strip() or None
    if owner is not None and len(owner) > MAX_REQUESTED_BY_LENGTH:
        raise InvalidInput(
            f"owner must be at most {MAX_REQUESTED_BY_LENGTH} characters.", {"owner": ["Too long."]}
        )
    if not agent_id or len(agent_id) > MAX_AGENT_ID_LENGTH:
        raise InvalidInput(
            f"agentId must be 1 to {MAX_AGENT_ID_LENGTH} characters.", {"agentId": ["Invalid."]}
        )
    raw, prefix, digest = _mint(TokenKind.AGENT)
    token = ApiToken.objects.create(
        kind=TokenKind.AGENT,
        agent_id=agent_id,
        name=name,
        owner=owner,
        prefix=prefix,
        token_hash=digest,
    )
    return token, raw


def token_create_for_user(*, user: User, name: str = "") -> tuple[ApiToken, str]:
    raw, prefix, digest = _mint(TokenKind.USER)
    token = ApiToken.objects.create(
        kind=TokenKind.USER, user=user, name=name, prefix=prefix, token_hash=digest
    )
    return token, raw


def token_revoke(*, prefix_or_id: str) -> ApiToken:
    """Revoke by database id or by the printed prefix (or the whole token)."""
    value = prefix_or_id.strip()
    looks_like_token = value.startswith((LEGACY_PREFIX, *TOKEN_PREFIXES.values()))
    query = Q(prefix=value[:PREFIX_LENGTH]) if looks_like_token else Q()
    if value.isdigit():
        query |= Q(pk=int(value))
    matches = list(ApiToken.objects.filter(query)[:2]) if query else []
    if looks_like_token and len(value) > PREFIX_LENGTH:
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


def _verified_token(digest: str) -> ApiToken | None:
    cached = _verified.get(digest)
    return cached[1] if cached is not None and cached[0] > time.monotonic() else None


def token_authenticate(raw: str) -> ApiToken | None:
    """The active token for `raw`, or None.

    A token that is not well formed is refused without a lookup. Otherwise one indexed
    lookup by hash, then trusted for BPM_TOKEN_CACHE_SECONDS in this process, so a poll
    costs one query: a revocation elsewhere takes effect within that bound (in the
    revoking process at once). Only verified tokens are kept; misses always ask.
    """
    if not token_well_formed(raw):
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
