"""The JIRA webhook through the real processes: the web server asks the JIRA stand-in who made
a change, and the worker undoes a refused one in JIRA (issue 47, item 8)."""

import json
from collections.abc import Iterator

import httpx
import pytest

from breakpoints.models import Breakpoint
from core.actors import Actor
from policies.routes import route_add
from tests.standins.jira import JiraStandIn
from tests.support.factories import AdminFactory, ReviewerFactory, UserFactory

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "jira-live-s3cret"
BOT_TOKEN = "jira-live-bot-token"
BOB, MALLORY = "bob@example.com", "mallory@elsewhere.test"
TRANSITION_IDS = {"Approved": "11", "Rejected": "21"}


@pytest.fixture
def jira() -> Iterator[JiraStandIn]:
    standin = JiraStandIn(
        users={"bpm-bot": BOT_TOKEN, BOB: "bob-token", MALLORY: "mallory-token"}
    ).start()
    yield standin
    standin.stop()


@pytest.fixture
def system(make_system, jira):
    env = {
        "JIRA_URL": jira.url,
        "JIRA_USER": "bpm-bot",
        "JIRA_TOKEN": BOT_TOKEN,
        "JIRA_WEBHOOK_SECRET": SECRET,
    }
    return make_system(env=env, beat=False)


@pytest.fixture
def audited_issue(system, jira, agent_http) -> tuple[str, str]:
    """An audit-required breakpoint whose issue the worker created: (breakpoint id, key)."""
    route_add(
        actor=Actor.for_user(AdminFactory(username="root")),
        name="audit",
        pattern="*(tags contains 'audit')",
        channels=[{"kind": "jira", "project": "OPS"}],
    )
    created = agent_http.post(
        "/api/breakpoints",
        json={"tags": ["audit"], "payload": {"question": "Rotate keys?", "title": "Keys"}},
    )
    assert created.status_code == 201, created.text
    system.wait_until(lambda: "OPS-1" in jira.issues, what="the JIRA issue")
    return created.json()["breakpointId"], "OPS-1"


def move(jira: JiraStandIn, key: str, to: str, as_user: str) -> dict:
    answer = httpx.post(
        f"{jira.url}/rest/api/2/issue/{key}/transitions",
        json={"transition": {"id": TRANSITION_IDS[to]}},
        auth=(as_user, jira.users[as_user]),
    )
    assert answer.status_code == 204, answer.text
    return json.loads(json.dumps(jira.webhooks[-1]))


def deliver(system, payload: dict) -> dict:
    answer = httpx.post(
        f"{system.base_url}/integrations/jira/webhook?secret={SECRET}", json=payload, timeout=30
    )
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_a_forged_user_is_refused_and_undone_in_jira_then_the_real_reviewer_decides(
    system, jira, audited_issue
):
    bp_id, key = audited_issue
    ReviewerFactory(username="bob", email=BOB)
    UserFactory(username="mallory", email=MALLORY)
    forged = move(jira, key, "Approved", as_user=MALLORY)
    forged["user"] = jira._user_json(BOB)  # the body names bob; JIRA's changelog, mallory

    assert deliver(system, forged)["outcome"] == "refused"

    assert Breakpoint.objects.get(pk=bp_id).status == "waiting"
    system.wait_until(lambda: jira.issues[key].status == "To Do", what="the move undone")
    bot_comments = [
        c["body"] for c in jira.issues[key].comments if c["author"]["name"] == "bpm-bot"
    ]
    assert any(f"Approved by {MALLORY} was refused" in body for body in bot_comments)

    assert deliver(system, move(jira, key, "Approved", as_user=BOB))["outcome"] == "released"
    bp = Breakpoint.objects.get(pk=bp_id)
    assert (bp.status, bp.result["respondedBy"]) == ("released", "bob")
    system.wait_until(lambda: jira.issues[key].status == "Done", what="the outcome in JIRA")
