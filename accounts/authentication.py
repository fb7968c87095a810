"""Bearer tokens (`Authorization: Bearer <token>`, agent or personal), for DRF and the ASGI path."""

from typing import Any

from rest_framework import authentication, exceptions
from rest_framework.request import Request

from accounts.models import ApiToken
from accounts.tokens import token_authenticate, token_well_formed
from core.actors import AgentPrincipal
from core.choices import TokenKind
from core.exceptions import NotAuthenticated, RateLimited
from infra.ratelimits import auth_failure_record, client_address

KEYWORD = "Bearer"
INVALID_TOKEN = "Invalid or revoked token."
MISSING_TOKEN = "Bearer token missing."
WWW_AUTHENTICATE = f'{KEYWORD} realm="api"'


def bearer_credentials(header: str) -> str | None:
    """The raw token of a Bearer Authorization header ("" when empty); None for other schemes."""
    scheme, _, raw = header.partition(" ")
    if scheme.lower() != KEYWORD.lower():
        return None
    return raw.strip()


def wrong_scheme(header: str) -> str:
    """The 401 message for an Authorization header that is not Bearer (never echoing it)."""
    scheme, space, _ = header.strip().partition(" ")
    named = f"the scheme '{scheme}'" if space and scheme.isalpha() and len(scheme) <= 20 else None
    got = named or "a value with no scheme"
    return f"Send the token as 'Authorization: Bearer <token>' (got {got})."


def verify_bearer(raw: str, address: str) -> ApiToken:
    """The token for a Bearer credential, or NotAuthenticated (401) / RateLimited (429).

    A token that verifies is always accepted. One that is not well formed (wrong shape or
    checksum) is a 401 that cost no lookup and is not counted. One that was looked up and
    did not verify counts against its address: past BPM_AUTH_FAILURES_PER_MINUTE in a
    minute, those are answered 429 until the minute ends.
    """
    if not raw:
        raise NotAuthenticated(MISSING_TOKEN)
    if not token_well_formed(raw):
        raise NotAuthenticated(INVALID_TOKEN)
    token = token_authenticate(raw)
    if token is not None:
        return token
    wait = auth_failure_record(address)
    if wait is not None:
        raise RateLimited(
            f"Too many invalid tokens from this address; retry in {wait} s.", retry_after=wait
        )
    raise NotAuthenticated(INVALID_TOKEN)


def principal_for_token(token: ApiToken) -> Any:
    """request.user for a token: an AgentPrincipal for agent tokens, else the person."""
    if token.kind == TokenKind.AGENT:
        assert token.agent_id is not None  # agent tokens carry one (check constraint)
        return AgentPrincipal(token.agent_id, owner=token.owner)
    return token.user


class BearerTokenAuthentication(authentication.BaseAuthentication):
    keyword = KEYWORD

    def authenticate(self, request: Request) -> tuple[Any, ApiToken] | None:
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None  # no credentials: another authenticator, or "not provided"
        raw = bearer_credentials(header)
        if raw is None:
            raise exceptions.AuthenticationFailed(wrong_scheme(header))
        try:
            token = verify_bearer(raw, client_address(request))
        except NotAuthenticated as exc:
            raise exceptions.AuthenticationFailed(exc.message) from None
        return principal_for_token(token), token

    def authenticate_header(self, request: Request) -> str:
        return WWW_AUTHENTICATE
