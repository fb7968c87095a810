"""Requests to the Teams messaging endpoint that must not decide: without a Bot Framework
token, or with a forged, expired or foreign one (401, one WARNING, nothing else), and
malformed ones (400); the keys are fetched from the OpenID metadata and cached."""

import logging

import pytest

from audit.models import Event
from breakpoints.models import Feedback
from channels.teams import auth
from tests.standins.teams import FORGERIES
from tests.support.teams import (
    CONVERSATION,
    announce,
    post_activity,
    press,
)

pytest_plugins = ["tests.support.teams"]  # standin, people, teams_route

PLAN = {"title": "Deploy", "question": "Ship it?"}


@pytest.fixture
def posted(standin, teams_route, make_breakpoint, people):
    bp = make_breakpoint(payload=PLAN)
    return bp, announce(bp)


def assert_untouched(bp) -> None:
    bp.refresh_from_db()
    assert bp.status == "waiting"
    assert not Feedback.objects.filter(breakpoint_id=bp.pk).exists()
    assert sorted(Event.objects.filter(breakpoint_id=bp.pk).values_list("type", flat=True)) == [
        "created",
        "notification",
    ]


@pytest.mark.parametrize("forged", FORGERIES)
def test_a_forged_or_foreign_token_is_refused_and_logged(standin, posted, client, caplog, forged):
    bp, reply = posted
    caplog.set_level(logging.WARNING, logger="breakpoints.audit")

    response = press(client, standin, reply, "29:rita", "approve", forged=forged)

    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"
    assert_untouched(bp)
    (record,) = [r for r in caplog.records if r.name == "breakpoints.audit"]
    expected = {
        "other-key": "bad signature",
        "expired": "expired token",
        "audience": "wrong audience",
        "issuer": "wrong issuer",
        "serviceurl": "the token's serviceurl is not the activity's serviceUrl",
        "no-serviceurl": "the token names no serviceurl",
        "none": "not signed with RS256",
    }
    assert record.teams_refusal == expected[forged]


@pytest.mark.parametrize(
    "header",
    ["", "Basic cml0YTpzZWNyZXQ=", "Bearer ", "Bearer not.a.jwt", "Bearer " + "a" * 9000],
    ids=["none", "basic", "empty", "garbage", "huge"],
)
def test_no_usable_bearer_token_is_refused(standin, posted, client, header):
    bp, reply = posted
    activity = standin.invoke(reply["conversation"], reply["activity"], "29:rita", "approve")
    headers = {"Authorization": header} if header else {}
    response = client.post(
        "/integrations/teams/messages",
        data=activity,
        content_type="application/json",
        headers=headers,
    )
    assert response.status_code == 401
    assert_untouched(bp)


def key_fetches(standin) -> int:
    return len([call for call in standin.calls if call[1].endswith("/keys")])


def test_a_rotated_key_is_fetched_once_and_accepted(standin, posted, client):
    bp, reply = posted
    press(client, standin, reply, "29:rita", "approve", forged="expired")  # keys fetched
    standin.kid = "rotated"  # Microsoft publishes the key under a new kid
    auth._keys.fetched_at -= auth.REFETCH_SECONDS + 1  # the last fetch is a minute old
    fetched = key_fetches(standin)

    response = press(client, standin, reply, "29:rita", "approve")

    assert response.status_code == 200
    assert key_fetches(standin) == fetched + 1
    bp.refresh_from_db()
    assert bp.status == "released"


def test_a_key_id_never_published_is_refused_after_one_refetch(standin, posted, client):
    bp, reply = posted
    press(client, standin, reply, "29:rita", "approve", forged="expired")  # keys fetched
    auth._keys.fetched_at -= auth.REFETCH_SECONDS + 1
    fetched = key_fetches(standin)
    activity = standin.invoke(reply["conversation"], reply["activity"], "29:rita", "approve")

    assert post_activity(client, activity, standin.token(kid="made-up")).status_code == 401
    assert post_activity(client, activity, standin.token(kid="made-up-2")).status_code == 401

    assert key_fetches(standin) == fetched + 1  # the second unknown kid asks nobody
    assert_untouched(bp)


def test_a_key_not_endorsed_for_teams_is_refused(standin, posted, client):
    bp, reply = posted
    activity = standin.invoke(reply["conversation"], reply["activity"], "29:rita", "approve")
    activity["channelId"] = "webchat"

    assert post_activity(client, activity, standin.token()).status_code == 401
    assert_untouched(bp)


def test_keys_out_of_reach_are_a_503_not_a_decision(standin, posted, client, settings):
    bp, reply = posted
    settings.TEAMS_OPENID_METADATA_URL = f"{standin.url}/nowhere"

    response = press(client, standin, reply, "29:rita", "approve")

    assert response.status_code == 503
    assert response["Retry-After"] == "30"
    assert response.json()["error"]["code"] == "unavailable"
    assert_untouched(bp)


def test_without_an_app_id_teams_is_off(standin, posted, client, settings):
    bp, reply = posted
    settings.TEAMS_APP_ID = ""
    assert press(client, standin, reply, "29:rita", "approve").status_code == 503
    assert_untouched(bp)


def test_only_post(standin, client):
    assert client.get("/integrations/teams/messages").status_code == 405


@pytest.mark.parametrize(
    "body",
    [b"", b"not json", b"[1, 2]", b'{"no": "type"}', b"[" * 5000, b'{"type": "a\\u0000b"}'],
    ids=["empty", "not-json", "array", "no-type", "deep", "nul"],
)
def test_a_malformed_body_with_a_good_token_is_a_400(standin, posted, client, body):
    bp, _ = posted
    response = client.post(
        "/integrations/teams/messages",
        data=body,
        content_type="application/json",
        headers={"Authorization": f"Bearer {standin.token()}"},
    )
    assert response.status_code == 400
    assert_untouched(bp)


def test_a_malformed_invoke_is_a_400(standin, posted, client):
    bp, reply = posted
    activity = standin.invoke(reply["conversation"], reply["activity"], "29:rita", "approve")
    activity["from"] = {"id": "<script>"}
    assert post_activity(client, activity, standin.token()).status_code == 400
    assert_untouched(bp)


def test_other_activities_are_acknowledged_and_ignored(standin, posted, client):
    bp, _ = posted
    message = {
        "type": "message",
        "text": "approve",
        "channelId": "msteams",
        "serviceUrl": standin.service_url,
        "conversation": {"id": CONVERSATION},
        "from": {"id": "29:rita"},
    }
    response = post_activity(client, message, standin.token())
    assert (response.status_code, response.content) == (200, b"")
    assert_untouched(bp)
