"""A database that cannot be reached is a 503 `unavailable` with Retry-After on every path
(the envelope for machines, a page for people), and after the pool could not hand out a
connection the process answers so at once for a moment instead of waiting each time.

The live version (a real PostgreSQL refusing, the real server) is
tests/live/integration/test_database_outage.py; here the failure is injected under the ORM.
"""

from collections.abc import Iterator

import pytest
from django.db import OperationalError
from django.db.backends.utils import CursorWrapper
from django.test import Client
from psycopg_pool import PoolTimeout

from accounts.tokens import token_create_for_agent
from tests.support.factories import AdminFactory
from web import outage
from web.errors import unavailable_response

LIST = "/api/breakpoints"
QUEUE = "/admin/breakpoints/breakpoint/"


def pool_timeout() -> OperationalError:
    """What Django raises when the pool hands out no connection in time."""
    try:
        raise PoolTimeout("couldn't get a connection after 2.00 sec")
    except PoolTimeout as exc:
        try:
            raise OperationalError(str(exc)) from exc
        except OperationalError as wrapped:
            return wrapped


@pytest.fixture(autouse=True)
def _no_outage_left_behind() -> Iterator[None]:
    yield
    outage.reset()


@pytest.fixture
def database(monkeypatch, db) -> Iterator[dict]:
    """Switch the database off (`state["down"] = error`); count the queries that reach it."""
    state: dict = {"down": None, "queries": 0}
    original = CursorWrapper._execute_with_wrappers

    def execute(self, *args, **kwargs):
        state["queries"] += 1
        if state["down"] is not None:
            raise state["down"]
        return original(self, *args, **kwargs)

    monkeypatch.setattr(CursorWrapper, "_execute_with_wrappers", execute)
    yield state
    state["down"] = None  # back on, for the test database's own teardown


@pytest.fixture
def agent(db) -> Client:
    raw = token_create_for_agent(agent_id="agent-a")[1]
    return Client(raise_request_exception=False, HTTP_AUTHORIZATION=f"Bearer {raw}")


def assert_unavailable(response) -> None:
    assert response.status_code == 503
    assert int(response["Retry-After"]) >= 1


def test_an_api_request_without_a_connection_is_a_503_in_the_envelope(agent, database):
    database["down"] = pool_timeout()

    response = agent.get(LIST)

    assert_unavailable(response)
    assert response.json()["error"]["code"] == "unavailable"


def test_after_the_pool_failed_requests_are_refused_without_trying(agent, database, settings):
    settings.BPM_DATABASE_FAIL_FAST_SECONDS = 60
    database["down"] = pool_timeout()
    agent.get(LIST)
    database["down"] = None
    tried = database["queries"]

    assert_unavailable(agent.get(LIST))
    assert database["queries"] == tried
    outage.reset()  # the moment is over
    assert agent.get(LIST).status_code == 200


def test_a_query_failing_on_its_connection_is_a_503_that_does_not_hold_others_back(agent, database):
    database["down"] = OperationalError("server closed the connection unexpectedly")
    assert_unavailable(agent.get(LIST))
    database["down"] = None

    assert agent.get(LIST).status_code == 200


def test_the_console_gets_a_page_not_json(database):
    browser = Client(raise_request_exception=False)
    browser.force_login(AdminFactory(), backend="django.contrib.auth.backends.ModelBackend")
    database["down"] = pool_timeout()

    response = browser.get(QUEUE)

    assert_unavailable(response)
    assert response["Content-Type"].startswith("text/html")
    assert b"Temporarily unavailable" in response.content


@pytest.mark.parametrize(
    ("path", "json"),
    [
        ("/integrations/jira/webhook", True),
        ("/integrations/slack/interactions", True),
        ("/api/events/gh", True),
        ("/push/devices", True),
        ("/decide/some-token", False),
        ("/admin/login/", False),
    ],
)
def test_machines_get_the_envelope_and_people_a_page(path, json, rf):
    response = unavailable_response(rf.post(path))

    assert_unavailable(response)
    assert response["Content-Type"].startswith("application/json" if json else "text/html")


def test_other_failures_are_still_a_500(agent, database):
    database["down"] = ZeroDivisionError()

    response = agent.get(LIST)

    assert response.status_code == 500
    assert response.json()["error"]["code"] == "server_error"
    assert not outage.failing_fast()
