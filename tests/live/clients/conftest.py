"""The agent side (clients/python: SDK, `bpm` CLI, MCP server) against a live server.

The server is the whole system as real processes (tests/support/system.py): gunicorn with a
uvicorn worker, a Celery worker and beat (the TTL sweep runs every second), on the test
database and a dedicated redis-server. The test database is PostgreSQL's, or on the
embedded default a SQLite file (tests/conftest.py puts it in one when these tests run), so
these tests need only `redis-server` on PATH. The test commits tokens and users
(transactional db) so the server sees them; the clients talk to it over real HTTP.

A module's tests share one system (`module_system`): each creates its own breakpoints with
its own tokens, and its rows are flushed after it. A test that restarts the server is
marked `own_system` and gets a system of its own. (Not one per test process: a system
left running after its tests shares the test database with the tests that come next on
that process, and its sweeps then deliver their webhooks and evaluate their events.)
"""

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from bpm_client import Client

from accounts.tokens import token_create_for_agent, token_create_for_user
from tests.support.factories import AdminFactory, ReviewerFactory
from tests.support.system import System, missing_requirement

BPM = str(Path(sys.executable).parent / "bpm")
LIVE_ENV = {"BPM_WAIT_RECHECK_SECONDS": "2"}

# Runs a command as a terminal's Ctrl-C finds it: SIGINT neither ignored nor blocked. A
# subprocess inherits both from the test runner, and a shell that started the runner in the
# background leaves SIGINT ignored (an ignored SIGINT survives exec; a Python started so
# never turns it into KeyboardInterrupt).
_DEFAULT_SIGINT = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT}); "
    "os.execv(sys.argv[1], sys.argv[1:])"
)


def with_default_sigint(command: list[str]) -> list[str]:
    """`command`, started with SIGINT's default disposition (see _DEFAULT_SIGINT)."""
    return [sys.executable, "-c", _DEFAULT_SIGINT, *command]


@pytest.fixture(scope="module", autouse=True)
def _integration_requirements(django_db_setup) -> None:
    """As tests/live/integration's, but any test database the server can share will do."""
    reason = missing_requirement(postgres=False)
    if reason:
        pytest.skip(reason)


@pytest.fixture(scope="module")
def module_system_options() -> dict[str, Any]:
    return {"env": LIVE_ENV}


@pytest.fixture
def live(request, transactional_db) -> System:
    """The running system; `live.base_url`, `live.restart_web()`: the module's, or one of the
    test's own when it is marked `own_system`."""
    if request.node.get_closest_marker("own_system"):
        return request.getfixturevalue("make_system")(env=LIVE_ENV)
    return request.getfixturevalue("module_system")


@pytest.fixture
def agent_token(live, transactional_db) -> str:
    """Agent 'agent-a'."""
    return token_create_for_agent(agent_id="agent-a")[1]


@pytest.fixture
def reviewer_token(live, transactional_db) -> str:
    """Reviewer 'alice'."""
    return token_create_for_user(user=ReviewerFactory(username="alice"))[1]


@pytest.fixture
def admin_token(live, transactional_db) -> str:
    return token_create_for_user(user=AdminFactory(username="root-admin"))[1]


@pytest.fixture
def bpm_env(live, agent_token) -> dict[str, str]:
    """The environment a shell-out to `bpm` gets: the server and the agent's token."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("BPM_")}
    return {**base, "BPM_URL": live.base_url, "BPM_TOKEN": agent_token, "NO_COLOR": "1"}


@pytest.fixture
def agent(live, agent_token) -> Iterator[Client]:
    """A strict SDK client as agent-a (strict: every answer must match the models exactly)."""
    with Client(live.base_url, agent_token, strict=True) as client:
        yield client


@pytest.fixture
def reviewer(live, reviewer_token) -> Iterator[Client]:
    with Client(live.base_url, reviewer_token, strict=True) as client:
        yield client
