"""The Bot Framework's authentication, both ways: the tokens Teams sends the bot, checked,
and the bot's own token for the connector.

Inbound: every request the Bot Framework sends carries `Authorization: Bearer <JWT>`,
RS256, signed with a key its OpenID metadata (TEAMS_OPENID_METADATA_URL) publishes at its
`jwks_uri`. A token is accepted when its signature verifies with the key its `kid` names,
its issuer is https://api.botframework.com, its audience is the bot (TEAMS_APP_ID), it
has not expired and is valid already (a few minutes of clock skew allowed), and, once
the body is read, its `serviceurl` claim is the activity's serviceUrl and the key is
endorsed for the activity's channel (`msteams`). The keys are cached for hours; an
unknown `kid` fetches them again, at most once a minute (a flood of made-up ids must not
become a flood of requests to Microsoft).

Outbound: the bot's token from the Entra token endpoint (client credentials, scope
https://api.botframework.com/.default), cached in the process until shortly before it
expires.
"""

import threading
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
import jwt
from django.conf import settings

ISSUER = "https://api.botframework.com"
SCOPE = "https://api.botframework.com/.default"
# The tenant of the token endpoint when TEAMS_TENANT_ID is unset: a multi-tenant bot's.
DEFAULT_TENANT = "botframework.com"
LEEWAY_SECONDS = 300  # the clock skew the Bot Framework's own SDKs allow
KEYS_TTL_SECONDS = 6 * 60 * 60
REFETCH_SECONDS = 60  # the shortest time between two fetches for an unknown kid
FETCH_TIMEOUT_SECONDS = 5
TOKEN_TIMEOUT_SECONDS = 10
TOKEN_MARGIN_SECONDS = 5 * 60  # a cached bot token is renewed this long before it expires
MAX_TOKEN_LENGTH = 8192


class Refused(Exception):
    """The request is not the Bot Framework's (or not for this bot, or not now): why."""


class KeysUnavailable(Exception):
    """The OpenID metadata or its keys could not be fetched: nothing can be verified."""


class TokenUnavailable(Exception):
    """The bot's own token could not be had (`retryable`: the endpoint may answer later)."""

    def __init__(self, message: str, status: int | None = None, *, retryable: bool = True):
        super().__init__(message)
        self.status = status
        self.retryable = retryable


@dataclass(frozen=True)
class Verified:
    """A token's claims, and the channels its signing key is endorsed for (empty: any)."""

    claims: dict[str, Any]
    endorsements: frozenset[str]


@dataclass
class _Keys:
    url: str = ""
    keys: dict[str, tuple[jwt.PyJWK, frozenset[str]]] = field(default_factory=dict)
    fetched_at: float = float("-inf")


_keys = _Keys()
_keys_lock = threading.Lock()
_tokens: dict[tuple[str, str], tuple[str, float]] = {}
_tokens_lock = threading.Lock()


def forget() -> None:
    """Drop the cached keys and bot tokens (tests; a rotated secret)."""
    global _keys
    with _keys_lock:
        _keys = _Keys()
    with _tokens_lock:
        _tokens.clear()


# --- inbound: the Bot Framework's token -----------------------------------------------------


def verified(authorization: str) -> Verified:
    """The claims of the bearer token in an Authorization header; Refused saying why not
    (KeysUnavailable when the keys cannot be fetched)."""
    scheme, _, token = authorization.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise Refused("no bearer token")
    if len(token) > MAX_TOKEN_LENGTH:
        raise Refused("token too long")
    try:
        header = jwt.get_unverified_header(token)
    except jwt.InvalidTokenError:
        raise Refused("malformed token") from None
    if header.get("alg") != "RS256":
        raise Refused("not signed with RS256")
    kid = header.get("kid")
    if not isinstance(kid, str) or not kid or len(kid) > 200:
        raise Refused("no key id")
    found = signing_key(kid)
    if found is None:
        raise Refused("unknown signing key")
    key, endorsements = found
    return Verified(_claims(token, key), endorsements)


_REASONS: tuple[tuple[type[jwt.InvalidTokenError], str], ...] = (
    (jwt.ExpiredSignatureError, "expired token"),
    (jwt.ImmatureSignatureError, "token not valid yet"),
    (jwt.InvalidAudienceError, "wrong audience"),
    (jwt.InvalidIssuerError, "wrong issuer"),
    (jwt.InvalidSignatureError, "bad signature"),
    (jwt.MissingRequiredClaimError, "a required claim is missing"),
)


def _claims(token: str, key: jwt.PyJWK) -> dict[str, Any]:
    try:
        claims: dict[str, Any] = jwt.decode(
            token,
            key.key,
            algorithms=["RS256"],
            audience=settings.TEAMS_APP_ID,
            issuer=ISSUER,
            leeway=LEEWAY_SECONDS,
            options={"require": ["exp", "iss", "aud"]},
        )
    except jwt.InvalidTokenError as exc:
        reason = next((why for kind, why in _REASONS if isinstance(exc, kind)), "invalid token")
        raise Refused(reason) from None
    return claims


def activity_problem(verified: Verified, activity: dict[str, Any]) -> str:
    """Why a verified token does not vouch for this activity: "" when it does."""
    service_url = verified.claims.get("serviceurl")
    if not isinstance(service_url, str) or not service_url:
        return "the token names no serviceurl"
    if service_url != activity.get("serviceUrl"):
        return "the token's serviceurl is not the activity's serviceUrl"
    if verified.endorsements and activity.get("channelId") not in verified.endorsements:
        return "the signing key is not endorsed for the activity's channel"
    return ""


def signing_key(kid: str) -> tuple[jwt.PyJWK, frozenset[str]] | None:
    """The published key `kid` names (fetched when the cache is old, or once more when it
    does not know the kid), or None."""
    global _keys
    url = settings.TEAMS_OPENID_METADATA_URL
    with _keys_lock:
        age = time.monotonic() - _keys.fetched_at
        stale = _keys.url != url or age > KEYS_TTL_SECONDS
        if not stale and (kid in _keys.keys or age < REFETCH_SECONDS):
            return _keys.keys.get(kid)
        _keys = _Keys(url, _fetched_keys(url), time.monotonic())
        return _keys.keys.get(kid)


def _fetched_keys(metadata_url: str) -> dict[str, tuple[jwt.PyJWK, frozenset[str]]]:
    try:
        metadata = _json(httpx.get(metadata_url, timeout=FETCH_TIMEOUT_SECONDS))
        jwks_uri = metadata.get("jwks_uri")
        if not isinstance(jwks_uri, str) or not jwks_uri.startswith(("https://", "http://")):
            raise KeysUnavailable("the OpenID metadata names no jwks_uri")
        published = _json(httpx.get(jwks_uri, timeout=FETCH_TIMEOUT_SECONDS)).get("keys")
    except httpx.HTTPError as exc:
        raise KeysUnavailable(f"the Bot Framework's keys: {type(exc).__name__}") from None
    keys: dict[str, tuple[jwt.PyJWK, frozenset[str]]] = {}
    for item in published if isinstance(published, list) else []:
        if not isinstance(item, dict) or not isinstance(item.get("kid"), str):
            continue
        try:
            key = jwt.PyJWK(item, algorithm="RS256")
        except (jwt.PyJWKError, jwt.InvalidKeyError, ValueError, TypeError):
            continue  # a key we cannot use signs nothing we accept
        endorsed = item.get("endorsements")
        names = (
            [name for name in endorsed if isinstance(name, str)]
            if isinstance(endorsed, list)
            else []
        )
        keys[item["kid"]] = (key, frozenset(names))
    return keys


def _json(response: httpx.Response) -> dict[str, Any]:
    if response.status_code != 200:
        raise KeysUnavailable(f"{response.url} answered HTTP {response.status_code}")
    try:
        data = response.json()
    except ValueError:
        raise KeysUnavailable(f"{response.url} answered no JSON") from None
    if not isinstance(data, dict):
        raise KeysUnavailable(f"{response.url} answered no JSON object")
    return data


# --- outbound: the bot's own token ----------------------------------------------------------


def token_url() -> str:
    return settings.TEAMS_TOKEN_URL.replace("{tenant}", settings.TEAMS_TENANT_ID or DEFAULT_TENANT)


def bot_token() -> str:
    """The bot's bearer token for the connector (cached; TokenUnavailable if none)."""
    cache_key = (token_url(), settings.TEAMS_APP_ID)
    with _tokens_lock:
        cached = _tokens.get(cache_key)
        if cached is not None and cached[1] - time.monotonic() > TOKEN_MARGIN_SECONDS:
            return cached[0]
    token, lifetime = _requested_token()
    with _tokens_lock:
        _tokens[cache_key] = (token, time.monotonic() + lifetime)
    return token


def forget_bot_token() -> None:
    """The connector refused the token (revoked, or the secret changed): ask for another."""
    with _tokens_lock:
        _tokens.clear()


def _requested_token() -> tuple[str, float]:
    form = {
        "grant_type": "client_credentials",
        "client_id": settings.TEAMS_APP_ID,
        "client_secret": settings.TEAMS_APP_PASSWORD,
        "scope": SCOPE,
    }
    try:
        response = httpx.post(token_url(), data=form, timeout=TOKEN_TIMEOUT_SECONDS)
    except httpx.HTTPError as exc:
        raise TokenUnavailable(f"Teams token endpoint unreachable: {type(exc).__name__}") from None
    status = response.status_code
    if status != 200:
        retryable = status == 429 or status >= 500
        raise TokenUnavailable(f"Teams token endpoint: HTTP {status}", status, retryable=retryable)
    try:
        data = response.json()
        token, lifetime = data["access_token"], float(data.get("expires_in") or 3600)
    except (ValueError, KeyError, TypeError):
        raise TokenUnavailable("Teams token endpoint answered no token", status) from None
    if not isinstance(token, str) or not token:
        raise TokenUnavailable("Teams token endpoint answered no token", status)
    return token, lifetime
