"""Sessions signed in through the identity provider are re-checked with it every
BPM_OIDC_RECHECK_SECONDS (default 900): a person removed from the reviewer groups loses
the console within that time, without signing in again.

The re-check asks the provider's userinfo endpoint with the session's access token, and
applies the groups it names (roles and expert groups, added and removed, as at a
sign-in). When it cannot tell (the access token expired or was revoked, the provider does
not answer, userinfo does not carry the groups claim), the session ends: a page the
person opens is sent through the provider to sign in again (no typing while the
provider's own session lasts), anything else goes on signed out.

Under BPM_OIDC_ONLY, a password session of anyone but a superuser ends at its next request.
Nothing here runs for a request that carries no signed-in session.
"""

import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

import httpx
from django.contrib import auth
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse

from core.actors import is_superuser
from infra.ratelimits import client_address
from sso.claims import claim, person_from_claims
from sso.config import OidcConfig, oidc_config
from sso.discovery import IdpUnavailable, provider_metadata
from sso.services import password_session_end, sso_recheck, sso_session_end
from sso.views import SESSION_KEY, no_access_page

SIGN_IN_PATHS = "/oidc/"


class RecheckImpossible(Exception):
    """The provider could not say what the person's groups are now; the message says why."""


class SessionRecheckMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.check(request) or self.get_response(request)

    def check(self, request: HttpRequest) -> HttpResponse | None:
        session = getattr(request, "session", None)
        if session is None or auth.SESSION_KEY not in session:
            return None  # nobody signed in: nothing to look at (no query without a cookie)
        state = session.get(SESSION_KEY)
        config = oidc_config()
        if not isinstance(state, dict):
            if config.enabled and config.only and not is_superuser(request.user):
                _end_password_session(request)
            return None
        if not config.enabled:  # single sign-on was turned off: its sessions end
            auth.logout(request)
            return None
        if time.time() - float(state.get("checked_at", 0)) < config.recheck_seconds:
            return None
        if request.path_info.startswith(SIGN_IN_PATHS):
            return None  # signing in or out: what the re-check would lead to anyway
        return _recheck(request, config, state)


def _recheck(
    request: HttpRequest, config: OidcConfig, state: dict[str, Any]
) -> HttpResponse | None:
    user = request.user
    if not user.is_authenticated:
        return None
    try:
        userinfo = _userinfo(config, state)
    except RecheckImpossible as exc:
        sso_session_end(user=user, reason="recheck_impossible", detail=str(exc)[:500])
        auth.logout(request)
        return _sign_in_again(request)
    person = person_from_claims({"sub": state["subject"]}, userinfo, config.groups_claim)
    access = sso_recheck(
        user=user, issuer=state["issuer"], person=person, address=client_address(request)
    )
    if access.user is None:
        auth.logout(request)
        return no_access_page(config, access)
    request.session[SESSION_KEY] = {**state, "checked_at": time.time()}
    return None


def _userinfo(config: OidcConfig, state: dict[str, Any]) -> dict[str, Any]:
    """The provider's userinfo for the session's access token, naming the same subject
    and carrying the groups claim; else RecheckImpossible."""
    try:
        endpoint = provider_metadata().userinfo_endpoint
    except IdpUnavailable as exc:
        raise RecheckImpossible(str(exc)) from exc
    token = state.get("access_token")
    if not endpoint or not token:
        raise RecheckImpossible("no userinfo endpoint or no access token to ask it with")
    try:
        response = httpx.get(
            endpoint,
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
            timeout=config.timeout_seconds,
        )
        body = response.json() if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError) as exc:
        raise RecheckImpossible(f"userinfo: {exc.__class__.__name__}: {exc}") from exc
    if not isinstance(body, dict):
        raise RecheckImpossible(f"userinfo answered {response.status_code}")
    if body.get("sub") != state.get("subject"):
        raise RecheckImpossible("userinfo names another subject")
    if claim(body, config.groups_claim) is None:
        raise RecheckImpossible(f"userinfo carries no {config.groups_claim!r} claim")
    return body


def _sign_in_again(request: HttpRequest) -> HttpResponse | None:
    """A page opened in the browser goes through the provider to sign in again; anything
    else (a form post, the console's background refresh, the API) goes on signed out."""
    wants_page = "text/html" in request.headers.get("Accept", "")
    if request.method != "GET" or not wants_page or request.path.startswith("/api/"):
        return None
    query = urlencode({"next": request.get_full_path()})
    return HttpResponseRedirect(f"{reverse('oidc_authentication_init')}?{query}")


def _end_password_session(request: HttpRequest) -> None:
    password_session_end(user=request.user, address=client_address(request))
    auth.logout(request)
