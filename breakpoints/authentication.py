"""DRF authentication with `Authorization: Bearer <token>` (agent or personal tokens)."""

from typing import Any

from rest_framework import authentication, exceptions
from rest_framework.request import Request

from breakpoints.actors import AgentPrincipal
from breakpoints.choices import TokenKind
from breakpoints.models import ApiToken
from breakpoints.tokens import token_authenticate


class BearerTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[Any, ApiToken] | None:
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        scheme, _, raw = header.partition(" ")
        if scheme.lower() != self.keyword.lower():
            return None
        raw = raw.strip()
        if not raw:
            raise exceptions.AuthenticationFailed("Bearer token missing.")
        token = token_authenticate(raw)
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked token.")
        if token.kind == TokenKind.AGENT:
            assert token.agent_id is not None  # agent tokens carry one (check constraint)
            return AgentPrincipal(token.agent_id), token
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return f'{self.keyword} realm="api"'
