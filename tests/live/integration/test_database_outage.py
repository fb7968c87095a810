"""Faults: the database refuses connections. Every path answers 503 + Retry-After quickly,
then the service recovers by itself and a retried create is made exactly once.

The web server (and worker and beat) reach PostgreSQL through a TCP proxy that the test
switches to refuse: pooled connections are cut and new ones refused, as when the database
restarts. Nothing else on the machine sees the outage.
"""

import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from django.db import connection
from django.test import Client, override_settings

from accounts.tokens import token_create_for_agent, token_create_for_user
from breakpoints.models import Breakpoint
from channels.email.links import APPROVE, Link, new_nonce
from tests.live.integration.tcp_proxy import TcpProxy
from tests.support.factories import AdminFactory, ReviewerFactory
from tests.support.system import System, database_url

pytestmark = pytest.mark.django_db(transaction=True)

# The client gives up after this: before the fix every path hung DATABASE_POOL_TIMEOUT
# (10 s) and answered 500.
ANSWER_WITHIN_SECONDS = 5.0
QUESTION = {"payload": {"question": "Made during the outage?"}}


@pytest.fixture
def database_proxy() -> Iterator[TcpProxy]:
    settings_dict = connection.settings_dict
    proxy = TcpProxy(settings_dict.get("HOST") or "127.0.0.1", int(settings_dict["PORT"] or 5432))
    try:
        yield proxy
    finally:
        proxy.close()


@pytest.fixture
def system(make_system, database_proxy) -> System:
    return make_system(env={"DATABASE_URL": database_url(via_port=database_proxy.port)})


def console_session(system: System) -> str:
    """An admin's console session cookie, signed with the server's key."""
    with override_settings(SECRET_KEY=system.env["SECRET_KEY"]):
        browser = Client()
        browser.force_login(AdminFactory(), backend="django.contrib.auth.backends.ModelBackend")
        return browser.cookies["sessionid"].value


def decision_link(system: System, bp_id: str, user_id: int) -> str:
    with override_settings(SECRET_KEY=system.env["SECRET_KEY"]):
        return "/decide/" + Link(bp_id, user_id, new_nonce(), APPROVE).as_token()


def every_path(system: System, agent: str, reviewer, bp_id: str, key: str) -> dict:
    """One request on each kind of path: name -> (method, path, headers, json body)."""
    as_agent = {"Authorization": f"Bearer {agent}"}
    as_reviewer = {"Authorization": f"Bearer {reviewer[1]}"}
    return {
        "create": ("POST", "/api/breakpoints", {**as_agent, "Idempotency-Key": key}, QUESTION),
        "feedback": (
            "POST",
            f"/api/breakpoints/{bp_id}/feedback",
            as_reviewer,
            {"comment": "Ship it", "release": True},
        ),
        "list": ("GET", "/api/breakpoints", as_agent, None),
        "detail": ("GET", f"/api/breakpoints/{bp_id}", as_agent, None),
        "status": ("GET", f"/api/breakpoints/{bp_id}/status", as_agent, None),
        "event ingest": ("POST", "/api/events/gh", {}, {"action": "opened"}),
        "console": (
            "GET",
            "/admin/breakpoints/breakpoint/",
            {"Cookie": f"sessionid={console_session(system)}"},
            None,
        ),
        "decision page": ("GET", decision_link(system, bp_id, reviewer[0].pk), {}, None),
    }


def send(system: System, request: tuple) -> httpx.Response:
    method, path, headers, body = request
    return httpx.request(
        method,
        system.base_url + path,
        headers=headers,
        json=body,
        timeout=ANSWER_WITHIN_SECONDS,
        follow_redirects=False,
    )


def answered(response: httpx.Response) -> httpx.Response | None:
    return None if response.status_code == 503 else response


def test_a_database_refusing_connections_is_a_quick_503_everywhere_then_nothing_is_lost(
    system, database_proxy
):
    agent = token_create_for_agent(agent_id="agent-a")[1]
    user = ReviewerFactory(username="alice")
    reviewer = (user, token_create_for_user(user=user)[1])
    key = uuid.uuid4().hex
    warm = httpx.post(
        f"{system.base_url}/api/breakpoints",
        json={"payload": {"question": "Before the outage?"}},
        headers={"Authorization": f"Bearer {agent}"},
        timeout=20,
    )
    assert warm.status_code == 201, warm.text
    requests = every_path(system, agent, reviewer, warm.json()["breakpointId"], key)
    signed_in = send(system, requests["console"])
    assert signed_in.status_code == 200, signed_in.headers.get("location")  # the queue

    database_proxy.refuse()
    answers = {name: send(system, request) for name, request in requests.items()}
    print(
        "\nWith the database refusing:",
        {n: f"{a.elapsed.total_seconds():.2f}s" for n, a in answers.items()},
    )

    for name, answer in answers.items():
        assert answer.status_code == 503, (name, answer.status_code, answer.text[:300])
        assert int(answer.headers["Retry-After"]) >= 1, name
    for name in ("create", "feedback", "list", "detail", "status", "event ingest"):
        assert answers[name].json()["error"]["code"] == "unavailable", name
    for name in ("console", "decision page"):
        assert answers[name].headers["Content-Type"].startswith("text/html"), name
        assert "Temporarily unavailable" in answers[name].text, name

    database_proxy.accept()
    created = system.wait_until(
        lambda: answered(send(system, requests["create"])),
        what="a create to be answered after the database is back",
    )
    again = send(system, requests["create"])

    assert created.status_code == 201, created.text
    assert again.status_code == 200
    assert again.json()["breakpointId"] == created.json()["breakpointId"]
    assert Breakpoint.objects.filter(payload__question=QUESTION["payload"]["question"]).count() == 1
    feedback = send(system, requests["feedback"])
    assert feedback.status_code in (200, 201), feedback.text


def test_once_the_database_is_back_no_request_fails_on_a_connection_cut_while_idle(
    system, database_proxy
):
    """The pooled connections are cut while idle (as by a database restart) and the
    database answers again at once: no request may be handed a dead connection."""
    agent = {"Authorization": f"Bearer {token_create_for_agent(agent_id='agent-a')[1]}"}
    url = f"{system.base_url}/api/breakpoints"
    with ThreadPoolExecutor(max_workers=8) as pool:  # several connections in each pool
        warm = list(pool.map(lambda _: httpx.get(url, headers=agent, timeout=20), range(32)))
    assert {response.status_code for response in warm} == {200}

    database_proxy.refuse()  # every pooled connection is cut ...
    database_proxy.accept()  # ... and the database answers again
    time.sleep(0.5)  # the connections sit idle, dead, in the pools

    answers = [httpx.get(url, headers=agent, timeout=20).status_code for _ in range(24)]
    assert answers == [200] * 24, answers
