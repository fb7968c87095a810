"""The whole system as real processes: redis-server, the web server, a Celery worker and beat.

Every test here commits its data (transactional db) in the PostgreSQL test database, and
the subprocesses use that same database, so they see the tokens and webhooks the test
creates, and the test sees the rows they write. Redis is a dedicated `redis-server` on a
free port per test module, so tests can stop and restart it without touching any other
Redis on the machine. Each test starts its own system (`system`, `make_system`): most of
them break it on purpose. The machinery is tests/support/system.py, the fixtures that
start it tests/live/conftest.py.

Skipped (with a reason) only when the database is not PostgreSQL or `redis-server` is not
on PATH; CI runs them. tests/live/clients uses the same system and needs no PostgreSQL: on
the embedded default its processes share the test database as a SQLite file (see
`django_db_modify_db_settings` in tests/conftest.py).
"""

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from django.test import override_settings

from accounts.tokens import token_create_for_agent, token_create_for_user
from notifications import services as webhooks
from notifications.models import Webhook
from tests.support.factories import ReviewerFactory
from tests.support.system import System, missing_requirement


@pytest.fixture(scope="module", autouse=True)
def _integration_requirements() -> None:
    reason = missing_requirement()
    if reason:
        pytest.skip(reason)


@pytest.fixture
def system_options() -> dict[str, Any]:
    """make_system's options for `system` (a test may parametrize it, e.g. PROCFILE_WORKER)."""
    return {}


@pytest.fixture
def system(make_system, system_options) -> System:
    return make_system(**system_options)


@pytest.fixture
def subscribe(transactional_db) -> Callable[..., Webhook]:
    """Subscribe a URL as an admin would (committed: the subprocesses see it)."""

    def subscribe(url: str, events: list[str] | None = None, secret: str = "") -> Webhook:
        with override_settings(BPM_WEBHOOK_ALLOWED_HOSTS=["127.0.0.1"]):
            return webhooks.webhook_add(url=url, event_types=events, secret=secret)

    return subscribe


@pytest.fixture
def agent_http(system, transactional_db) -> Iterator[httpx.Client]:
    """Agent 'agent-a' talking to the web server over real HTTP."""
    raw = token_create_for_agent(agent_id="agent-a")[1]
    with httpx.Client(
        base_url=system.base_url, headers={"Authorization": f"Bearer {raw}"}, timeout=20
    ) as client:
        yield client


@pytest.fixture
def reviewer_http(system, transactional_db) -> Iterator[httpx.Client]:
    """Reviewer 'alice' over real HTTP."""
    raw = token_create_for_user(user=ReviewerFactory(username="alice"))[1]
    with httpx.Client(
        base_url=system.base_url, headers={"Authorization": f"Bearer {raw}"}, timeout=20
    ) as client:
        yield client
