"""Four eyes through the real processes (issue 30's probe, replayed): gunicorn's workers,
the Celery worker and beat on the test database. Alice makes an auto-approve rule with the
console's "Always approve" on someone else's breakpoint, then her agent asks for four eyes
on the same key, naming her in look-alike ways: the breakpoint waits for another person,
whatever alice does, until bob decides it."""

import re

import httpx
from django.test import Client, override_settings

from accounts.tokens import token_create_for_agent, token_create_for_user
from tests.live.clients.conftest import LIVE_ENV
from tests.support.console import action_url, review_url
from tests.support.factories import ReviewerFactory

# Plain HTTP here: the CSRF cookie may travel without TLS.
INSECURE_COOKIES = {"CSRF_COOKIE_SECURE": "0"}


def _csrf(page: httpx.Response) -> str:
    found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert found, page.text[:500]
    return found.group(1)


def _console_session(system, user) -> httpx.Client:
    """A browser with `user`'s console session, signed with the server's key."""
    with override_settings(SECRET_KEY=system.env["SECRET_KEY"]):
        client = Client()
        client.force_login(user, backend="django.contrib.auth.backends.ModelBackend")
        session = client.cookies["sessionid"].value
    browser = httpx.Client(base_url=system.base_url, follow_redirects=True, timeout=30)
    browser.cookies.set("sessionid", session)
    return browser


def _always_approve(browser: httpx.Client, base_url: str, breakpoint_id: str) -> None:
    review = browser.get(review_url(breakpoint_id))
    url = action_url("always_approve", breakpoint_id)
    response = browser.post(
        url,
        data={"comment": "", "confirm": "yes", "csrfmiddlewaretoken": _csrf(review)},
        headers={"Referer": base_url + url},
    )
    assert response.status_code == 200, response.text[:500]


def test_nothing_lets_the_requester_walk_around_four_eyes(make_system, transactional_db):
    live = make_system(env={**LIVE_ENV, **INSECURE_COOKIES})
    alice = ReviewerFactory(username="alice")
    bob = ReviewerFactory(username="bob")
    other = httpx.Client(
        base_url=live.base_url,
        headers={"Authorization": f"Bearer {token_create_for_agent(agent_id='agent-b')[1]}"},
        timeout=30,
    )
    agent_alice = httpx.Client(
        base_url=live.base_url,
        headers={
            "Authorization": "Bearer "
            + token_create_for_agent(agent_id="agent-alice", owner="alice")[1]
        },
        timeout=30,
    )
    reviewer = {"alice": token_create_for_user(user=alice)[1]}
    reviewer["bob"] = token_create_for_user(user=bob)[1]

    # 1. alice approves someone else's deploy.prod with "Always approve": a rule by her.
    theirs = other.post("/api/breakpoints", json={"payload": {"breakpointId": "deploy.prod"}})
    _always_approve(_console_session(live, alice), live.base_url, theirs.json()["breakpointId"])
    assert (
        other.get(f"/api/breakpoints/{theirs.json()['breakpointId']}").json()["status"]
        == "released"
    )

    # 2. Her agent asks for four eyes on the same key: it waits, saying why.
    payload = {"breakpointId": "deploy.prod", "preventSelfReview": True, "question": "Ship?"}
    mine = agent_alice.post("/api/breakpoints", json={"requestedBy": "alice", "payload": payload})
    assert mine.status_code == 201, mine.text
    assert mine.json()["status"] == "waiting"
    assert "Four eyes" in mine.json()["autoApproval"]["reason"]

    # 3. Naming bob, or alice in disguise, does not make alice a stranger to it.
    for name, status in (("bob", 403), ("аlice", 403), ("alice\u200b", 400)):
        spoofed = agent_alice.post(
            "/api/breakpoints", json={"requestedBy": name, "payload": payload}
        )
        assert spoofed.status_code == status, (name, spoofed.text)
    fullwidth = agent_alice.post(
        "/api/breakpoints", json={"requestedBy": "ａｌｉｃｅ", "payload": payload}
    )
    assert fullwidth.json()["requestedBy"] == "alice"

    # 4. alice cannot decide it; bob can, and the result names him.
    def release_as(name: str) -> httpx.Response:
        return httpx.post(
            f"{live.base_url}/api/breakpoints/{mine.json()['breakpointId']}/feedback",
            json={"comment": "ship it", "release": True, "approved": True},
            headers={"Authorization": f"Bearer {reviewer[name]}"},
            timeout=30,
        )

    as_alice = release_as("alice")
    assert as_alice.status_code == 403, as_alice.text
    as_bob = release_as("bob")
    assert as_bob.status_code == 201, as_bob.text
    assert as_bob.json()["result"]["respondedBy"] == "bob"
