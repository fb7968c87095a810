"""Single sign-on against a real OpenID Connect provider (node-oidc-provider on 127.0.0.1):
the service is driven in-process through Django's test client, the provider over HTTP
(tests/live/sso/idp.py). No PostgreSQL needed: nothing here starts the service's processes."""

from collections.abc import Callable, Iterator

import pytest

from sso.discovery import forget_metadata
from tests.live.sso.idp import Browser, IdentityProvider, running_provider


@pytest.fixture(scope="module")
def idp(tmp_path_factory) -> Iterator[IdentityProvider]:
    """One provider for the module's tests; each test sets the people it needs."""
    with running_provider(tmp_path_factory.mktemp("idp"), [Browser.SERVICE]) as provider:
        yield provider


@pytest.fixture
def sso_on(idp, settings) -> IdentityProvider:
    """Single sign-on on, with `idp` as the provider (reviewers: bpm-reviewers, admins:
    bpm-admins, experts: dba and sre), the provider's state reset."""
    idp.state = {"accounts": {}, "jwks": "own"}
    idp.save()
    for name, value in idp.settings().items():
        setattr(settings, name, value)
    settings.BPM_PUBLIC_URL = Browser.SERVICE
    forget_metadata()
    yield idp
    forget_metadata()


@pytest.fixture
def new_browser(db) -> Iterator[Callable[[], Browser]]:
    """A new person's browser per call (own cookies at the service and the provider)."""
    opened: list[Browser] = []

    def make() -> Browser:
        opened.append(Browser())
        return opened[-1]

    yield make
    for each in opened:
        each.close()
