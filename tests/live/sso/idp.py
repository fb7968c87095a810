"""A real OpenID Connect provider for the tests: node-oidc-provider (provider/provider.mjs,
pinned by its lockfile), on a free 127.0.0.1 port, and a person's browser driven through
it.

`IdentityProvider` starts it with the clients a test registers (their redirect URIs) and
a state file the test rewrites between two sign-ins: each person's groups, email and
names (`person()`), and whether the provider publishes a key set that is not the one it
signs with (`publish_other_key()`: every ID token it issues is then forged, as the relying
party sees it). Any login name signs in (the provider's development interactions).

`Browser` is one person's browser: Django's test client for the service (cookies kept),
httpx with its own cookies for the provider, the redirects between them followed by hand
so a test can stop at the callback, change it, or replay it.
"""

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx
from django.test import Client

from tests.support.net import free_port
from tests.support.system import Process, wait_until

PROVIDER_DIR = Path(__file__).resolve().parent / "provider"
NPM_CI = ["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund"]
INSTALL_SECONDS = 600
CLIENT_ID = "breakpoint-manager"
CLIENT_SECRET = "a-client-secret-for-tests-only"
FORM_ACTION = re.compile(r'<form[^>]*action="([^"]+)"')
HIDDEN_INPUT = re.compile(r'<input type="hidden" name="([^"]+)" value="([^"]*)"')


def install_provider() -> None:
    """npm ci from the lockfile, when node_modules is not there yet (.ci/run does it too)."""
    if (PROVIDER_DIR / "node_modules" / "oidc-provider").exists():
        return
    assert shutil.which("npm"), "node and npm are needed: the tests run node-oidc-provider"
    done = subprocess.run(
        NPM_CI, cwd=PROVIDER_DIR, capture_output=True, text=True, timeout=INSTALL_SECONDS
    )
    assert done.returncode == 0, done.stderr[-3000:]


class IdentityProvider:
    """node-oidc-provider on 127.0.0.1, its accounts in a file the test writes."""

    def __init__(
        self,
        workdir: Path,
        *,
        groups_in_id_token: bool = False,
        token_auth_method: str | None = None,
    ):
        """`token_auth_method`: the client registered with it (client_secret_basic or
        client_secret_post) and the token endpoint taking the secret only that way, as
        Okta does; None: node-oidc-provider's default, which takes either."""
        self.workdir = workdir
        self.groups_in_id_token = groups_in_id_token
        self.token_auth_method = token_auth_method
        self.port = free_port()
        self.issuer = f"http://127.0.0.1:{self.port}"
        self.state_file = workdir / "idp-state.json"
        self.state: dict[str, Any] = {"accounts": {}, "jwks": "own"}
        self.save()
        self.process: Process | None = None

    def start(self, public_urls: list[str]) -> "IdentityProvider":
        """Serve, with one client whose redirect URIs are those of `public_urls` (the
        service's addresses as browsers reach it)."""
        install_provider()
        clients = [
            {
                "client_id": CLIENT_ID,
                "client_secret": CLIENT_SECRET,
                "redirect_uris": [f"{url}/oidc/callback/" for url in public_urls],
                "post_logout_redirect_uris": [f"{url}/admin/login/" for url in public_urls],
            }
        ]
        if self.token_auth_method is not None:
            clients[0]["token_endpoint_auth_method"] = self.token_auth_method
        env = {
            "PATH": os.environ.get("PATH", ""),
            "PORT": str(self.port),
            "CLIENTS": json.dumps(clients),
            "STATE_FILE": str(self.state_file),
            "GROUPS_IN_ID_TOKEN": "1" if self.groups_in_id_token else "0",
            "STRICT_CLIENT_AUTH": "0" if self.token_auth_method is None else "1",
        }
        node = ["node", str(PROVIDER_DIR / "provider.mjs")]
        self.process = Process("oidc-provider", node, env, self.workdir).start()
        wait_until(self._answers, what="oidc-provider's discovery document", logs=[self.process])
        return self

    def _answers(self) -> bool:
        try:
            url = f"{self.issuer}/.well-known/openid-configuration"
            return httpx.get(url, timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()

    def save(self) -> None:
        self.state_file.write_text(json.dumps(self.state))

    def person(self, login: str, *, groups: list[str], **claims: Any) -> None:
        """What the provider says about `login` from now on (its groups; email, name,
        preferred_username, email_verified when given)."""
        self.state["accounts"][login] = {"groups": groups, **claims}
        self.save()

    def publish_other_key(self, other: bool = True) -> None:
        self.state["jwks"] = "other-key" if other else "own"
        self.save()

    def environment(self, **overrides: str) -> dict[str, str]:
        """The same settings as environment variables, for the service's own processes."""
        values = self.settings()
        return {
            name: ",".join(value) if isinstance(value, list) else str(value)
            for name, value in values.items()
        } | overrides

    def settings(self, **overrides: Any) -> dict[str, Any]:
        """The service's settings for this provider (OIDC on)."""
        return {
            "BPM_OIDC_ISSUER": self.issuer,
            "BPM_OIDC_CLIENT_ID": CLIENT_ID,
            "BPM_OIDC_CLIENT_SECRET": CLIENT_SECRET,
            "BPM_OIDC_REVIEWER_GROUPS": ["bpm-reviewers"],
            "BPM_OIDC_ADMIN_GROUPS": ["bpm-admins"],
            "BPM_OIDC_EXPERT_GROUPS": ["dba", "sre"],
            **overrides,
        }


@contextmanager
def running_provider(
    workdir: Path, public_urls: list[str], **options: Any
) -> Iterator[IdentityProvider]:
    provider = IdentityProvider(workdir, **options).start(public_urls)
    try:
        yield provider
    finally:
        provider.stop()


class Browser:
    """One person's browser: the service through Django's test client, the provider
    through httpx; redirects between the two followed by hand."""

    SERVICE = "http://testserver"  # Django's test client's address

    def __init__(self, service: str = SERVICE) -> None:
        self.service = service
        self.client = Client()
        self.idp = httpx.Client(timeout=10, follow_redirects=False)

    def close(self) -> None:
        self.idp.close()

    def start(self, next_path: str = "") -> str:
        """GET /oidc/authenticate/: the provider's authorization URL it redirects to."""
        query = {"next": next_path} if next_path else {}
        response = self.client.get("/oidc/authenticate/", query)
        assert response.status_code == 302, response.content[:500]
        return response["Location"]

    def at_provider(self, url: str, login: str | None) -> str:
        """Follow the provider's pages from `url` (signing in as `login` when it asks) to
        the redirect back to the service; returns that callback URL."""
        for _ in range(20):
            if url.startswith(self.service):
                return url
            response = self.idp.get(url)
            if response.is_redirect:
                url = urljoin(url, response.headers["location"])
                continue
            assert response.status_code == 200, response.text[:500]
            assert login is not None, "the provider asks for a login: " + response.text[:300]
            action = urljoin(url, FORM_ACTION.search(response.text).group(1))
            posted = self.idp.post(
                action, data={"prompt": "login", "login": login, "password": "x"}
            )
            assert posted.is_redirect, posted.text[:500]
            url = urljoin(action, posted.headers["location"])
        raise AssertionError("too many redirects at the provider")

    def callback(self, url: str) -> Any:
        """The service's answer to the provider's redirect back (`url`, as the provider
        made it or as a test changed it)."""
        parts = urlsplit(url)
        return self.client.get(f"{parts.path}?{parts.query}")

    def sign_in(self, login: str, next_path: str = "") -> Any:
        """The whole sign-in; returns the callback's answer."""
        return self.callback(self.at_provider(self.start(next_path), login))

    def signed_in_user_id(self) -> Any:
        return self.client.session.get("_auth_user_id")

    def end_provider_session(self, url: str) -> str:
        """Open the provider's end-session `url`, answer its "sign out?" page with yes;
        returns where the provider sends the browser then."""
        page = self.idp.get(url)
        assert page.status_code == 200, page.text[:500]
        action = urljoin(url, FORM_ACTION.search(page.text).group(1))
        fields = dict(HIDDEN_INPUT.findall(page.text))
        done = self.idp.post(action, data={**fields, "logout": "yes"})
        assert done.is_redirect, done.text[:500]
        return urljoin(action, done.headers["location"])
