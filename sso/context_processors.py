"""The sign-in page's "Sign in with <name>" (only when single sign-on is on)."""

from typing import Any

from django.http import HttpRequest
from django.urls import reverse

from sso.config import oidc_config


def sign_in(request: HttpRequest) -> dict[str, Any]:
    config = oidc_config()
    if not config.enabled:
        return {}
    return {
        "sso_sign_in": {
            "name": config.name,
            "url": reverse("oidc_authentication_init"),
            "only": config.only,
        }
    }
