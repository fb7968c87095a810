"""Slack requests that must not decide: forged, stale or altered ones (401, nothing else
happens but a WARNING), malformed ones (400), and people who may not decide (a clear
ephemeral answer, a REFUSED audit event, the breakpoint untouched)."""

import hashlib
import hmac
import json
import logging
import time

import pytest
from django.contrib.auth.models import Group

from audit.models import Event
from breakpoints.models import Feedback
from tests.standins.slack import signed_interaction
from tests.support.slack import (
    SIGNING_SECRET,
    announce,
    events,
    interact,
    only,
    post_raw,
)

PLAN = {"title": "Deploy", "question": "Ship it?"}

pytest_plugins = ["tests.support.slack"]  # standin, people, slack_route


@pytest.fixture
def posted(standin, slack_route, make_breakpoint):
    """A waiting breakpoint and its Slack message: (bp, {"channel", "ts"})."""
    bp = make_breakpoint(payload=PLAN)
    return bp, announce(bp)


def assert_untouched(bp, standin) -> None:
    """Still waiting, no feedback, no event but its creation and the notification, and
    no Slack call but the first post."""
    bp.refresh_from_db()
    assert bp.status == "waiting"
    assert not Feedback.objects.filter(breakpoint_id=bp.pk).exists()
    assert sorted(Event.objects.filter(breakpoint_id=bp.pk).values_list("type", flat=True)) == [
        "created",
        "notification",
    ]
    assert [call.method for call in standin.calls()] == ["chat.postMessage"]


# --- not Slack, or not now: 401 ----------------------------------------------------------


def signed_headers(body: bytes) -> dict[str, str]:
    """Slack's v0 headers for any raw body, signed right."""
    stamp = str(int(time.time()))
    digest = hmac.new(SIGNING_SECRET.encode(), f"v0:{stamp}:".encode() + body, hashlib.sha256)
    return {"X-Slack-Request-Timestamp": stamp, "X-Slack-Signature": "v0=" + digest.hexdigest()}


def approve_payload(standin, reply, user: str = "U0RITA") -> dict:
    return standin.click_payload(reply["channel"], reply["ts"], "bpm_approve", user)


def test_a_forged_signature_is_refused_and_logged(standin, posted, client, caplog):
    bp, reply = posted
    caplog.set_level(logging.WARNING, logger="breakpoints.audit")

    response = interact(client, approve_payload(standin, reply), secret="not-the-secret")

    assert response.status_code == 401
    assert response.json() == {"error": "Invalid or expired Slack signature."}
    assert_untouched(bp, standin)
    (record,) = [r for r in caplog.records if r.name == "breakpoints.audit"]
    assert record.levelno == logging.WARNING
    assert record.slack_refusal == "bad or stale signature"


def test_a_stale_timestamp_is_refused_even_when_signed_right(standin, posted, client):
    bp, reply = posted
    six_minutes_ago = int(time.time()) - 301

    response = interact(client, approve_payload(standin, reply), timestamp=six_minutes_ago)

    assert response.status_code == 401
    assert_untouched(bp, standin)


def test_a_replayed_body_with_an_altered_payload_is_refused(standin, posted, client, people):
    bp, reply = posted
    body, headers = signed_interaction(approve_payload(standin, reply, "U0NORA"), SIGNING_SECRET)
    altered = body.replace(b"U0NORA", b"U0RITA")
    assert altered != body

    response = post_raw(client, altered, headers)

    assert response.status_code == 401
    assert_untouched(bp, standin)


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"X-Slack-Request-Timestamp": str(int(time.time()))},
        {"X-Slack-Request-Timestamp": "soon", "X-Slack-Signature": "v0=" + "0" * 64},
        {"X-Slack-Request-Timestamp": "1e9", "X-Slack-Signature": "v0=" + "0" * 64},
        {"X-Slack-Request-Timestamp": str(int(time.time())), "X-Slack-Signature": "v0=é" * 22},
    ],
    ids=["none", "no-signature", "word-timestamp", "float-timestamp", "non-ascii-signature"],
)
def test_missing_or_malformed_signature_headers_are_refused(standin, posted, client, headers):
    bp, reply = posted
    body, _ = signed_interaction(approve_payload(standin, reply), SIGNING_SECRET)

    response = post_raw(client, body, dict(headers))

    assert response.status_code == 401
    assert_untouched(bp, standin)


def test_a_body_that_is_not_utf8_is_refused_not_a_crash(standin, posted, client):
    bp, _ = posted
    body = b"payload=\xff\xfe"
    assert post_raw(client, body, signed_headers(body)).status_code == 401
    assert_untouched(bp, standin)


def test_without_a_signing_secret_slack_is_refused(standin, posted, client, settings):
    bp, reply = posted
    settings.SLACK_SIGNING_SECRET = ""

    response = interact(client, approve_payload(standin, reply))

    assert response.status_code == 503
    assert_untouched(bp, standin)


def test_only_post(standin, client):
    assert client.get("/integrations/slack/interactions").status_code == 405


# --- Slack, but nonsense: 400 -----------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"payload=not-json",
        b"payload=%5B1%2C2%5D",  # a JSON array
        b"payload=%7B%7D",  # no type
        b"other=1",
        b"payload=" + b"%5B" * 5000,  # deep nesting
        b"payload=%7B%22type%22%3A%22block_actions%22%7D",  # no actions, no user
        b"payload=%7B%22type%22%3A%22block_actions%22%2C%22actions%22%3A%5B%7B%7D%5D%2C"
        b"%22user%22%3A%7B%22id%22%3A%22%3Cscript%3E%22%7D%7D",  # a user id that is no id
    ],
    ids=["empty", "not-json", "array", "no-type", "no-payload", "deep", "no-actions", "bad-user"],
)
def test_a_malformed_payload_is_a_400(standin, posted, client, body):
    bp, _ = posted
    response = post_raw(client, body, signed_headers(body))

    assert response.status_code == 400
    assert response.json() == {"error": response.json()["error"]}
    assert_untouched(bp, standin)


# --- Slack, but not someone who may decide: an ephemeral answer, audited ------------------


def assert_refused(bp, standin, reply, user: str, *words: str) -> None:
    bp.refresh_from_db()
    assert bp.status == "waiting"
    assert not Feedback.objects.filter(breakpoint_id=bp.pk).exists()
    (refused,) = events(bp, "refused")
    assert refused.actor == f"slack:{user}"
    assert refused.metadata["via"] == "slack"
    (told,) = standin.ephemerals
    assert (told["channel"], told["user"]) == (reply["channel"], user)
    for word in words:
        assert word in told["text"] and word in refused.metadata["message"]
    assert events(bp, "released") == [] and only(bp).status == "delivered"


@pytest.mark.parametrize(
    ("user", "words"),
    [
        ("U0NORA", ["Only reviewers and admins"]),
        ("U0GHOST", ["No single active", "ghost@example.com"]),
        ("U0TWIN", ["No single active", "deactivate all but yours"]),
        ("U0NOMAIL", ["shows no email"]),
        ("U0NOBODY", ["could not be looked up", "user_not_found"]),
    ],
    ids=["not-a-reviewer", "unknown-email", "two-accounts", "no-email", "unknown-to-slack"],
)
@pytest.mark.parametrize("action", ["bpm_approve", "bpm_reject"])
def test_who_may_not_decide_is_told_and_audited(
    standin, posted, client, people, user, words, action
):
    bp, reply = posted
    payload = standin.click_payload(reply["channel"], reply["ts"], action, "U0RITA")
    payload["user"]["id"] = user  # who clicked, as Slack says

    response = interact(client, payload)

    assert (response.status_code, response.content) == (200, b"")
    assert_refused(bp, standin, reply, user, *words)
    assert standin.calls("views.open") == []


def test_an_inactive_account_does_not_decide(standin, posted, client, people):
    bp, reply = posted
    people["rita"].is_active = False
    people["rita"].save()

    interact(client, approve_payload(standin, reply))

    assert_refused(bp, standin, reply, "U0RITA", "No single active")


def test_a_reviewer_without_a_seat_may_not_release_a_routed_breakpoint(
    standin, slack_route, make_breakpoint, client, people
):
    bp = make_breakpoint(payload={**PLAN, "expert": "tech-lead"})
    reply = announce(bp)

    interact(client, approve_payload(standin, reply, "U0RITA"))

    assert_refused(bp, standin, reply, "U0RITA", "Only members of tech-lead")
    assert interact(client, approve_payload(standin, reply, "U0TINA")).status_code == 200
    bp.refresh_from_db()
    assert bp.status == "released" and bp.result["respondedBy"] == "tina"


def test_a_seat_refused_at_the_modal_is_told_in_the_modal(
    standin, slack_route, make_breakpoint, client, people
):
    bp = make_breakpoint(payload={**PLAN, "expert": "tech-lead"})
    reply = announce(bp)
    interact(client, standin.click_payload(reply["channel"], reply["ts"], "bpm_reject", "U0TINA"))
    (view_id,) = standin.views
    people["tina"].groups.remove(Group.objects.get(name="tech-lead"))  # she left meanwhile

    response = interact(client, standin.submit_payload(view_id, "U0TINA", "No."))

    assert response.status_code == 200
    assert response.json()["response_action"] == "errors"
    assert "Only members of tech-lead" in response.json()["errors"]["bpm_feedback"]
    bp.refresh_from_db()
    assert bp.status == "waiting"
    (refused,) = events(bp, "refused")
    assert refused.actor == "slack:U0TINA" and refused.metadata["action"] == "bpm_reject"


def test_a_decided_breakpoint_refuses_the_modal(standin, posted, client):
    bp, reply = posted
    interact(client, standin.click_payload(reply["channel"], reply["ts"], "bpm_reject", "U0RITA"))
    (view_id,) = standin.views
    interact(client, approve_payload(standin, reply))  # decided while the modal was open

    response = interact(client, standin.submit_payload(view_id, "U0RITA", "Too late?"))

    assert "no longer takes feedback" in response.json()["errors"]["bpm_feedback"]
    bp.refresh_from_db()
    assert bp.result["approved"] is True
    assert Feedback.objects.filter(breakpoint_id=bp.pk).count() == 1


def test_an_unknown_breakpoint_is_answered_not_audited(standin, posted, client):
    bp, reply = posted
    payload = approve_payload(standin, reply)
    payload["actions"][0]["value"] = "bp-" + "0" * 32

    response = interact(client, payload)

    assert response.status_code == 200
    (told,) = standin.ephemerals
    assert "does not exist" in told["text"]
    assert Event.objects.filter(type="refused").count() == 0
    assert standin.calls("users.info") == []
    bp.refresh_from_db()
    assert bp.status == "waiting"


def test_a_modal_with_tampered_metadata_decides_nothing(standin, posted, client):
    bp, reply = posted
    interact(client, standin.click_payload(reply["channel"], reply["ts"], "bpm_reject", "U0RITA"))
    (view_id,) = standin.views
    payload = standin.submit_payload(view_id, "U0RITA", "No.")
    payload["view"]["private_metadata"] = json.dumps({"bp": ["not", "an", "id"]})

    response = interact(client, payload)

    assert "does not exist" in response.json()["errors"]["bpm_feedback"]
    bp.refresh_from_db()
    assert bp.status == "waiting"


# --- text no database can hold: 400 (signed, but never a 500) -----------------------------

UNSTORABLE = pytest.mark.parametrize("bad", ["\x00", "\ud800"], ids=["nul", "lone-surrogate"])


@UNSTORABLE
def test_a_nul_or_lone_surrogate_in_a_button_value_is_a_400(standin, posted, client, bad):
    bp, reply = posted
    payload = approve_payload(standin, reply)
    payload["actions"][0]["value"] = bp.pk + bad

    response = interact(client, payload)

    assert response.status_code == 400
    assert_untouched(bp, standin)


@UNSTORABLE
def test_a_nul_or_lone_surrogate_in_a_modal_decides_nothing(standin, posted, client, bad):
    bp, reply = posted
    interact(client, standin.click_payload(reply["channel"], reply["ts"], "bpm_reject", "U0RITA"))
    (view_id,) = standin.views
    in_metadata = standin.submit_payload(view_id, "U0RITA", "No.")
    in_metadata["view"]["private_metadata"] = json.dumps({"bp": bp.pk + bad})
    in_comment = standin.submit_payload(view_id, "U0RITA", "No" + bad)

    answered = interact(client, in_metadata)

    assert answered.status_code == 200  # the modal says what is wrong: Slack shows it
    assert "does not exist" in answered.json()["errors"]["bpm_feedback"]
    assert interact(client, in_comment).status_code == 400
    bp.refresh_from_db()
    assert bp.status == "waiting"
