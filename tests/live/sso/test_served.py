"""Single sign-on through the production web server (gunicorn, the uvicorn worker) with the
groups in the ID token (as Entra ID and Okta send them): a reviewer signs in, and loses
the console within the re-check time once the provider drops them from the group."""

import time
from collections.abc import Iterator

import httpx
import pytest

from tests.live.sso.idp import Browser, IdentityProvider
from tests.support.system import System

pytestmark = pytest.mark.postgres  # the web process shares the test database

QUEUE = "/admin/breakpoints/breakpoint/?status__exact=waiting"


@pytest.fixture
def served(
    transactional_db, redis_server, tmp_path, static_root
) -> Iterator[tuple[System, IdentityProvider]]:
    """The web server and the provider, each registered with the other's address."""
    idp = IdentityProvider(tmp_path, groups_in_id_token=True)
    env = idp.environment(
        STATIC_ROOT=str(static_root),
        BPM_OIDC_RECHECK_SECONDS="1",
        SESSION_COOKIE_SECURE="0",  # plain http on 127.0.0.1
        CSRF_COOKIE_SECURE="0",
    )
    system = System(redis_server, tmp_path, env)
    system.env["BPM_PUBLIC_URL"] = system.base_url
    try:
        idp.start([system.base_url])
        system.start(beat=False)
        yield system, idp
    finally:
        system.stop()
        idp.stop()


def test_a_reviewer_signs_in_through_the_web_server_and_loses_access_with_the_group(served):
    system, idp = served
    idp.person("rita", groups=["bpm-reviewers"])
    person = Browser(service=system.base_url)
    service = httpx.Client(base_url=system.base_url, timeout=10)
    try:
        start = service.get("/oidc/authenticate/")
        assert start.status_code == 302, start.text[:300]
        callback = person.at_provider(start.headers["location"], "rita")
        signed_in = service.get(callback.removeprefix(system.base_url))
        assert signed_in.status_code == 302, signed_in.text[:300]
        queue = service.get(QUEUE)
        assert queue.status_code == 200 and "Welcome" in queue.text

        idp.person("rita", groups=["bpm-alumni"])
        time.sleep(1.2)
        ended = service.get(QUEUE)

        assert ended.status_code == 403 and "You have no access" in ended.text
        assert service.get(QUEUE).status_code == 302  # signed out
    finally:
        service.close()
        person.close()
