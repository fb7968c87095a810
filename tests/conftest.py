"""Shared fixtures: API clients authenticated as agents (and for any user), breakpoints made
through the service, the suite's settings; the people (reviewers, admins) are in
tests/support/people.py."""

import json
import os
import re
from pathlib import Path

import pytest
from bpm_client import models as sdk
from bpm_client.errors import DecodeError
from django.conf import settings
from rest_framework.test import APIClient

from accounts.tokens import token_create_for_agent, token_create_for_user
from breakpoints.representation.expected_decision import aggregate
from breakpoints.services import breakpoint_create
from core.actors import Actor
from tests.support.receipts import TEST_KEYS_SETTING
from tests.support.system import POSTGRESQL_ENGINES

# Reviewers and admins, through the API and in the console: one definition each.
pytest_plugins = ["tests.support.people"]

# Tests under tests/live/ start processes (servers, workers, browsers, the whole system).
LIVE_TESTS = Path(__file__).resolve().parent / "live"
# Their systems' web, worker and beat processes share the test database: PostgreSQL only.
POSTGRES_TESTS = LIVE_TESTS / "integration"
DESELECTED = pytest.StashKey[dict[str, int]]()


def on_postgres() -> bool:
    """Whether the test database is PostgreSQL: DATABASE_URL names it (CI); else SQLite."""
    return settings.DATABASES["default"]["ENGINE"] in POSTGRESQL_ENGINES


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test under tests/live/ is `slow`, by its path: `make test-fast` (-m "not slow")
    leaves them out; `make test` runs them all. A test that needs PostgreSQL (marked
    `postgres`, or under tests/live/integration) runs only when DATABASE_URL names it, one
    that needs Redis (`redis`) only when REDIS_URL does, and one about the embedded default
    (`sqlite`) only on it: otherwise it is deselected (counted in the summary, with the
    reason), never skipped, never pointed at a server nobody named."""
    postgres = on_postgres()
    wanted = {
        "postgres": postgres,
        "sqlite": not postgres,
        "redis": bool(settings.REDIS_URL),
        "image": os.environ.get("BPM_TEST_IMAGE") == "1",
    }
    kept, deselected = [], []
    counts: dict[str, int] = {}
    for item in items:
        if item.path.is_relative_to(LIVE_TESTS):
            item.add_marker(pytest.mark.slow)
        if item.path.is_relative_to(POSTGRES_TESTS):
            item.add_marker(pytest.mark.postgres)
        missing = [name for name, ok in wanted.items() if not ok and item.get_closest_marker(name)]
        for name in missing:
            counts[name] = counts.get(name, 0) + 1
        (deselected if missing else kept).append(item)
    config.stash[DESELECTED] = counts
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = kept


WHY_DESELECTED = {
    "postgres": "they need PostgreSQL (marked `postgres`) and the test database is SQLite; "
    "set DATABASE_URL=postgres://... to run them (CI does)",
    "redis": "they need Redis (marked `redis`) and REDIS_URL is not set; set it to run "
    "them (CI does)",
    "image": "they build and run the container image (marked `image`); set "
    "BPM_TEST_IMAGE=1 to run them (.ci/run does, in its phase `image`)",
    "sqlite": "they are about the embedded default (marked `sqlite`) and the test database "
    "is PostgreSQL; CI runs them in `make test-fast` without DATABASE_URL",
}


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    for name, count in config.stash.get(DESELECTED, {}).items():
        terminalreporter.write_line(f"{count} deselected: {WHY_DESELECTED[name]}.")


# The SDK model of each breakpoint endpoint's success answer (first match wins: the
# many-status, groups and decisions paths come before the detail path they also match).
_ID = r"/api/breakpoints/[^/]+"
SDK_MODELS: list[tuple[str, re.Pattern[str], type[sdk.Model]]] = [
    ("GET", re.compile(r"/api/breakpoints/?"), sdk.BreakpointPage),
    ("POST", re.compile(r"/api/breakpoints/?"), sdk.Breakpoint),
    ("GET", re.compile(r"/api/breakpoints/status/?"), sdk.ManyStatus),
    ("GET", re.compile(r"/api/breakpoints/groups/?"), sdk.BreakpointGroups),
    ("POST", re.compile(r"/api/breakpoints/decisions/?"), sdk.DecisionOutcomes),
    ("GET", re.compile(rf"{_ID}/?"), sdk.Breakpoint),
    ("GET", re.compile(rf"{_ID}/status/?"), sdk.Status),
    ("GET", re.compile(rf"{_ID}/events/?"), sdk.EventList),
    ("POST", re.compile(rf"{_ID}/feedback/?"), sdk.FeedbackCreated),
    ("POST", re.compile(rf"{_ID}/(cancel|expire)/?"), sdk.StatusOnly),
]


def sdk_model_for(method: str, path: str) -> type[sdk.Model] | None:
    """The SDK model that decodes a 2xx answer to `method path`, if it is a breakpoint call."""
    for model_method, pattern, model in SDK_MODELS:
        if method == model_method and pattern.fullmatch(path):
            return model
    return None


class SdkCheckedClient(APIClient):
    """An APIClient whose breakpoint answers must decode strictly with the SDK's models.

    Every API test flow thereby checks the agent SDK (clients/python) against what the
    server really answers, not only against its schema.
    """

    def request(self, **kwargs):
        response = super().request(**kwargs)
        model = sdk_model_for(kwargs.get("REQUEST_METHOD", ""), kwargs.get("PATH_INFO", ""))
        is_json = response.get("Content-Type", "").startswith("application/json")
        if model and 200 <= response.status_code < 300 and is_json and not response.streaming:
            where = f"{kwargs['REQUEST_METHOD']} {kwargs['PATH_INFO']}"
            try:
                model.from_json(json.loads(response.content), strict=True)
            except DecodeError as error:
                pytest.fail(f"the SDK's {model.__name__} cannot decode {where}: {error}")
        return response


def bearer_client(raw_token: str) -> APIClient:
    client = SdkCheckedClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_token}")
    return client


@pytest.fixture
def agent_token(db) -> str:
    return token_create_for_agent(agent_id="agent-a")[1]


@pytest.fixture
def agent_client(agent_token) -> APIClient:
    """Agent 'agent-a'."""
    return bearer_client(agent_token)


@pytest.fixture
def other_agent_client(db) -> APIClient:
    """Agent 'agent-b'."""
    return bearer_client(token_create_for_agent(agent_id="agent-b")[1])


@pytest.fixture
def make_breakpoint(db):
    """Create a breakpoint through the service, as agent 'agent-a' unless told otherwise."""

    def make(agent_id: str = "agent-a", **fields):
        fields.setdefault("payload", {"question": "Approve the plan?", "title": "Plan Review"})
        bp, _ = breakpoint_create(actor=Actor.for_agent(agent_id), **fields)
        return bp

    return make


@pytest.fixture(scope="session")
def django_db_modify_db_settings(
    request, django_db_modify_db_settings_parallel_suffix, tmp_path_factory
) -> None:
    """On SQLite, a test database in a file when a test starts the live system
    (tests/live/clients): its web, worker and beat processes open the same file. Otherwise
    Django's in-memory one, as before."""
    database = settings.DATABASES["default"]
    live = any({"live", "make_system"} & set(item.fixturenames) for item in request.session.items)
    if database["ENGINE"] == "django.db.backends.sqlite3" and live:
        path = tmp_path_factory.mktemp("sqlite") / "test.sqlite3"
        database.setdefault("TEST", {})["NAME"] = str(path)


@pytest.fixture(autouse=True)
def _publish_inline(settings):
    """A committed transaction's publish runs in the request, so a test sees what was
    handed over when its transaction commits (tests/infra/test_publishing.py runs the thread)."""
    settings.BPM_PUBLISH_INLINE = True


@pytest.fixture(autouse=True)
def _no_decision_times():
    """Each test starts with no expectedDecision figures and no query to read them (this
    process's copy is shared by every test): a test of them refreshes the aggregate, which
    updates the copy, or calls aggregate.forget() to read it again."""
    aggregate.forget(empty=True)


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    """PBKDF2 costs ~0.3 s per user; tests only need hashing to round-trip."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def client_for(db):
    """An API client with a personal token for any user: client_for(user)."""

    def make(user) -> APIClient:
        return bearer_client(token_create_for_user(user=user)[1])

    return make


@pytest.fixture(autouse=True)
def _plain_static_storage(settings):
    """The suite runs with DEBUG off (manifest storage) but nothing was collected."""
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }


@pytest.fixture
def make_receiver():
    """Start real webhook receivers on 127.0.0.1: make_receiver(**options); closed after."""
    from tests.support.webhook_receiver import WebhookReceiver

    started = []

    def make(**options):
        receiver = WebhookReceiver(**options).start()
        started.append(receiver)
        return receiver

    yield make
    for receiver in started:
        receiver.close()


@pytest.fixture(autouse=True)
def _fixed_receipt_key(settings):
    """Receipts are signed with the suite's fixed test key, not a key made in var/."""
    settings.BPM_RECEIPT_KEYS = TEST_KEYS_SETTING


@pytest.fixture(autouse=True)
def _unhurried_rendering(settings):
    """Markdown and code render whole even on a loaded machine: a test that asserts rendered
    HTML must not meet the page's time budget. Tests of the budget set their own."""
    settings.BPM_RENDER_BUDGET_SECONDS = 30.0


@pytest.fixture(autouse=True)
def _fresh_rate_limit_counters(settings):
    """Each test starts with empty counters, in this process's memory (never a shared Redis)."""
    from django.core.cache import cache

    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "t"}
    }
    cache.clear()


@pytest.fixture
def sent_tasks(monkeypatch):
    """What is published through Celery (infra.publishing's current_app.send_task):
    (task name, args, the request id the publish ran in)."""
    from infra import publishing
    from infra.logging import current_request_id

    sent: list[tuple[str, tuple, str]] = []

    def send_task(name, args=(), **options):
        sent.append((name, args, current_request_id.get()))

    monkeypatch.setattr(publishing.current_app, "send_task", send_task)
    return sent
