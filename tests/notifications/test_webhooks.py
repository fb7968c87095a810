"""The webhook layer without Celery: outbox rows, one attempt at a time, against a real receiver.

`webhooks.delivery_attempt(id)` is called directly; the receiver is a real HTTP server on
127.0.0.1, so every assertion is about bytes that crossed a socket and rows in the database.
These tests use the non-transactional `db` fixture: on_commit callbacks (the publish to
the broker) never run, so no task reaches any broker from here.
"""

import base64
import json
from datetime import timedelta
from io import StringIO

import httpx
import pytest
from django.core.management import CommandError, call_command
from django.test import override_settings
from django.utils import timezone
from standardwebhooks.webhooks import Webhook as StandardWebhook
from standardwebhooks.webhooks import WebhookVerificationError

from audit.models import Event
from breakpoints.services import breakpoint_cancel, breakpoints_expire_due, feedback_add
from core.actors import Actor
from core.exceptions import InvalidInput, InvalidState, NotFound
from infra import net as guard
from notifications import services as webhooks
from notifications.delivery import claim
from notifications.models import Delivery, Webhook
from tests.support.net import free_port
from tests.support.records import make_due
from tests.support.webhook_receiver import WebhookReceiver, expected_signature

LOOPBACK = ["127.0.0.1"]


@pytest.fixture
def receiver(make_receiver) -> WebhookReceiver:
    return make_receiver()


@pytest.fixture
def allow_loopback(settings):
    settings.BPM_WEBHOOK_ALLOWED_HOSTS = LOOPBACK


def subscribe(url: str, events: list[str] | None = None, secret: str = "") -> Webhook:
    with override_settings(BPM_WEBHOOK_ALLOWED_HOSTS=LOOPBACK):
        return webhooks.webhook_add(url=url, event_types=events, secret=secret)


def only_delivery(bp, event_type: str = "created") -> Delivery:
    rows = list(Delivery.objects.filter(breakpoint=bp, event_type=event_type))
    assert len(rows) == 1, rows
    return rows[0]


def notifications(delivery_id: str) -> list[Event]:
    return list(
        Event.objects.filter(type="notification", metadata__deliveryId=delivery_id).order_by(
            "timestamp", "id"
        )
    )


# --- the outbox row ----------------------------------------------------------------------


def test_a_change_writes_one_pending_delivery_per_interested_subscriber(receiver, make_breakpoint):
    first = subscribe(receiver.url)
    second = subscribe(receiver.url + "/second")

    bp = make_breakpoint()

    rows = list(Delivery.objects.filter(breakpoint=bp).order_by("webhook_id"))
    assert [(r.webhook_id, r.event_type, r.status, r.attempts) for r in rows] == [
        (first.pk, "created", "pending", 0),
        (second.pk, "created", "pending", 0),
    ]
    assert rows[0].pk != rows[1].pk
    assert all(r.pk.startswith("msg_") for r in rows)
    assert rows[0].body["type"] == "breakpoint.created"
    assert rows[0].body["data"]["breakpointId"] == bp.pk
    assert rows[0].body["data"]["status"] == "waiting"
    assert rows[0].next_attempt_at <= timezone.now()
    assert set(webhooks.deliveries_due()) == {rows[0].pk, rows[1].pk}
    assert receiver.received == []  # nothing is sent before a worker attempts it


def test_inactive_subscription_gets_no_delivery(receiver, make_breakpoint):
    webhook = subscribe(receiver.url)
    Webhook.objects.filter(pk=webhook.pk).update(active=False)

    bp = make_breakpoint()

    assert not Delivery.objects.filter(breakpoint=bp).exists()


# --- a successful attempt ----------------------------------------------------------------


def test_2xx_marks_delivered_and_records_one_notification_event(
    allow_loopback, receiver, make_breakpoint
):
    webhook = subscribe(receiver.url)
    bp = make_breakpoint()
    delivery = only_delivery(bp)
    before = timezone.now()

    outcome = webhooks.delivery_attempt(delivery.pk)

    assert (outcome.status, outcome.status_code) == ("delivered", 200)
    delivery.refresh_from_db()
    assert delivery.status == "delivered"
    assert delivery.attempts == 1
    assert delivery.last_status_code == 200
    assert delivery.last_error == ""
    assert delivery.locked_until is None
    assert delivery.delivered_at is not None and delivery.delivered_at >= before

    [request] = receiver.received
    assert request.path == "/hook"
    assert request.headers["content-type"] == "application/json"
    assert request.webhook_id == delivery.pk
    assert request.json() == delivery.body

    [event] = notifications(delivery.pk)
    assert event.breakpoint_id == bp.pk
    assert event.actor == "system:webhooks"
    assert event.metadata["statusCode"] == 200
    assert isinstance(event.metadata["durationMs"], int)
    assert event.metadata["durationMs"] >= 0
    assert event.metadata["outcome"] == "delivered"
    assert event.metadata["attempt"] == 1
    assert event.metadata["webhookId"] == webhook.pk
    assert event.metadata["eventType"] == "created"
    assert Event.objects.filter(breakpoint=bp, type="notification").count() == 1


def test_delivered_request_is_signed_per_the_contract_with_a_whsec_secret(
    allow_loopback, receiver, make_breakpoint
):
    webhook = subscribe(receiver.url)  # generated secret
    assert webhook.secret.startswith("whsec_")
    bp = make_breakpoint()
    delivery = only_delivery(bp)

    webhooks.delivery_attempt(delivery.pk)

    [request] = receiver.received
    timestamp = request.headers["webhook-timestamp"]
    assert timestamp.isdigit()
    assert abs(int(timestamp) - timezone.now().timestamp()) < 30
    # By hand: v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}"> with the decoded key.
    assert request.headers["webhook-signature"] == expected_signature(
        webhook.secret, request.webhook_id, timestamp, request.body
    )
    # And with the Standard Webhooks reference implementation.
    verified = StandardWebhook(webhook.secret).verify(request.body, request.headers)
    assert verified["data"]["breakpointId"] == bp.pk
    # A different secret does not verify.
    other = "whsec_" + base64.b64encode(b"x" * 32).decode()
    with pytest.raises(WebhookVerificationError):
        StandardWebhook(other).verify(request.body, request.headers)


def test_plain_secret_signs_with_its_utf8_bytes(allow_loopback, receiver, make_breakpoint):
    secret = "plain secret with ünïcode"
    webhook = subscribe(receiver.url, secret=secret)
    assert webhook.secret == secret
    bp = make_breakpoint()

    webhooks.delivery_attempt(only_delivery(bp).pk)

    [request] = receiver.received
    assert request.headers["webhook-signature"] == expected_signature(
        secret, request.webhook_id, request.headers["webhook-timestamp"], request.body
    )
    StandardWebhook(secret.encode("utf-8")).verify(request.body, request.headers)


def test_body_on_the_wire_is_the_stored_json_payload(allow_loopback, receiver, make_breakpoint):
    subscribe(receiver.url)
    bp = make_breakpoint(payload={"question": "Ship it? ✓", "title": "Release"}, tags=["deploy"])

    webhooks.delivery_attempt(only_delivery(bp).pk)

    body = receiver.received[0].json()
    assert set(body) == {"type", "timestamp", "data"}
    assert body["type"] == "breakpoint.created"
    assert body["data"]["question"] == "Ship it? ✓"
    assert body["data"]["tags"] == ["deploy"]
    assert body["data"]["agentId"] == "agent-a"
    assert body["timestamp"].startswith(str(timezone.now().year))


# --- failures and retries ----------------------------------------------------------------


@pytest.mark.parametrize("status_code", [500, 503, 429])
def test_retryable_status_keeps_the_delivery_pending_with_a_later_attempt(
    allow_loopback, make_receiver, make_breakpoint, settings, status_code
):
    settings.BPM_WEBHOOK_RETRY_BASE_SECONDS = 15.0
    receiver = make_receiver(statuses=[status_code])
    subscribe(receiver.url)
    bp = make_breakpoint()
    delivery = only_delivery(bp)
    before = timezone.now()

    outcome = webhooks.delivery_attempt(delivery.pk)

    assert (outcome.status, outcome.status_code) == ("retry", status_code)
    delivery.refresh_from_db()
    assert delivery.status == "pending"
    assert delivery.attempts == 1
    assert delivery.last_status_code == status_code
    assert delivery.last_error == f"HTTP {status_code}"
    assert delivery.locked_until is None
    # First backoff: the base, with +-20% jitter.
    wait = (delivery.next_attempt_at - before).total_seconds()
    assert 15 * 0.8 - 1 <= wait <= 15 * 1.2 + 1
    assert delivery.pk not in webhooks.deliveries_due()
    [event] = notifications(delivery.pk)
    assert (event.metadata["outcome"], event.metadata["statusCode"]) == ("retry", status_code)
    assert event.metadata["error"] == f"HTTP {status_code}"
    assert len(receiver.received) == 1


def test_retry_sends_the_same_webhook_id_and_then_delivers(
    allow_loopback, make_receiver, make_breakpoint
):
    receiver = make_receiver(statuses=[500, 200])
    webhook = subscribe(receiver.url)
    bp = make_breakpoint()
    delivery = only_delivery(bp)

    assert webhooks.delivery_attempt(delivery.pk).status == "retry"
    # Not due yet: a second attempt now is skipped and sends nothing.
    assert webhooks.delivery_attempt(delivery.pk).status == "skipped"
    assert len(receiver.received) == 1

    make_due(delivery)
    assert delivery.pk in webhooks.deliveries_due()
    assert webhooks.delivery_attempt(delivery.pk).status == "delivered"

    first, second = receiver.received
    assert first.webhook_id == second.webhook_id == delivery.pk
    assert first.body == second.body
    for request in (first, second):
        StandardWebhook(webhook.secret).verify(request.body, request.headers)
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("delivered", 2, 200)
    assert [
        (e.metadata["attempt"], e.metadata["outcome"], e.metadata["statusCode"])
        for e in notifications(delivery.pk)
    ] == [(1, "retry", 500), (2, "delivered", 200)]


def test_connection_refused_is_retried(allow_loopback, make_breakpoint):
    subscribe(f"http://127.0.0.1:{free_port()}/hook")  # nothing listens there
    bp = make_breakpoint()
    delivery = only_delivery(bp)

    outcome = webhooks.delivery_attempt(delivery.pk)

    assert outcome.status == "retry"
    assert outcome.status_code is None
    delivery.refresh_from_db()
    assert delivery.status == "pending"
    assert delivery.attempts == 1
    assert delivery.last_status_code is None
    assert "ConnectError" in delivery.last_error
    assert delivery.next_attempt_at > timezone.now()
    [event] = notifications(delivery.pk)
    assert event.metadata["statusCode"] is None
    assert event.metadata["outcome"] == "retry"


@pytest.mark.parametrize("status_code", [404, 400, 410])
def test_client_error_fails_without_retry(
    allow_loopback, make_receiver, make_breakpoint, status_code
):
    receiver = make_receiver(default_status=status_code)
    subscribe(receiver.url)
    bp = make_breakpoint()
    delivery = only_delivery(bp)

    outcome = webhooks.delivery_attempt(delivery.pk)

    assert (outcome.status, outcome.status_code) == ("failed", status_code)
    delivery.refresh_from_db()
    assert delivery.status == "failed"
    assert delivery.attempts == 1
    assert delivery.last_status_code == status_code
    assert delivery.delivered_at is None
    assert delivery.pk not in webhooks.deliveries_due()
    make_due(delivery)  # even once "due", a failed delivery is never tried again
    assert webhooks.delivery_attempt(delivery.pk).status == "skipped"
    assert len(receiver.received) == 1
    [event] = notifications(delivery.pk)
    assert (event.metadata["outcome"], event.metadata["statusCode"]) == ("failed", status_code)


def test_gives_up_after_max_attempts(allow_loopback, make_receiver, make_breakpoint):
    receiver = make_receiver(default_status=500)
    subscribe(receiver.url)
    bp = make_breakpoint()
    delivery = only_delivery(bp)

    outcomes = []
    for _ in range(webhooks.MAX_ATTEMPTS):
        make_due(delivery)
        outcomes.append(webhooks.delivery_attempt(delivery.pk).status)

    assert outcomes == ["retry"] * (webhooks.MAX_ATTEMPTS - 1) + ["failed"]
    delivery.refresh_from_db()
    assert delivery.status == "failed"
    assert delivery.attempts == webhooks.MAX_ATTEMPTS
    assert delivery.last_status_code == 500
    make_due(delivery)
    assert webhooks.delivery_attempt(delivery.pk).status == "skipped"
    assert len(receiver.received) == webhooks.MAX_ATTEMPTS
    assert {r.webhook_id for r in receiver.received} == {delivery.pk}
    events = notifications(delivery.pk)
    assert [e.metadata["attempt"] for e in events] == list(range(1, webhooks.MAX_ATTEMPTS + 1))
    assert events[-1].metadata["outcome"] == "failed"


def test_backoff_grows_exponentially_and_is_capped(settings):
    settings.BPM_WEBHOOK_RETRY_BASE_SECONDS = 10.0
    for attempts, nominal in [(1, 10), (2, 40), (3, 160), (4, 640)]:
        delay = webhooks.backoff_seconds(attempts)
        assert nominal * 0.8 <= delay <= nominal * 1.2, (attempts, delay)
    capped = webhooks.backoff_seconds(50)
    assert webhooks.MAX_BACKOFF_SECONDS * 0.8 <= capped <= webhooks.MAX_BACKOFF_SECONDS * 1.2


# --- leases --------------------------------------------------------------------------------


def test_delivery_leased_by_another_worker_is_skipped(allow_loopback, receiver, make_breakpoint):
    subscribe(receiver.url)
    bp = make_breakpoint()
    delivery = only_delivery(bp)
    lease = timezone.now() + timedelta(seconds=60)
    Delivery.objects.filter(pk=delivery.pk).update(locked_until=lease)

    outcome = webhooks.delivery_attempt(delivery.pk)

    assert outcome.status == "skipped"
    assert receiver.received == []
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.locked_until) == ("pending", 0, lease)
    assert delivery.pk not in webhooks.deliveries_due()
    assert notifications(delivery.pk) == []


def test_delivery_whose_lease_ran_out_is_sent_again(allow_loopback, receiver, make_breakpoint):
    """A worker that died mid-delivery leaves a stale lease: the next attempt proceeds."""
    subscribe(receiver.url)
    bp = make_breakpoint()
    delivery = only_delivery(bp)
    Delivery.objects.filter(pk=delivery.pk).update(
        locked_until=timezone.now() - timedelta(seconds=1)
    )
    assert delivery.pk in webhooks.deliveries_due()

    assert webhooks.delivery_attempt(delivery.pk).status == "delivered"
    assert [r.webhook_id for r in receiver.received] == [delivery.pk]


def test_claim_takes_a_lease_of_the_configured_length(
    allow_loopback, receiver, make_breakpoint, settings
):
    """While one attempt is in flight the row is leased: a concurrent attempt is skipped."""
    settings.BPM_WEBHOOK_LEASE_SECONDS = 45
    subscribe(receiver.url)
    bp = make_breakpoint()
    delivery = only_delivery(bp)
    before = timezone.now()

    claimed = claim(delivery.pk)

    assert claimed is not None
    lease = (claimed.locked_until - before).total_seconds()
    assert 44 <= lease <= 46
    assert claim(delivery.pk) is None
    assert webhooks.delivery_attempt(delivery.pk).status == "skipped"
    assert receiver.received == []


@pytest.mark.django_db
def test_unknown_delivery_is_skipped():
    assert webhooks.delivery_attempt("msg_does_not_exist").status == "skipped"


# --- address safety ----------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080/hook",
        "http://localhost:8080/hook",
        "http://10.1.2.3/hook",
        "http://192.168.1.10/hook",
        "http://[::1]:8080/hook",
        "http://169.254.169.254/latest/meta-data",
    ],
)
def test_private_or_loopback_url_is_refused_by_default(url):
    with override_settings(BPM_WEBHOOK_ALLOWED_HOSTS=[]):
        with pytest.raises(InvalidInput, match="BPM_WEBHOOK_ALLOWED_HOSTS"):
            webhooks.webhook_add(url=url)
    assert not Webhook.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    "allowed, url",
    [
        (["127.0.0.1"], "http://127.0.0.1:8080/hook"),
        (["127.0.0.0/8"], "http://127.0.0.1:8080/hook"),
        (["10.0.0.0/8"], "http://10.1.2.3/hook"),
        (["localhost"], "http://localhost:8080/hook"),
    ],
)
def test_allowed_hosts_let_a_private_url_subscribe(allowed, url):
    with override_settings(BPM_WEBHOOK_ALLOWED_HOSTS=allowed):
        webhook = webhooks.webhook_add(url=url)
    assert Webhook.objects.get(pk=webhook.pk).url == url


@pytest.mark.django_db
def test_allowing_one_address_does_not_allow_another():
    with override_settings(BPM_WEBHOOK_ALLOWED_HOSTS=["127.0.0.1"]):
        with pytest.raises(InvalidInput):
            webhooks.webhook_add(url="http://10.0.0.1/hook")


@pytest.mark.django_db
@pytest.mark.parametrize("url", ["ftp://example.com/x", "not a url", "http:///nohost"])
def test_non_http_url_is_refused(url):
    with pytest.raises(InvalidInput):
        webhooks.webhook_add(url=url)


def test_delivery_to_a_loopback_target_is_refused_at_send_time_unless_allowed(
    receiver, make_breakpoint
):
    subscribe(receiver.url)  # allowed when subscribing, then the allowance is withdrawn
    bp = make_breakpoint()
    delivery = only_delivery(bp)

    with override_settings(BPM_WEBHOOK_ALLOWED_HOSTS=[]):
        outcome = webhooks.delivery_attempt(delivery.pk)

    assert outcome.status == "failed"
    assert outcome.error.startswith("refused")
    assert receiver.received == []  # the request never left
    delivery.refresh_from_db()
    assert delivery.status == "failed"
    assert delivery.last_status_code is None
    [event] = notifications(delivery.pk)
    assert event.metadata["outcome"] == "failed"
    assert event.metadata["error"].startswith("refused")


def test_hostname_resolving_to_loopback_is_refused_at_send_time(make_receiver, make_breakpoint):
    receiver = make_receiver()
    with override_settings(BPM_WEBHOOK_ALLOWED_HOSTS=["localhost"]):
        webhooks.webhook_add(url=f"http://localhost:{receiver.port}/hook")
    bp = make_breakpoint()
    delivery = only_delivery(bp)

    with override_settings(BPM_WEBHOOK_ALLOWED_HOSTS=["10.0.0.0/8"]):
        assert webhooks.delivery_attempt(delivery.pk).status == "failed"
    assert receiver.received == []


# --- event types ---------------------------------------------------------------------------


def test_subscriptions_only_get_their_event_types(
    allow_loopback, receiver, reviewer, make_breakpoint
):
    released_only = subscribe(receiver.url + "/released", events=["released"])
    everything = subscribe(receiver.url + "/all")
    cancelled_only = subscribe(receiver.url + "/cancelled", events=["cancelled"])

    bp = make_breakpoint()
    feedback_add(breakpoint_id=bp.pk, actor=Actor.for_user(reviewer), comment="Go", release=True)
    other = make_breakpoint()
    breakpoint_cancel(breakpoint_id=other.pk, actor=Actor.for_agent("agent-a"))

    def types(webhook, breakpoint):
        return sorted(
            Delivery.objects.filter(webhook=webhook, breakpoint=breakpoint).values_list(
                "event_type", flat=True
            )
        )

    assert types(released_only, bp) == ["released"]
    assert types(everything, bp) == ["created", "feedback", "released"]
    assert types(cancelled_only, bp) == []
    assert types(released_only, other) == []
    assert types(everything, other) == ["cancelled", "created"]
    assert types(cancelled_only, other) == ["cancelled"]

    # What reaches the released-only endpoint is the released event, nothing else.
    for delivery in Delivery.objects.filter(webhook=released_only):
        webhooks.delivery_attempt(delivery.pk)
    [request] = receiver.received
    assert request.path == "/hook/released"
    body = request.json()
    assert body["type"] == "breakpoint.released"
    assert body["data"]["status"] == "released"
    assert body["data"]["result"]["approved"] is True
    assert body["data"]["result"]["respondedBy"] == "alice"


def test_expired_event_reaches_subscribers(allow_loopback, receiver, make_breakpoint):
    subscribe(receiver.url, events=["expired"])
    bp = make_breakpoint(ttl_seconds=5)
    assert not Delivery.objects.filter(breakpoint=bp).exists()

    assert breakpoints_expire_due(now=timezone.now() + timedelta(seconds=6)) == 1

    delivery = only_delivery(bp, "expired")
    assert webhooks.delivery_attempt(delivery.pk).status == "delivered"
    body = receiver.received[0].json()
    assert body["type"] == "breakpoint.expired"
    assert body["data"]["status"] == "expired"
    assert body["data"]["result"]["approved"] is False


@pytest.mark.django_db
def test_unknown_event_type_is_refused():
    with pytest.raises(InvalidInput, match="Unknown event type"):
        subscribe("https://example.com/hook", events=["created", "exploded"])


# --- resend --------------------------------------------------------------------------------


def test_resend_sends_a_delivered_delivery_again_with_the_same_id(
    allow_loopback, receiver, make_breakpoint, django_capture_on_commit_callbacks
):
    webhook = subscribe(receiver.url)
    bp = make_breakpoint()
    delivery = only_delivery(bp)
    assert webhooks.delivery_attempt(delivery.pk).status == "delivered"

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        resent = webhooks.delivery_resend(delivery_id=delivery.pk)

    assert len(callbacks) == 1  # the publish to the workers, after commit
    assert resent.pk == delivery.pk
    assert resent.status == "pending"
    assert resent.locked_until is None
    assert resent.next_attempt_at <= timezone.now()
    assert delivery.pk in webhooks.deliveries_due()

    assert webhooks.delivery_attempt(delivery.pk).status == "delivered"
    first, second = receiver.received
    assert first.webhook_id == second.webhook_id == delivery.pk
    StandardWebhook(webhook.secret).verify(second.body, second.headers)
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("delivered", 2)


def test_resend_revives_a_failed_delivery(allow_loopback, make_receiver, make_breakpoint):
    receiver = make_receiver(statuses=[404, 200])
    subscribe(receiver.url)
    bp = make_breakpoint()
    delivery = only_delivery(bp)
    assert webhooks.delivery_attempt(delivery.pk).status == "failed"

    webhooks.delivery_resend(delivery_id=delivery.pk)

    assert webhooks.delivery_attempt(delivery.pk).status == "delivered"
    assert [r.webhook_id for r in receiver.received] == [delivery.pk, delivery.pk]


@pytest.mark.django_db
def test_resend_of_an_unknown_delivery_is_not_found():
    with pytest.raises(NotFound):
        webhooks.delivery_resend(delivery_id="msg_nope")


# --- management commands -------------------------------------------------------------------


def run(*args) -> list[str]:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue().splitlines()


@pytest.mark.django_db
def test_add_webhook_prints_the_id_last_and_the_generated_secret(allow_loopback):
    lines = run("add_webhook", "http://127.0.0.1:9/hook", "--events", "created,released")

    webhook = Webhook.objects.get(pk=int(lines[-1]))
    assert lines[-1] == str(webhook.pk)
    assert webhook.url == "http://127.0.0.1:9/hook"
    assert webhook.event_types == ["created", "released"]
    [secret_line] = [line for line in lines if "whsec_" in line]
    assert secret_line.split()[-1] == webhook.secret
    assert len(base64.b64decode(webhook.secret[len("whsec_") :])) >= 24


@pytest.mark.django_db
def test_add_webhook_with_a_given_secret_does_not_print_it(allow_loopback):
    lines = run("add_webhook", "http://127.0.0.1:9/hook", "--secret", "s3cr3t-value")

    webhook = Webhook.objects.get(pk=int(lines[-1]))
    assert webhook.secret == "s3cr3t-value"
    assert webhook.event_types == []  # all events
    assert not any("s3cr3t-value" in line for line in lines)


@pytest.mark.django_db
def test_add_webhook_refuses_loopback_without_allowance_and_unknown_events():
    with override_settings(BPM_WEBHOOK_ALLOWED_HOSTS=[]):
        with pytest.raises(CommandError, match="BPM_WEBHOOK_ALLOWED_HOSTS"):
            run("add_webhook", "http://127.0.0.1:9/hook")
    with pytest.raises(CommandError, match="Unknown event type"):
        run("add_webhook", "https://example.com/hook", "--events", "created,nope")
    assert not Webhook.objects.exists()


@pytest.mark.django_db
def test_list_and_remove_webhooks(allow_loopback):
    first = int(run("add_webhook", "http://127.0.0.1:9/a", "--events", "released")[-1])
    second = int(run("add_webhook", "http://127.0.0.1:9/b", "--secret", "plain")[-1])

    listed = json.loads("\n".join(run("list_webhooks", "--json")))
    assert [(row["id"], row["url"], row["events"]) for row in listed] == [
        (first, "http://127.0.0.1:9/a", ["released"]),
        (second, "http://127.0.0.1:9/b", ["all"]),
    ]
    assert "plain" not in json.dumps(listed)  # secrets are never listed
    text = run("list_webhooks")
    assert len(text) == 2 and str(first) in text[0] and "http://127.0.0.1:9/b" in text[1]

    run("remove_webhook", str(first))
    listed = json.loads("\n".join(run("list_webhooks", "--json")))
    assert [row["id"] for row in listed] == [second]
    with pytest.raises(CommandError, match=f"No webhook with id {first}"):
        run("remove_webhook", str(first))


@pytest.mark.django_db
def test_removed_webhooks_are_listed_only_with_all(allow_loopback):
    first = int(run("add_webhook", "http://127.0.0.1:9/a")[-1])
    second = int(run("add_webhook", "http://127.0.0.1:9/b")[-1])
    run("remove_webhook", str(first))

    listed = json.loads("\n".join(run("list_webhooks", "--json", "--all")))
    assert [(row["id"], row["active"], row["removedAt"] is not None) for row in listed] == [
        (first, False, True),
        (second, True, False),
    ]
    text = run("list_webhooks", "--all")
    assert "removed" in text[0] and "removed" not in text[1]
    assert run("list_webhooks")[0].startswith(f"{second}\t")


def test_removing_a_webhook_keeps_its_deliveries_and_cancels_the_pending_ones(
    allow_loopback, receiver, make_breakpoint
):
    """A soft delete: the history stays, nothing more is sent, no new delivery is written."""
    webhook = subscribe(receiver.url)
    sent_bp = make_breakpoint()
    sent = only_delivery(sent_bp)
    assert webhooks.delivery_attempt(sent.pk).status == "delivered"
    pending = only_delivery(make_breakpoint())

    lines = run("remove_webhook", str(webhook.pk))

    assert lines == [f"Removed webhook {webhook.pk}."]
    webhook.refresh_from_db()
    assert webhook.removed_at is not None and webhook.active is False
    sent.refresh_from_db()
    assert (sent.status, sent.attempts) == ("delivered", 1)
    assert len(notifications(sent.pk)) == 1  # the audit of the attempt stays
    pending.refresh_from_db()
    assert pending.status == "failed"
    assert pending.last_error == "cancelled: the webhook was removed"
    assert pending.attempts == 0
    assert webhooks.deliveries_due() == []
    assert webhooks.delivery_attempt(pending.pk).status == "skipped"
    later = make_breakpoint()
    assert not Delivery.objects.filter(breakpoint=later).exists()
    assert len(receiver.received) == 1


def test_a_removed_webhook_cannot_be_reactivated_nor_its_deliveries_resent(
    allow_loopback, receiver, make_breakpoint
):
    webhook = subscribe(receiver.url)
    delivery = only_delivery(make_breakpoint())
    webhooks.webhook_remove(webhook_id=webhook.pk)

    with pytest.raises(NotFound):
        webhooks.webhook_update(webhook_id=webhook.pk, event_types=[], active=True)
    with pytest.raises(InvalidState):
        webhooks.delivery_resend(delivery_id=delivery.pk)
    with pytest.raises(NotFound):
        webhooks.webhook_remove(webhook_id=webhook.pk)

    webhook.refresh_from_db()
    assert webhook.active is False and webhook.removed_at is not None
    delivery.refresh_from_db()
    assert delivery.status == "failed"
    assert receiver.received == []


def test_the_sweep_cancels_a_pending_delivery_of_a_removed_webhook(
    allow_loopback, receiver, make_breakpoint
):
    """A delivery written by a change that raced the removal is never sent."""
    webhook = subscribe(receiver.url)
    other = subscribe(receiver.url + "/other")
    bp = make_breakpoint()
    webhooks.webhook_remove(webhook_id=webhook.pk)
    raced = Delivery.objects.create(
        webhook=webhook,
        breakpoint=bp,
        event_type="created",
        body={},
        next_attempt_at=timezone.now(),
    )
    kept = Delivery.objects.get(webhook=other, breakpoint=bp)

    assert webhooks.deliveries_due() == [kept.pk]

    raced.refresh_from_db()
    assert (raced.status, raced.last_error) == ("failed", "cancelled: the webhook was removed")
    assert webhooks.delivery_attempt(raced.pk).status == "skipped"
    assert receiver.received == []


def test_an_attempt_cut_short_by_a_dead_worker_still_counts(
    allow_loopback, receiver, make_breakpoint
):
    """The claim counts the attempt: a worker killed after claiming used one of the 8."""
    subscribe(receiver.url)
    bp = make_breakpoint()
    delivery = only_delivery(bp)
    assert claim(delivery.pk) is not None  # the worker that dies mid-request
    Delivery.objects.filter(pk=delivery.pk).update(
        locked_until=timezone.now() - timedelta(seconds=1)
    )

    assert webhooks.delivery_attempt(delivery.pk).status == "delivered"

    delivery.refresh_from_db()
    assert delivery.attempts == 2
    assert [event.metadata["attempt"] for event in notifications(delivery.pk)] == [2]


def test_delivery_goes_to_the_vetted_address_with_the_original_host_header(
    receiver, make_breakpoint, settings
):
    """The name is resolved once, checked, and the request is sent to that address (no
    second lookup a rebinding DNS could answer differently); Host keeps the name."""
    settings.BPM_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1", "::1"]
    port = receiver.url.split(":")[2].split("/")[0]
    webhooks.webhook_add(url=f"http://localhost:{port}/hook")
    bp = make_breakpoint()
    delivery = only_delivery(bp)

    assert webhooks.delivery_attempt(delivery.pk).status == "delivered"

    [request] = receiver.received
    assert request.headers["host"] == f"localhost:{port}"


def test_a_name_that_resolves_to_a_private_address_is_refused_at_delivery(
    receiver, make_breakpoint, settings
):
    settings.BPM_WEBHOOK_ALLOWED_HOSTS = ["localhost"]  # the name passes the add-time check
    port = receiver.url.split(":")[2].split("/")[0]
    webhooks.webhook_add(url=f"http://localhost:{port}/hook")
    settings.BPM_WEBHOOK_ALLOWED_HOSTS = []  # ...but what it resolves to is not allowed now
    bp = make_breakpoint()

    outcome = webhooks.delivery_attempt(only_delivery(bp).pk)

    assert outcome.status == "failed"
    assert "private or loopback" in outcome.error
    assert receiver.received == []


# --- credentials in the subscription URL never leak ----------------------------------------

LEAKS = ("S3cret", "token", "abc", "u:")


def with_credentials(receiver: WebhookReceiver) -> str:
    """The receiver's URL with a user:password and a query-string token."""
    return receiver.url.replace("http://", "http://u:S3cret@") + "?token=abc"


def test_a_notification_event_names_the_subscription_and_a_redacted_url(
    allow_loopback, receiver, make_breakpoint
):
    webhook = subscribe(with_credentials(receiver))
    delivery = only_delivery(make_breakpoint())

    assert webhooks.delivery_attempt(delivery.pk).status == "delivered"

    [request] = receiver.received  # the delivery itself still uses the credentials
    assert request.path == "/hook?token=abc"
    assert request.headers["authorization"] == "Basic " + base64.b64encode(b"u:S3cret").decode()
    [event] = notifications(delivery.pk)
    assert event.metadata["webhookId"] == webhook.pk
    assert event.metadata["url"] == receiver.url  # scheme, host, port and path only
    stored = json.dumps(event.metadata)
    assert not [leak for leak in LEAKS if leak in stored], stored


def test_agents_do_not_see_delivery_events_and_reviewers_see_them_redacted(
    allow_loopback, receiver, make_breakpoint, agent_client, reviewer_client
):
    webhook = subscribe(with_credentials(receiver))
    bp = make_breakpoint(agent_id="agent-a")
    assert webhooks.delivery_attempt(only_delivery(bp).pk).status == "delivered"
    url = f"/api/breakpoints/{bp.pk}/events"

    as_agent = agent_client.get(url)
    as_reviewer = reviewer_client.get(url)

    assert as_agent.status_code == 200
    assert [event["type"] for event in as_agent.json()["results"]] == ["created"]
    assert as_reviewer.status_code == 200
    results = as_reviewer.json()["results"]
    assert [event["type"] for event in results] == ["created", "notification"]
    assert results[1]["metadata"]["webhookId"] == webhook.pk
    assert results[1]["metadata"]["url"] == receiver.url
    for response in (as_agent, as_reviewer):
        body = response.content.decode()
        assert not [leak for leak in LEAKS if leak in body], body


def test_an_error_naming_the_url_is_recorded_without_its_credentials(
    allow_loopback, make_breakpoint, monkeypatch
):
    """Whatever an HTTP library puts in its error text, the secrets are scrubbed out."""
    port = free_port()
    url = f"http://u:S3cret@127.0.0.1:{port}/hook?token=abc"
    subscribe(url)
    delivery = only_delivery(make_breakpoint())

    def fail(client, target, *args, **kwargs):
        raise httpx.ConnectError(f"cannot reach {url} (u:S3cret, token=abc)")

    monkeypatch.setattr(guard, "post_pinned", fail)
    assert webhooks.delivery_attempt(delivery.pk).status == "retry"

    delivery.refresh_from_db()
    [event] = notifications(delivery.pk)
    for text in (delivery.last_error, json.dumps(event.metadata)):
        assert "ConnectError" in text
        assert "S3cret" not in text and "token=abc" not in text, text


@pytest.mark.django_db
def test_events_recorded_before_the_redaction_are_redacted_by_the_migration(make_breakpoint):
    """Deployments hold notification events with the full URL: migration 0008 rewrites them."""
    from importlib import import_module

    from django.apps import apps

    migration = import_module("breakpoints.migrations.0008_webhook_removed_at")
    bp = make_breakpoint()
    old = Event.objects.create(
        breakpoint=bp,
        type="notification",
        actor="system:webhooks",
        metadata={"webhookId": 1, "url": "https://u:S3cret@hooks.example:8443/x?token=abc#f"},
    )
    other = Event.objects.create(
        breakpoint=bp, type="released", actor="alice", metadata={"url": "https://a:b@c/d?e"}
    )

    migration.redact_notification_urls(apps, None)

    old.refresh_from_db()
    other.refresh_from_db()
    assert old.metadata == {"webhookId": 1, "url": "https://hooks.example:8443/x"}
    assert other.metadata == {"url": "https://a:b@c/d?e"}  # not a delivery: untouched
