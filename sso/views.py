"""The sign-in pages: GET /oidc/authenticate/ (off to the identity provider), GET
/oidc/callback/ (back from it), POST /oidc/logout/; and the pages they answer when a
sign-in cannot be: no access here (403), a failed or forged callback (400), an identity
provider that does not answer (503). None of them ever answers 500.

mozilla-django-oidc's views do the work (state, nonce and PKCE kept in the session, each
state used once); these feed them the discovered endpoints and the registered redirect
URI, and say what went wrong in words.
"""

import logging
import time
from typing import Any
from urllib.parse import urlencode

import requests
from django.conf import settings
from django.contrib import auth
from django.core.exceptions import SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.loader import render_to_string
from django.utils.decorators import method_decorator
from django.views.decorators.cache import never_cache
from django.views.generic import View
from mozilla_django_oidc.views import (
    OIDCAuthenticationCallbackView,
    OIDCAuthenticationRequestView,
)

from core.exceptions import RateLimited
from infra.ratelimits import client_address, rate_limit
from sso.backends import library_setting, sso_access
from sso.claims import IdpPerson
from sso.config import OidcConfig, callback_url, oidc_config, signed_out_url
from sso.discovery import IdpUnavailable, provider_metadata
from sso.services import Access, sso_sign_out

logger = logging.getLogger(__name__)

# The session's record of a sign-in through the identity provider (sso.middleware reads it).
SESSION_KEY = "sso"
RETRY_AFTER_SECONDS = 30


def page(template: str, status: int, **context: Any) -> HttpResponse:
    """A plain page (no console chrome, nothing cached)."""
    response = HttpResponse(render_to_string(template, context), status=status)
    response["Cache-Control"] = "no-store"
    return response


def unavailable_page(config: OidcConfig, exc: Exception) -> HttpResponse:
    logger.warning("sso: the identity provider cannot be used: %s", exc)
    response = page(
        "sso/sign_in_failed.html",
        503,
        title=f"{config.name} does not answer",
        message=(
            f"Sign-in goes through {config.name}, which does not answer just now. Try again "
            "in a little while."
        ),
        config=config,
    )
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


def busy_page(config: OidcConfig, exc: RateLimited) -> HttpResponse:
    response = page(
        "sso/sign_in_failed.html",
        429,
        title="Try again shortly",
        message=f"{exc.message} Nothing was sent to {config.name}.",
        config=config,
    )
    response["Retry-After"] = str(exc.retry_after)
    return response


def failed_page(config: OidcConfig, reason: str) -> HttpResponse:
    """The callback could not sign anyone in: a 400 page (the reason only in the log)."""
    logger.warning("sso: sign-in callback refused: %s", reason)
    return page(
        "sso/sign_in_failed.html",
        400,
        title="Sign-in not completed",
        message=(
            f"The answer from {config.name} could not be accepted (it was incomplete, used "
            "already, or not meant for this browser). Nobody was signed in. Start again "
            "from the sign-in page."
        ),
        config=config,
    )


def no_access_page(config: OidcConfig, access: Access) -> HttpResponse:
    """403: signed in at the identity provider, but no role here (or no account it may
    use: `message` says how an admin links them); whom to ask."""
    return page(
        "sso/no_access.html",
        403,
        config=config,
        person=access.person,
        known_as=_known_as(access.person),
        reason=access.refusal,
        message=access.message,
        reviewer_groups=sorted(config.reviewer_groups),
        admin_groups=sorted(config.admin_groups),
    )


def _known_as(person: IdpPerson) -> str:
    return person.email or person.preferred_username or person.subject


@method_decorator(never_cache, name="dispatch")
class SignInStart(OIDCAuthenticationRequestView):
    """GET /oidc/authenticate/[?next=...]: off to the identity provider, with a fresh state,
    nonce and PKCE challenge kept in the session."""

    get_settings = staticmethod(library_setting)

    def __init__(self, **kwargs: Any) -> None:
        View.__init__(self, **kwargs)  # the library's reads settings that discovery gives

    def get(self, request: HttpRequest) -> HttpResponse:
        config = oidc_config()
        if not config.enabled:
            raise Http404("Single sign-on is off.")
        try:
            # Each start stores a state in a session: an address's starts are bounded.
            rate_limit(
                f"bpm:sso-start:{client_address(request)}",
                settings.BPM_THROTTLE_ANON_RATE,
                "sign-ins started from your address",
            )
            metadata = provider_metadata()
        except RateLimited as exc:
            return busy_page(config, exc)
        except IdpUnavailable as exc:
            return unavailable_page(config, exc)
        self.OIDC_OP_AUTH_ENDPOINT = metadata.authorization_endpoint
        self.OIDC_RP_CLIENT_ID = config.client_id
        return super().get(request)

    def get_extra_params(self, request: HttpRequest) -> dict[str, str]:
        # After the library's own: the registered redirect URI, not this request's Host.
        return {"redirect_uri": callback_url()}


@method_decorator(never_cache, name="dispatch")
class SignInCallback(OIDCAuthenticationCallbackView):
    """GET /oidc/callback/?code=...&state=...: the identity provider's answer. Signs the
    person in, or answers a page saying why not; never a 500."""

    get_settings = staticmethod(library_setting)

    def get(self, request: HttpRequest) -> HttpResponse:
        config = oidc_config()
        if not config.enabled:
            raise Http404("Single sign-on is off.")
        try:
            metadata = provider_metadata()
            # RFC 9207: a provider that names itself must be the one we asked (mix-up).
            issuer = request.GET.get("iss")
            if issuer is not None and issuer != metadata.issuer:
                raise SuspiciousOperation(f"the answer names the issuer {issuer!r}")
            response = super().get(request)
        except IdpUnavailable as exc:
            return unavailable_page(config, exc)
        except (SuspiciousOperation, requests.RequestException, ValueError) as exc:
            return failed_page(config, f"{exc.__class__.__name__}: {exc}")
        return response

    def login_failure(self) -> HttpResponse:
        config = oidc_config()
        access = sso_access(self.request)
        if access is not None and access.user is None:
            return no_access_page(config, access)
        error = self.request.GET.get("error", "")
        if error:
            return failed_page(config, f"the provider answered error={error[:100]!r}")
        return failed_page(config, "no code and state, or no sign-in under way in this session")

    def login_success(self) -> HttpResponse:
        """A new session (the key rotated) holding what its re-check needs."""
        request = self.request
        destination = self.success_url  # read before the login may flush the session
        access = sso_access(request)
        tokens = getattr(request, "sso_tokens", {})
        auth.login(request, self.user)
        request.session[SESSION_KEY] = {
            "issuer": provider_metadata().issuer,
            "subject": access.person.subject if access is not None else "",
            "checked_at": time.time(),
            "access_token": tokens.get("access_token", ""),
            "id_token": tokens.get("id_token", ""),
        }
        return HttpResponseRedirect(destination)


def sign_out_destination(request: HttpRequest) -> str | None:
    """For a person signed in through the identity provider, before their session ends:
    record the sign-out and return the provider's end-session URL (None when the session
    is a password one, or the provider offers no end_session_endpoint)."""
    state = request.session.get(SESSION_KEY)
    config = oidc_config()
    if not isinstance(state, dict) or not config.enabled or not request.user.is_authenticated:
        return None
    sso_sign_out(user=request.user)
    try:
        endpoint = provider_metadata().end_session_endpoint
    except IdpUnavailable:
        return None
    if not endpoint:
        return None
    params = {"client_id": config.client_id, "post_logout_redirect_uri": signed_out_url()}
    if state.get("id_token"):
        params["id_token_hint"] = state["id_token"]
    return f"{endpoint}{'&' if '?' in endpoint else '?'}{urlencode(params)}"


def leaving_page(destination: str) -> HttpResponse:
    """The local session has ended; on to the identity provider to end its session too.
    A page that moves on by itself rather than a redirect: the console's pages allow form
    posts to this site only (CSP form-action), redirects after them included."""
    return page("sso/signing_out.html", 200, destination=destination, config=oidc_config())


@method_decorator(never_cache, name="dispatch")
class SignOut(View):
    """POST /oidc/logout/: end the local session, then the identity provider's."""

    http_method_names = ["post"]

    def post(self, request: HttpRequest) -> HttpResponse:
        destination = sign_out_destination(request)
        auth.logout(request)
        return leaving_page(destination) if destination else HttpResponseRedirect(signed_out_url())
