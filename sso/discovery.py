"""The identity provider's endpoints, from {issuer}/.well-known/openid-configuration.

Fetched once per process and kept for an hour (a failure is not kept: the next sign-in
asks again); bounded by BPM_OIDC_TIMEOUT_SECONDS. An identity provider that does not
answer, answers something that is not its metadata, or names another issuer raises
IdpUnavailable, which the sign-in pages show as a 503 page (never a 500).
"""

import threading
import time
from dataclasses import dataclass
from typing import Any

import httpx

from sso.config import oidc_config

KEEP_SECONDS = 3600.0
REQUIRED = ("authorization_endpoint", "token_endpoint", "jwks_uri")


class IdpUnavailable(Exception):
    """The identity provider cannot be used just now; the message says why (for the logs)."""


@dataclass(frozen=True)
class ProviderMetadata:
    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    jwks_uri: str
    userinfo_endpoint: str  # "" when the provider has none
    end_session_endpoint: str  # "" when the provider offers no RP-initiated logout


_cache: dict[str, tuple[float, ProviderMetadata]] = {}
_lock = threading.Lock()


def provider_metadata() -> ProviderMetadata:
    """The configured identity provider's metadata (cached), or IdpUnavailable."""
    config = oidc_config()
    issuer = config.issuer
    with _lock:
        cached = _cache.get(issuer)
    if cached is not None and cached[0] > time.monotonic():
        return cached[1]
    metadata = _fetch(issuer, config.timeout_seconds)
    with _lock:
        _cache[issuer] = (time.monotonic() + KEEP_SECONDS, metadata)
    return metadata


def forget_metadata() -> None:
    """Drop what was fetched (tests; a provider whose endpoints moved)."""
    with _lock:
        _cache.clear()


def _fetch(issuer: str, timeout: float) -> ProviderMetadata:
    url = f"{issuer}/.well-known/openid-configuration"
    try:
        response = httpx.get(url, timeout=timeout, follow_redirects=False)
        response.raise_for_status()
        document: Any = response.json()
    except (httpx.HTTPError, ValueError) as exc:
        raise IdpUnavailable(f"{url}: {exc.__class__.__name__}: {exc}") from exc
    if not isinstance(document, dict):
        raise IdpUnavailable(f"{url} did not answer a JSON object.")
    # OpenID Connect Discovery 1.0, section 4.3: the issuer must be the one asked.
    if str(document.get("issuer", "")).rstrip("/") != issuer:
        raise IdpUnavailable(
            f"{url} names the issuer {document.get('issuer')!r}, not {issuer!r}: "
            "BPM_OIDC_ISSUER must be the provider's issuer exactly."
        )
    missing = [key for key in REQUIRED if not isinstance(document.get(key), str)]
    if missing:
        raise IdpUnavailable(f"{url} has no {', '.join(missing)}.")
    return ProviderMetadata(
        issuer=str(document["issuer"]),
        authorization_endpoint=document["authorization_endpoint"],
        token_endpoint=document["token_endpoint"],
        jwks_uri=document["jwks_uri"],
        userinfo_endpoint=_optional(document, "userinfo_endpoint"),
        end_session_endpoint=_optional(document, "end_session_endpoint"),
    )


def _optional(document: dict[str, Any], key: str) -> str:
    value = document.get(key)
    return value if isinstance(value, str) else ""
