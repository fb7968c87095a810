"""The JIRA channel's tests, shared: the stand-in and an audit route to it (fixtures: register
with `pytest_plugins = ["tests.support.jira"]`), its deliveries, and the webhook JIRA posts
when a person moves an issue."""

import json
import re

import httpx
import pytest

from core.actors import Actor
from notifications.models import Delivery
from notifications.services import delivery_attempt
from policies.routes import route_add
from tests.standins.jira import JiraStandIn

TOKEN = "jira-test-token-s3cr3t"


@pytest.fixture
def jira(settings):
    standin = JiraStandIn(users={"bpm-bot": TOKEN}).start()
    settings.JIRA_URL = standin.url
    settings.JIRA_USER = "bpm-bot"
    settings.JIRA_TOKEN = TOKEN
    settings.BPM_PUBLIC_URL = "https://bpm.example.test"
    yield standin
    standin.stop()


@pytest.fixture
def audit_route(admin_user):
    """Breakpoints tagged `audit` are audit-required: a JIRA issue in OPS each."""
    return route_add(
        actor=Actor.for_user(admin_user),
        name="audit",
        pattern="*(tags contains 'audit')",
        channels=[{"kind": "jira", "project": "OPS"}],
    )


@pytest.fixture
def audited(jira, audit_route, make_breakpoint):
    """make an audit-required breakpoint: audited(**fields)."""

    def make(**fields):
        fields.setdefault("tags", ["audit"])
        return make_breakpoint(**fields)

    return make


def deliveries(bp, event_type: str) -> list[Delivery]:
    return list(Delivery.objects.filter(breakpoint=bp, channel="jira", event_type=event_type))


def only(bp, event_type: str) -> Delivery:
    rows = deliveries(bp, event_type)
    assert len(rows) == 1, rows
    return rows[0]


def attempt(delivery: Delivery):
    return delivery_attempt(delivery.pk)


def created_issue(bp) -> str:
    """Deliver the breakpoint's `created` delivery; the issue key it recorded."""
    delivery = only(bp, "created")
    assert attempt(delivery).status == "delivered"
    delivery.refresh_from_db()
    return delivery.reply["key"]


def blocks(text: str) -> list[str]:
    """The {noformat} blocks of a wiki text, as written between the markers."""
    return re.findall(r"\{noformat\}\n(.*?)\n\{noformat\}", text, flags=re.DOTALL)


URL = "/integrations/jira/webhook"


SECRET = "jira-hook-s3cret"


TRANSITION_IDS = {"Approved": "11", "Rejected": "21", "Done": "31"}


def move(jira, key: str, to: str, *, as_user: str = "alice@example.com", comment: str = ""):
    """A person moves the issue in JIRA; the webhook payload JIRA sends for it."""
    body: dict = {"transition": {"id": TRANSITION_IDS[to]}}
    if comment:
        body["update"] = {"comment": [{"add": {"body": comment}}]}
    token = jira.users[as_user]
    answer = httpx.post(
        f"{jira.url}/rest/api/2/issue/{key}/transitions", json=body, auth=(as_user, token)
    )
    assert answer.status_code == 204, answer.text
    return jira.webhooks[-1]


def post(client, payload, *, secret: str | None = SECRET, raw: bytes | None = None, **headers):
    url = URL if secret is None else f"{URL}?secret={secret}"
    data = raw if raw is not None else json.dumps(payload)
    return client.post(url, data=data, content_type="application/json", **headers)
