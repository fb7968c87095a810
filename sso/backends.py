"""Authentication backends: the OpenID Connect sign-in (mozilla-django-oidc's backend, fed
by discovery) and the gate that keeps passwords for superusers under BPM_OIDC_ONLY.

mozilla-django-oidc exchanges the code (with the PKCE verifier), fetches the issuer's JWKS
and checks the ID token's signature and nonce. Here the token's issuer, audience (and
authorized party), expiry and issue time are checked too (PyJWT's checks, which the
library leaves off), its algorithm must be BPM_OIDC_SIGN_ALGO, and every way a token can
fail becomes SuspiciousOperation: the callback shows a 400 page, never a 500.
"""

from typing import Any
from urllib.parse import quote_plus

import jwt
import requests
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, SuspiciousOperation
from django.http import HttpRequest
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from requests.auth import HTTPBasicAuth

from infra.ratelimits import client_address
from sso.claims import ClaimsRefused, person_from_claims
from sso.config import OidcConfig, callback_url, oidc_config
from sso.discovery import ProviderMetadata, provider_metadata
from sso.services import Access, password_sign_in_refused, sso_sign_in

# Seconds of clock difference with the identity provider tolerated on exp, iat and nbf.
LEEWAY_SECONDS = 60
BASIC = "client_secret_basic"  # BPM_OIDC_TOKEN_AUTH_METHOD for an Authorization header
# What mozilla-django-oidc reads from settings, answered from BPM_OIDC_* instead.
FIXED_SETTINGS: dict[str, Any] = {
    "OIDC_USE_NONCE": True,
    "OIDC_USE_PKCE": True,
    "OIDC_PKCE_CODE_CHALLENGE_METHOD": "S256",
    "OIDC_VERIFY_KID": True,
    "OIDC_VERIFY_SSL": True,
    "OIDC_ALLOW_UNSECURED_JWT": False,
    "OIDC_STORE_ACCESS_TOKEN": False,  # kept by the callback, after the session is rotated
    "OIDC_STORE_ID_TOKEN": False,
    "OIDC_CREATE_USER": True,
    # Read only by the library's get_token, replaced here (BPM_OIDC_TOKEN_AUTH_METHOD).
    "OIDC_TOKEN_USE_BASIC_AUTH": False,
    "OIDC_PROXY": None,
    "OIDC_AUTHENTICATION_CALLBACK_URL": "oidc_authentication_callback",
    "OIDC_REDIRECT_FIELD_NAME": "next",
}


def library_setting(attr: str, *default: Any) -> Any:
    """A mozilla-django-oidc setting, from BPM_OIDC_* (the library's own names are not set)."""
    config = oidc_config()
    derived = {
        "OIDC_RP_CLIENT_ID": config.client_id,
        "OIDC_RP_CLIENT_SECRET": config.client_secret,
        "OIDC_RP_SCOPES": config.scopes,
        "OIDC_RP_SIGN_ALGO": config.sign_algo,
        "OIDC_TIMEOUT": config.timeout_seconds,
    }
    if attr in derived:
        return derived[attr]
    if attr in FIXED_SETTINGS:
        return FIXED_SETTINGS[attr]
    if default:
        return default[0]
    raise KeyError(attr)


class OidcBackend(OIDCAuthenticationBackend):
    """Signs in the person a verified ID token names (sso.services.sso_sign_in decides).

    Acts only for the callback view (which passes the nonce it stored); for any other
    authenticate() call, a password sign-in among them, it answers None. A refused person
    is left on the request (`request.sso_access`) for the callback's page.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # The library's __init__ reads its settings; they come from discovery at sign-in.
        self.UserModel = get_user_model()

    get_settings = staticmethod(library_setting)

    def authenticate(self, request: HttpRequest | None, **kwargs: Any) -> Any:
        config = oidc_config()
        if request is None or not config.enabled or "nonce" not in kwargs or "username" in kwargs:
            return None
        self._configure(config, provider_metadata())
        return super().authenticate(request, **kwargs)

    def _configure(self, config: OidcConfig, metadata: ProviderMetadata) -> None:
        self.config = config
        self.metadata = metadata
        self.OIDC_OP_TOKEN_ENDPOINT = metadata.token_endpoint
        self.OIDC_OP_USER_ENDPOINT = metadata.userinfo_endpoint
        self.OIDC_OP_JWKS_ENDPOINT = metadata.jwks_uri
        self.OIDC_RP_CLIENT_ID = config.client_id
        self.OIDC_RP_CLIENT_SECRET = config.client_secret
        self.OIDC_RP_SIGN_ALGO = config.sign_algo
        self.OIDC_RP_IDP_SIGN_KEY = None

    def get_token(self, payload: dict[str, Any]) -> Any:
        """Exchange the code at the token endpoint, the client authenticated the way
        BPM_OIDC_TOKEN_AUTH_METHOD says (the provider may accept only the one its client
        is registered with); a refusal of the client says which method was tried."""
        # The redirect URI registered with the provider, whatever Host the callback came on.
        body = {**payload, "redirect_uri": callback_url()}
        auth = None
        if self.config.token_auth_method == BASIC:
            # RFC 6749 2.3.1: each part form-urlencoded, then joined for Basic.
            auth = HTTPBasicAuth(
                quote_plus(body.pop("client_id")), quote_plus(body.pop("client_secret"))
            )
        response = requests.post(
            self.OIDC_OP_TOKEN_ENDPOINT,
            data=body,
            auth=auth,
            verify=FIXED_SETTINGS["OIDC_VERIFY_SSL"],
            timeout=self.config.timeout_seconds,
            proxies=FIXED_SETTINGS["OIDC_PROXY"],
        )
        if response.status_code in (400, 401) and "invalid_client" in response.text:
            raise requests.HTTPError(
                f"the token endpoint refused the client ({response.status_code} "
                f"{response.text[:300]}): check BPM_OIDC_CLIENT_ID, BPM_OIDC_CLIENT_SECRET "
                f"and BPM_OIDC_TOKEN_AUTH_METHOD (now {self.config.token_auth_method}) "
                "against the provider's client",
                response=response,
            )
        self.raise_token_response_error(response)
        return response.json()

    def verify_token(self, token: Any, **kwargs: Any) -> Any:
        if not isinstance(token, str) or not token:
            raise SuspiciousOperation("The provider returned no ID token.")
        try:
            return super().verify_token(token, **kwargs)
        except (jwt.InvalidTokenError, KeyError, TypeError, ValueError) as exc:
            raise SuspiciousOperation(f"The ID token was refused: {exc}") from exc

    def _verify_jws(self, payload: Any, key: Any) -> Any:
        """The token's claims once PyJWT checked its signature (with the issuer's key),
        issuer, audience, expiry and issue time."""
        algorithm = jwt.get_unverified_header(payload).get("alg")
        if algorithm != self.OIDC_RP_SIGN_ALGO:
            raise SuspiciousOperation(
                f"The ID token is signed with {algorithm!r}, not {self.OIDC_RP_SIGN_ALGO!r}."
            )
        claims = jwt.decode(
            payload,
            key,
            algorithms=[algorithm],
            audience=self.OIDC_RP_CLIENT_ID,
            issuer=self.metadata.issuer,
            leeway=LEEWAY_SECONDS,
            options={"require": ["exp", "iat", "iss", "aud", "sub"]},
        )
        audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
        if len(audiences) > 1 and claims.get("azp") != self.OIDC_RP_CLIENT_ID:
            raise SuspiciousOperation("The ID token is for several audiences and not for us.")
        return claims

    def store_tokens(self, access_token: Any, id_token: Any) -> None:
        assert self.request is not None
        self.request.sso_tokens = {
            "access_token": access_token if isinstance(access_token, str) else "",
            "id_token": id_token if isinstance(id_token, str) else "",
        }

    def get_userinfo(self, access_token: Any, id_token: Any, payload: Any) -> Any:
        if not self.OIDC_OP_USER_ENDPOINT or not isinstance(access_token, str):
            return {}
        userinfo = super().get_userinfo(access_token, id_token, payload)
        return userinfo if isinstance(userinfo, dict) else {}

    def get_or_create_user(self, access_token: Any, id_token: Any, payload: Any) -> Any:
        userinfo = self.get_userinfo(access_token, id_token, payload)
        try:
            person = person_from_claims(payload, userinfo, self.config.groups_claim)
        except ClaimsRefused as exc:
            raise SuspiciousOperation(str(exc)) from exc
        assert self.request is not None
        access = sso_sign_in(
            issuer=self.metadata.issuer, person=person, address=client_address(self.request)
        )
        self.request.sso_access = access
        return access.user


class PasswordGate:
    """Under BPM_OIDC_ONLY (with single sign-on on), a password signs in superusers alone:
    the break-glass account. Listed before Django's ModelBackend; refuses before any
    password is hashed (Django stops at PermissionDenied and counts a failed sign-in).

    It signs nobody in and loads nobody (no get_user): sessions and Django's force_login
    name the backend that did."""

    def authenticate(
        self, request: HttpRequest | None, username: str | None = None, **kwargs: Any
    ) -> None:
        config = oidc_config()
        if username is None or not (config.enabled and config.only):
            return None
        user = get_user_model()._default_manager.filter(username=username).first()
        if user is not None and user.is_superuser:
            return None  # on to the password check
        if user is not None:
            address = client_address(request) if request is not None else ""
            password_sign_in_refused(username=user.get_username(), address=address)
        raise PermissionDenied("Password sign-in is for superusers only (BPM_OIDC_ONLY).")


def sso_access(request: HttpRequest) -> Access | None:
    """What the sign-in just decided for this request (set by OidcBackend), if anything."""
    return getattr(request, "sso_access", None)


def not_a_password_sign_in(request: HttpRequest, credentials: dict[str, Any] | None) -> bool:
    """django-axes' whitelist (AXES_WHITELIST_CALLABLE): the identity provider's callback
    checks no password, so axes neither counts it as a failed sign-in nor locks it out
    (a person refused for want of a role would otherwise lock their address out)."""
    return "nonce" in (credentials or {})
