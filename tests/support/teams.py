"""The Teams channel's tests, shared: the stand-in, a route to it, signed presses (fixtures:
register with `pytest_plugins = ["tests.support.teams"]`).

Every connector call of the app is real HTTP to the stand-in on 127.0.0.1 (the token
endpoint, the OpenID metadata and keys included); every press is signed by the stand-in
and goes through the view, with Django's test client.
"""

import json
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.utils import timezone

from audit.models import Event
from channels.teams import auth
from core.actors import Actor
from notifications.models import Delivery
from notifications.services import delivery_attempt
from policies.routes import route_add
from tests.standins.teams import Member, TeamsStandIn
from tests.support.factories import AdminFactory, ReviewerFactory, UserFactory

APP_ID = "00000000-0000-4000-8000-00000000b07a"
APP_PASSWORD = "test-teams-client-secret-5d2e"
TENANT = "11111111-1111-4111-8111-111111111111"
CONVERSATION = "19:review@thread.tacv2"
MESSAGES = "/integrations/teams/messages"
PUBLIC_URL = "https://bpm.example.test"
MEMBERS = [
    Member("29:rita", "Rita@Example.com", "aaaaaaaa-0000-4000-8000-000000000001"),
    Member("29:nora", "nora@example.com", "aaaaaaaa-0000-4000-8000-000000000002"),
    Member("29:tina", "tina@example.com", "aaaaaaaa-0000-4000-8000-000000000003"),
    Member("29:ghost", "ghost@example.com", "aaaaaaaa-0000-4000-8000-000000000004"),
    Member("29:nomail", "", "aaaaaaaa-0000-4000-8000-000000000005"),
]


@pytest.fixture
def standin(settings):
    """The Bot Framework stand-in, and the app configured to use it."""
    teams = TeamsStandIn(
        app_id=APP_ID, app_password=APP_PASSWORD, tenant=TENANT, members=MEMBERS
    ).start()
    for name, value in teams.settings().items():
        setattr(settings, name, value)
    settings.BPM_PUBLIC_URL = PUBLIC_URL
    settings.BPM_NOTIFY_EMAIL = False
    auth.forget()
    yield teams
    auth.forget()
    teams.stop()


@pytest.fixture
def people(db):
    rita = ReviewerFactory(username="rita", email="rita@example.com")
    tina = ReviewerFactory(username="tina", email="tina@example.com")
    tina.groups.add(Group.objects.get_or_create(name="tech-lead")[0])
    return {
        "rita": rita,
        "tina": tina,
        "nora": UserFactory(username="nora", email="nora@example.com"),
        "admin": AdminFactory(username="root", email="root@example.com"),
    }


@pytest.fixture
def teams_route(people):
    """Every breakpoint is announced in the conversation CONVERSATION."""
    return route_add(
        actor=Actor.for_user(people["admin"]),
        name="all-to-teams",
        pattern="*",
        channels=[{"kind": "teams", "conversation": CONVERSATION}],
    )


def deliveries(bp, event_type: str = "created") -> list[Delivery]:
    return list(Delivery.objects.filter(breakpoint=bp, channel="teams", event_type=event_type))


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
    """Send the created delivery; its reply ({"conversation", "activity", "serviceUrl"})."""
    sent = attempt(only(bp))
    assert sent.status == "delivered", sent.last_error
    return sent.reply


def post_activity(client: Client, activity: dict, token: str | None):
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    return client.post(
        MESSAGES, data=json.dumps(activity), content_type="application/json", headers=headers
    )


def press(client: Client, standin: TeamsStandIn, reply: dict, user: str, verb: str, **kwargs):
    """`user` presses a button of the posted card (comment=, option=, forged=)."""
    forged = kwargs.pop("forged", "")
    activity = standin.invoke(reply["conversation"], reply["activity"], user, verb, **kwargs)
    return post_activity(client, activity, standin.token(forged=forged))


def events(bp, type_: str) -> list[Event]:
    return list(Event.objects.filter(breakpoint_id=bp.pk, type=type_))


def all_text(card: dict) -> str:
    """Every string of a card, for "shows X" assertions."""
    return json.dumps(card, ensure_ascii=False)
