"""Bearer tokens (`Authorization: Bearer <token>`, agent or personal), for DRF and the ASGI path."""

from typing import Any

from rest_framework import authentication, exceptions
from rest_framework.request import Request

from breakpoints.actors import AgentPrincipal
from breakpoints.choices import TokenKind
from breakpoints.models import ApiToken
from breakpoints.tokens import token_authenticate

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
        if not raw:
            raise exceptions.AuthenticationFailed(MISSING_TOKEN)
        token = token_authenticate(raw)
        if token is None:
            raise exceptions.AuthenticationFailed(INVALID_TOKEN)
        return principal_for_token(token), token

    def authenticate_header(self, request: Request) -> str:
        return WWW_AUTHENTICATE
