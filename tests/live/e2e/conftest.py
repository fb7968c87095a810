"""Browser tests: a live server, headless Chromium driven by Playwright's sync API."""

from pathlib import Path

import pytest
from django.conf import settings

from tests.support.api import Agent
from tests.support.factories import PASSWORD, AdminFactory, ReviewerFactory

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = Path(settings.BASE_DIR) / "artifacts"

needs_chromium = pytest.mark.skipif(
    not Path(CHROMIUM).exists(),
    reason=f"{CHROMIUM} is missing: install Chromium (apt-get install chromium) to run e2e tests",
)


@pytest.fixture(scope="package", autouse=True)
def _orm_beside_playwright():
    """Playwright's sync API runs an event loop in this thread; Django's ORM calls from the
    test bodies are still synchronous and safe. Allowed for these tests only."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        yield


@pytest.fixture(scope="package")
def chromium():
    """One browser for the e2e tests, stopped after them (never session-wide).

    While Playwright's sync API runs, this thread has a running event loop, so Django keeps
    its connections here in a separate, context-var storage. A later test would then open
    a pooled connection that no one closes, and the test database could not be dropped.
    """
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def new_page(chromium):
    """A fresh browser context (own cookies) per call; all closed after the test."""
    contexts = []

    def make():
        context = chromium.new_context(viewport={"width": 1440, "height": 900})
        context.set_default_timeout(10_000)
        contexts.append(context)
        return context.new_page()

    yield make
    for context in contexts:
        context.close()


@pytest.fixture
def e2e_reviewer(transactional_db):
    return ReviewerFactory(username="rita")


@pytest.fixture
def e2e_admin(transactional_db):
    return AdminFactory(username="adam")


@pytest.fixture
def login(live_server):
    """Log `user` in through the real login form; returns the page on the landing page,
    the queue filtered to waiting."""

    def do(page, user):
        page.goto(f"{live_server.url}/admin/")
        page.fill("#id_username", user.get_username())
        page.fill("#id_password", PASSWORD)
        page.click("input[type=submit]")
        page.wait_for_selector("#site-name")
        assert "/admin/login/" not in page.url
        assert page.url.endswith("/admin/breakpoints/breakpoint/?status__exact=waiting")
        return page

    return do


@pytest.fixture
def screenshot():
    def save(page, name: str) -> Path:
        ARTIFACTS.mkdir(exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return save


@pytest.fixture
def agent(live_server):
    """An agent with its own token, over HTTP to the live server; closed after the test."""
    agent = Agent(live_server.url)
    yield agent
    agent.http.close()
