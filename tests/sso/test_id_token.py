"""The ID token checks around mozilla-django-oidc's signature check: issuer, audience (and
authorized party), expiry, issue time, the one algorithm, the nonce; every failure a
SuspiciousOperation (a 400 page), never an exception that would make a 500."""

import time

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from django.core.exceptions import SuspiciousOperation

from sso.backends import OidcBackend
from sso.config import oidc_config
from sso.discovery import ProviderMetadata

ISSUER = "https://idp.example"
CLIENT = "breakpoint-manager"
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
OTHER_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture
def backend(settings) -> OidcBackend:
    settings.BPM_OIDC_ISSUER = ISSUER
    settings.BPM_OIDC_CLIENT_ID = CLIENT
    backend = OidcBackend()
    backend._configure(
        oidc_config(),
        ProviderMetadata(ISSUER, f"{ISSUER}/auth", f"{ISSUER}/token", f"{ISSUER}/jwks", "", ""),
    )
    backend.OIDC_RP_IDP_SIGN_KEY = KEY.public_key()  # instead of fetching the JWKS
    return backend


def token(key=KEY, algorithm="RS256", **changes) -> str:
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": CLIENT, "sub": "s1", "iat": now, "exp": now + 300, "nonce": "n"}
    claims.update(changes)
    claims = {name: value for name, value in claims.items() if value is not None}
    return jwt.encode(claims, key, algorithm=algorithm, headers={"kid": "k1"})


def test_a_good_token_gives_its_claims(backend):
    assert backend.verify_token(token(), nonce="n")["sub"] == "s1"


@pytest.mark.parametrize(
    "forged",
    [
        pytest.param(lambda: token(key=OTHER_KEY), id="another-key"),
        pytest.param(lambda: token(iss="https://evil.example"), id="another-issuer"),
        pytest.param(lambda: token(aud="another-client"), id="another-audience"),
        pytest.param(lambda: token(aud=[CLIENT, "other"]), id="several-audiences-no-azp"),
        pytest.param(lambda: token(exp=int(time.time()) - 3600), id="expired"),
        pytest.param(lambda: token(exp=None), id="no-expiry"),
        pytest.param(lambda: token(iat=None), id="no-issue-time"),
        pytest.param(lambda: token(sub=None), id="no-subject"),
        pytest.param(lambda: token(nonce="other"), id="another-nonce"),
        pytest.param(lambda: token(key="client-secret-" * 3, algorithm="HS256"), id="hs256"),
        pytest.param(lambda: jwt.encode({"sub": "s1"}, None, algorithm="none"), id="unsigned"),
        pytest.param(lambda: "not.a.token", id="garbage"),
        pytest.param(lambda: "", id="empty"),
        pytest.param(lambda: None, id="none"),
    ],
)
def test_a_forged_or_broken_token_is_refused(backend, forged):
    with pytest.raises(SuspiciousOperation):
        backend.verify_token(forged(), nonce="n")


def test_several_audiences_are_accepted_when_we_are_the_authorized_party(backend):
    claims = backend.verify_token(token(aud=[CLIENT, "api"], azp=CLIENT), nonce="n")
    assert claims["azp"] == CLIENT


def test_the_backend_answers_none_to_anything_but_the_callback(backend, rf, settings):
    """A password sign-in passes every backend: this one stays out of it."""
    request = rf.get("/oidc/callback/?code=a&state=b")
    assert backend.authenticate(request, username="u", password="p") is None
    assert backend.authenticate(request) is None
    settings.BPM_OIDC_ISSUER = ""
    assert OidcBackend().authenticate(request, nonce="n", code_verifier="v") is None
