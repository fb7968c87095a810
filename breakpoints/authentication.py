"""Bearer tokens (`Authorization: Bearer <token>`, agent or personal), for DRF and the ASGI path."""

from typing import Any

from rest_framework import authentication, exceptions
from rest_framework.request import Request

from breakpoints.actors import AgentPrincipal
from breakpoints.choices import TokenKind
from breakpoints.models import ApiToken
from breakpoints.ratelimits import auth_failure_record, auth_failures_wait, client_address
from breakpoints.tokens import token_authenticate, token_cached
from config.exceptions import NotAuthenticated, RateLimited

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


def verify_bearer(raw: str, address: str) -> ApiToken:
    """The token for a Bearer credential, or NotAuthenticated (401) / RateLimited (429).

    An address that sent BPM_AUTH_FAILURES_PER_MINUTE bad tokens this minute is refused
    before any lookup; a token this process verified moments ago is never held back.
    """
    if not raw:
        raise NotAuthenticated(MISSING_TOKEN)
    token = token_cached(raw)
    if token is not None:
        return token
    wait = auth_failures_wait(address)
    if wait is not None:
        raise RateLimited(
            f"Too many invalid tokens from this address; retry in {wait} s.", retry_after=wait
        )
    token = token_authenticate(raw)
    if token is None:
        auth_failure_record(address)
        raise NotAuthenticated(INVALID_TOKEN)
    return token


def principal_for_token(token: ApiToken) -> Any:
    """request.user for a token: an AgentPrincipal for agent tokens, else the person."""
    if token.kind == TokenKind.AGENT:
        assert token.agent_id is not None  # agent tokens carry one (check constraint)
        return AgentPrincipal(token.agent_id)
    return token.user


class BearerTokenAuthentication(authentication.BaseAuthentication):
    keyword = KEYWORD

    def authenticate(self, request: Request) -> tuple[Any, ApiToken] | None:
        header = authentication.get_authorization_header(request).decode("latin-1")
        raw = bearer_credentials(header) if header else None
        if raw is None:
            return None
        try:
            token = verify_bearer(raw, client_address(request))
        except NotAuthenticated as exc:
            raise exceptions.AuthenticationFailed(exc.message) from None
        return principal_for_token(token), token

    def authenticate_header(self, request: Request) -> str:
        return WWW_AUTHENTICATE
