"""The Slack channel's tests, shared: the stand-in, a route to it, signed posts (fixtures:
register with `pytest_plugins = ["tests.support.slack"]`).

Every Slack call of the app is real HTTP from slack-sdk's WebClient to the stand-in on
127.0.0.1; every interaction is signed by hand (tests.standins.slack) and goes through
the view, with Django's test client or, for the end-to-end test, a live server.
"""

import json
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.utils import timezone

from audit.models import Event
from core.actors import Actor
from notifications.models import Delivery
from notifications.services import delivery_attempt
from policies.routes import route_add
from tests.standins.slack import SlackStandIn, signed_interaction
from tests.support.factories import AdminFactory, ReviewerFactory, UserFactory

BOT_TOKEN = "xoxb-test-0000-SECRET-bot-token"
SIGNING_SECRET = "test-signing-secret-8f1c"
CHANNEL = "C0REVIEW"
INTERACTIONS = "/integrations/slack/interactions"
PUBLIC_URL = "https://bpm.example.test"
# Slack user id -> email; the Django users are made by the `people` fixture.
SLACK_USERS = {
    "U0RITA": "Rita@Example.com",  # a reviewer (emails match case-insensitively)
    "U0NORA": "nora@example.com",  # an account without the reviewer role
    "U0TINA": "tina@example.com",  # a reviewer in group tech-lead
    "U0GHOST": "ghost@example.com",  # no account has this email
    "U0NOMAIL": "",  # a Slack profile without email
    "U0TWIN": "twin@example.com",  # two accounts share this email
}


@pytest.fixture
def standin(settings):
    """The Slack stand-in, and the app configured to use it."""
    slack = SlackStandIn(token=BOT_TOKEN, signing_secret=SIGNING_SECRET, users=SLACK_USERS)
    slack.start()
    settings.SLACK_BOT_TOKEN = BOT_TOKEN
    settings.SLACK_SIGNING_SECRET = SIGNING_SECRET
    settings.SLACK_API_URL = slack.url
    settings.BPM_PUBLIC_URL = PUBLIC_URL
    settings.BPM_NOTIFY_EMAIL = False
    yield slack
    slack.stop()


@pytest.fixture
def people(db):
    rita = ReviewerFactory(username="rita", email="rita@example.com")
    tina = ReviewerFactory(username="tina", email="tina@example.com")
    tina.groups.add(Group.objects.get_or_create(name="tech-lead")[0])
    return {
        "rita": rita,
        "tina": tina,
        "nora": UserFactory(username="nora", email="nora@example.com"),
        "twin1": ReviewerFactory(username="twin1", email="twin@example.com"),
        "twin2": ReviewerFactory(username="twin2", email="TWIN@example.com"),
        "admin": AdminFactory(username="root", email="root@example.com"),
    }


@pytest.fixture
def slack_route(people):
    """Every breakpoint is announced in channel C0REVIEW."""
    return route_add(
        actor=Actor.for_user(people["admin"]),
        name="all-to-slack",
        pattern="*",
        channels=[{"kind": "slack", "channel": CHANNEL}],
    )


def deliveries(bp, event_type: str = "created") -> list[Delivery]:
    return list(Delivery.objects.filter(breakpoint=bp, channel="slack", event_type=event_type))


def only(bp, event_type: str = "created") -> Delivery:
    rows = deliveries(bp, event_type)
    assert len(rows) == 1, rows
    return rows[0]


def attempt(delivery: Delivery) -> Delivery:
    """One worker attempt, now; the row as it is after it."""
    Delivery.objects.filter(pk=delivery.pk).update(
        next_attempt_at=timezone.now() - timedelta(seconds=1)
    )
    delivery_attempt(delivery.pk)
    return Delivery.objects.get(pk=delivery.pk)


def announce(bp) -> dict:
    """Send the created delivery; the reply ({"channel", "ts"}) of the posted message."""
    sent = attempt(only(bp))
    assert sent.status == "delivered", sent.last_error
    return sent.reply


def interact(client: Client, payload: dict, *, secret: str = SIGNING_SECRET, timestamp=None):
    body, headers = signed_interaction(payload, secret, timestamp)
    return post_raw(client, body, headers)


def post_raw(client: Client, body: bytes, headers: dict[str, str]):
    content_type = headers.pop("Content-Type", "application/x-www-form-urlencoded")
    return client.post(INTERACTIONS, data=body, content_type=content_type, headers=headers)


def events(bp, type_: str) -> list[Event]:
    return list(Event.objects.filter(breakpoint_id=bp.pk, type=type_))


def action_ids(blocks: list[dict]) -> list[str]:
    return [
        element.get("action_id")
        for block in blocks
        if block.get("type") == "actions"
        for element in block["elements"]
    ]


def all_text(blocks: list[dict] | str | None) -> str:
    """Every string in the blocks, for "shows X" assertions."""
    return json.dumps(blocks, ensure_ascii=False)
