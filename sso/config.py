"""The single sign-on settings (BPM_OIDC_*), read when asked: tests may change them."""

from dataclasses import dataclass

from django.conf import settings
from django.urls import reverse

ALL_GROUPS = "*"


@dataclass(frozen=True)
class OidcConfig:
    issuer: str  # empty: single sign-on is off
    client_id: str
    client_secret: str
    # How the client secret is sent to the token endpoint: client_secret_post (the body)
    # or client_secret_basic (an Authorization: Basic header).
    token_auth_method: str
    scopes: str
    groups_claim: str
    reviewer_groups: frozenset[str]
    admin_groups: frozenset[str]
    # The identity provider's groups mirrored as expert groups; None: all of them ("*").
    expert_groups: frozenset[str] | None
    only: bool  # password sign-in for superusers alone
    recheck_seconds: float
    name: str
    access_contact: str
    sign_algo: str
    timeout_seconds: float

    @property
    def enabled(self) -> bool:
        return bool(self.issuer)


def oidc_config() -> OidcConfig:
    experts = settings.BPM_OIDC_EXPERT_GROUPS
    return OidcConfig(
        issuer=settings.BPM_OIDC_ISSUER.rstrip("/"),
        client_id=settings.BPM_OIDC_CLIENT_ID,
        client_secret=settings.BPM_OIDC_CLIENT_SECRET,
        token_auth_method=settings.BPM_OIDC_TOKEN_AUTH_METHOD,
        scopes=settings.BPM_OIDC_SCOPES,
        groups_claim=settings.BPM_OIDC_GROUPS_CLAIM,
        reviewer_groups=frozenset(settings.BPM_OIDC_REVIEWER_GROUPS),
        admin_groups=frozenset(settings.BPM_OIDC_ADMIN_GROUPS),
        expert_groups=None if ALL_GROUPS in experts else frozenset(experts),
        only=settings.BPM_OIDC_ONLY,
        recheck_seconds=float(settings.BPM_OIDC_RECHECK_SECONDS),
        name=settings.BPM_OIDC_NAME,
        access_contact=settings.BPM_OIDC_ACCESS_CONTACT,
        sign_algo=settings.BPM_OIDC_SIGN_ALGO,
        timeout_seconds=float(settings.BPM_OIDC_TIMEOUT_SECONDS),
    )


def public_url(path: str) -> str:
    """`path` on the service's address as people reach it (BPM_PUBLIC_URL)."""
    return settings.BPM_PUBLIC_URL.rstrip("/") + path


def callback_url() -> str:
    """The redirect URI registered with the identity provider: {BPM_PUBLIC_URL}/oidc/callback/."""
    return public_url(reverse("oidc_authentication_callback"))


def signed_out_url() -> str:
    """Where the identity provider sends people back after signing them out (registered
    with it as the post-logout redirect URI): the console's sign-in page."""
    return public_url(reverse("admin:login"))
