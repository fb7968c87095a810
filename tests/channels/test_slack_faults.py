"""Slack down or refusing: the delivery retries (500, 429 after its Retry-After, a stopped
server) and is delivered once when Slack is back, one message only; errors Slack will
repeat fail at once; the bot token appears in no error and no audit event; the
interactions endpoint still answers in time."""

import json
import time
from datetime import timedelta

from django.utils import timezone

from audit.models import Event
from notifications.models import Delivery
from tests.support.slack import (
    BOT_TOKEN,
    CHANNEL,
    announce,
    attempt,
    events,
    interact,
    only,
)

pytest_plugins = ["tests.support.slack"]  # standin, people, slack_route

PLAN = {"title": "Deploy", "question": "Ship it?"}


def test_a_500_is_retried_and_delivered_once_slack_is_back(standin, slack_route, make_breakpoint):
    bp = make_breakpoint(payload=PLAN)
    standin.fail_next(2, status=500)

    first = attempt(only(bp))

    assert (first.status, first.attempts, first.last_status_code) == ("pending", 1, 500)
    assert first.last_error == "Slack chat.postMessage: internal_error (HTTP 500)"
    assert first.next_attempt_at > timezone.now()
    assert attempt(first).status == "pending"
    assert standin.messages == {}

    delivered = attempt(first)

    assert (delivered.status, delivered.attempts) == ("delivered", 3)
    assert len(standin.messages) == 1
    assert [c.status for c in standin.calls("chat.postMessage")] == [500, 500, 200]
    outcomes = [e.metadata["outcome"] for e in events(bp, "notification")]
    assert outcomes == ["retry", "retry", "delivered"]


def test_a_429_waits_at_least_its_retry_after(standin, slack_route, make_breakpoint, settings):
    settings.BPM_WEBHOOK_RETRY_BASE_SECONDS = 1  # the backoff alone would retry in ~1 s
    bp = make_breakpoint(payload=PLAN)
    standin.rate_limit_next(1, retry_after=120)
    before = timezone.now()

    limited = attempt(only(bp))

    assert (limited.status, limited.last_status_code) == ("pending", 429)
    assert "ratelimited" in limited.last_error
    assert limited.next_attempt_at >= before + timedelta(seconds=120)
    assert standin.messages == {}
    assert attempt(limited).status == "delivered"
    assert len(standin.messages) == 1


def test_a_stopped_slack_is_retried_and_delivered_once_started(
    standin, slack_route, make_breakpoint
):
    bp = make_breakpoint(payload=PLAN)
    standin.stop()

    down = attempt(only(bp))

    assert down.status == "pending" and down.last_status_code is None
    assert down.last_error.startswith("Slack unreachable: URLError")
    standin.start()
    assert attempt(down).status == "delivered"
    assert len(standin.messages) == 1 and len(standin.calls("chat.postMessage")) == 1


def test_an_update_while_slack_is_down_is_retried(standin, slack_route, make_breakpoint, client):
    bp = make_breakpoint(payload=PLAN)
    reply = announce(bp)
    interact(client, standin.click_payload(reply["channel"], reply["ts"], "bpm_approve", "U0RITA"))
    standin.fail_next(1, status=503)

    released = attempt(only(bp, "released"))

    assert released.status == "pending" and "HTTP 503" in released.last_error
    assert attempt(released).status == "delivered"
    assert [c.status for c in standin.calls("chat.update")] == [503, 200]
    assert "*Approved* by rita" in json.dumps(standin.message(reply["channel"], reply["ts"]))


def test_a_wrong_token_fails_at_once_and_is_never_written_down(
    standin, slack_route, make_breakpoint, settings
):
    bp = make_breakpoint(payload=PLAN)
    settings.SLACK_BOT_TOKEN = "xoxb-wrong-9999-SECRET"

    failed = attempt(only(bp))

    assert (failed.status, failed.attempts) == ("failed", 1)
    assert failed.last_error == "Slack chat.postMessage: invalid_auth (HTTP 200)"
    assert "SECRET" not in failed.last_error and "xoxb" not in failed.last_error


def test_an_unknown_channel_fails_at_once(standin, slack_route, make_breakpoint):
    bp = make_breakpoint(payload=PLAN)
    standin.missing_channels.add(CHANNEL)

    failed = attempt(only(bp))

    assert failed.status == "failed"
    assert "channel_not_found" in failed.last_error


def test_the_token_appears_in_no_error_and_no_audit_event(
    standin, slack_route, make_breakpoint, client
):
    bp = make_breakpoint(payload=PLAN)
    standin.fail_next(1, status=500)
    attempt(only(bp))
    standin.rate_limit_next(1, retry_after=1)
    attempt(only(bp))
    standin.stop()
    attempt(only(bp))
    standin.start()
    reply = announce(bp)
    standin.fail_next(2, status=500)  # users.info and the ephemeral fail too
    interact(client, standin.click_payload(reply["channel"], reply["ts"], "bpm_approve", "U0RITA"))

    texts = [
        *Delivery.objects.values_list("last_error", flat=True),
        *(json.dumps(e.metadata) + e.actor for e in Event.objects.all()),
    ]
    assert len(texts) >= 6
    for text in texts:
        assert BOT_TOKEN not in text and "Bearer" not in text and "SECRET" not in text
    (refused,) = events(bp, "refused")
    assert "internal_error" in refused.metadata["message"]
    bp.refresh_from_db()
    assert bp.status == "waiting"


def test_a_slow_slack_does_not_keep_slack_waiting(standin, slack_route, make_breakpoint, client):
    """users.info hangs: the lookup gives up after 2 s, the click is refused in time."""
    bp = make_breakpoint(payload=PLAN)
    reply = announce(bp)
    standin.delay_next(1, seconds=6)
    started = time.monotonic()

    response = interact(
        client, standin.click_payload(reply["channel"], reply["ts"], "bpm_approve", "U0RITA")
    )

    assert response.status_code == 200
    assert time.monotonic() - started < 3
    (told,) = standin.ephemerals
    assert "Slack did not answer" in told["text"]
    bp.refresh_from_db()
    assert bp.status == "waiting"


def test_slack_down_during_a_click_still_answers_and_decides_nothing(
    standin, slack_route, make_breakpoint, client
):
    bp = make_breakpoint(payload=PLAN)
    reply = announce(bp)
    payload = standin.click_payload(reply["channel"], reply["ts"], "bpm_approve", "U0RITA")
    standin.stop()

    response = interact(client, payload)

    assert (response.status_code, response.content) == (200, b"")
    bp.refresh_from_db()
    assert bp.status == "waiting"
    (refused,) = events(bp, "refused")
    assert "Slack did not answer" in refused.metadata["message"]
