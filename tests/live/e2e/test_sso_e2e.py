"""The whole single sign-on in Chromium: the console's "Sign in with SSO", the provider's
own sign-in page (node-oidc-provider on 127.0.0.1), back to the queue; a person in no
mapped group meets the no-access page; signing out ends the provider's session too."""

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import expect

from breakpoints.services import breakpoint_create
from core.actors import Actor
from sso.discovery import forget_metadata
from tests.live.e2e.conftest import needs_chromium
from tests.live.sso.idp import IdentityProvider, running_provider

pytestmark = [pytest.mark.e2e, needs_chromium, pytest.mark.django_db(transaction=True)]

QUEUE = "/admin/breakpoints/breakpoint/?status__exact=waiting"


@pytest.fixture(scope="module")
def e2e_idp(live_server, tmp_path_factory) -> Iterator[IdentityProvider]:
    with running_provider(tmp_path_factory.mktemp("idp"), [live_server.url]) as provider:
        yield provider


@pytest.fixture
def sso_console(e2e_idp, live_server, settings) -> IdentityProvider:
    for name, value in e2e_idp.settings(BPM_OIDC_NAME="Acme SSO").items():
        setattr(settings, name, value)
    settings.BPM_PUBLIC_URL = live_server.url
    forget_metadata()
    yield e2e_idp
    forget_metadata()


def sign_in_at_the_provider(page, login: str) -> None:
    page.get_by_role("link", name="Sign in with Acme SSO").click()
    page.wait_for_selector("input[name=login]")
    assert page.url.startswith("http://127.0.0.1:")  # the provider's own page
    page.fill("input[name=login]", login)
    page.fill("input[name=password]", "any password")
    page.click("button[type=submit]")


def test_a_reviewer_signs_in_with_the_provider_sees_the_queue_and_signs_out_at_both_ends(
    sso_console, live_server, new_page, screenshot
):
    sso_console.person("rita", groups=["bpm-reviewers"], name="Rita Hayworth")
    breakpoint_create(
        actor=Actor.for_agent("agent-7"),
        payload={"title": "Deploy billing", "question": "Ship it?"},
    )
    page = new_page()
    page.goto(f"{live_server.url}/admin/")
    expect(page.locator("#bpm-sso-sign-in")).to_have_text("Sign in with Acme SSO")
    screenshot(page, "sso-sign-in-page")

    sign_in_at_the_provider(page, "rita")

    page.wait_for_url(re.compile(re.escape(QUEUE) + "$"))
    expect(page.locator("#user-tools")).to_contain_text("Welcome, Rita")
    expect(page.get_by_text("Deploy billing")).to_be_visible()
    screenshot(page, "sso-queue")

    page.locator("#logout-form button").click()
    page.get_by_role("button", name="Yes, sign me out").click()
    page.wait_for_url(f"{live_server.url}/admin/login/")
    page.goto(f"{live_server.url}/admin/")
    page.get_by_role("link", name="Sign in with Acme SSO").click()
    page.wait_for_selector("input[name=login]")  # the provider asks again: its session ended


def test_a_person_in_no_mapped_group_meets_the_no_access_page(
    sso_console, live_server, new_page, screenshot
):
    sso_console.person("mallory", groups=["marketing"], email="mallory@example.com")
    page = new_page()
    page.goto(f"{live_server.url}/admin/")

    sign_in_at_the_provider(page, "mallory")

    expect(page.locator("#bpm-no-access")).to_contain_text("mallory@example.com")
    expect(page.locator("h1")).to_have_text("You have no access to Breakpoint Manager")
    screenshot(page, "sso-no-access")
    page.goto(f"{live_server.url}/admin/")
    expect(page.locator("#login-form")).to_be_visible()  # still signed out
