"""Web Push against a push service stand-in of our own (tests/standins/push.py), which
checks each push's VAPID token and decrypts it with the device's keys as a browser would.

Deliveries are written by the services (a breakpoint's events) and attempted with
notifications.services.delivery_attempt; every assertion is about what the device read,
what the push service saw, or rows in the database.
"""

import base64
import io
from datetime import timedelta

import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from breakpoints.representation.contract import console_url
from breakpoints.services import feedback_add
from breakpoints.services.nudges import breakpoints_remind_due
from channels.models import PushSubscription
from channels.push import subscriptions
from channels.push.messages import vapid_public_key
from channels.push.subscriptions import MAX_DEVICES_PER_USER, subscription_save
from core.actors import Actor
from core.exceptions import Forbidden, InvalidInput
from notifications.models import Delivery
from notifications.services import delivery_attempt
from policies.routes import route_add
from tests.standins.push import PushService
from tests.support.console import session_client
from tests.support.factories import ReviewerFactory, UserFactory

SECRET_QUESTION = "Drop the customers table on prod-eu-1?"


def _vapid_key() -> str:
    private = ec.generate_private_key(ec.SECP256R1()).private_numbers().private_value
    return base64.urlsafe_b64encode(private.to_bytes(32, "big")).rstrip(b"=").decode()


@pytest.fixture
def push(settings):
    service = PushService()
    settings.BPM_VAPID_PRIVATE_KEY = _vapid_key()
    settings.BPM_VAPID_SUBJECT = "mailto:ops@example.test"
    settings.BPM_PUSH_SERVICES = ["127.0.0.1"]
    settings.BPM_PUBLIC_URL = "https://bpm.example.test"
    settings.BPM_NOTIFY_EMAIL = False
    yield service
    service.close()


def pushes(bp, event_type: str = "created") -> list[Delivery]:
    return list(Delivery.objects.filter(breakpoint=bp, channel="push", event_type=event_type))


def subscribe(push: PushService, user, device: str) -> PushSubscription:
    return subscription_save(user=user, data=push.subscription(device), label=f"{device} phone")


# --- what a push says ----------------------------------------------------------------------


def test_a_routed_expert_device_reads_the_title_agent_time_left_and_link_and_no_payload(
    push, expert_member, make_breakpoint
):
    tina = expert_member("tina", "tech-lead")
    subscribe(push, tina, "tina-phone")
    bp = make_breakpoint(
        payload={
            "question": SECRET_QUESTION,
            "title": "Schema migration",
            "expert": "tech-lead",
            "context": {"files": [{"path": "plan.sql", "content": "DROP TABLE customers;"}]},
        },
        ttl_seconds=3600,
    )

    (delivery,) = pushes(bp)
    assert delivery_attempt(delivery.pk).status == "delivered"

    (received,) = push.wait_for(1)
    notice = received.notice
    assert received.device == "tina-phone"
    assert notice["title"] == "Schema migration"
    assert notice["agent"] == "agent-a"
    assert notice["url"] == console_url(bp.pk)
    assert 3500 <= notice["secondsLeft"] <= 3600
    assert notice["tag"] == f"bpm-{bp.pk}"
    raw = repr(notice)
    assert SECRET_QUESTION not in raw and "DROP TABLE" not in raw and "plan.sql" not in raw
    # VAPID: the token was for this push service, from our subject, with our public key.
    assert received.vapid_claims["aud"] == push.origin
    assert received.vapid_claims["sub"] == "mailto:ops@example.test"
    assert f"k={vapid_public_key()}" in received.headers["authorization"]
    assert received.headers["urgency"] == "high"
    assert PushSubscription.objects.get(endpoint=push.endpoint("tina-phone")).last_sent_at


def test_an_untitled_breakpoint_is_named_by_its_id_not_its_question(
    push, reviewer, make_breakpoint
):
    subscribe(push, reviewer, "alice-phone")
    bp = make_breakpoint(payload={"question": SECRET_QUESTION})

    (delivery,) = pushes(bp)
    delivery_attempt(delivery.pk)

    (received,) = push.wait_for(1)
    assert received.notice["title"] == f"Breakpoint {bp.pk}"
    assert SECRET_QUESTION not in repr(received.notice)


def test_the_outcome_replaces_the_notification_with_how_it_ended(
    push, reviewer, make_breakpoint, expert_member
):
    tina = expert_member("tina", "tech-lead")
    subscribe(push, tina, "tina-phone")
    bp = make_breakpoint(payload={"question": "Ship?", "title": "Ship", "expert": "tech-lead"})
    delivery_attempt(pushes(bp)[0].pk)

    feedback_add(
        breakpoint_id=bp.pk, actor=Actor.for_user(tina), comment="ok", release=True, approved=True
    )
    (outcome,) = pushes(bp, "released")
    assert delivery_attempt(outcome.pk).status == "delivered"

    first, second = push.wait_for(2)
    assert second.notice["outcome"] == "Approved"
    assert second.notice["tag"] == first.notice["tag"]  # the device replaces the first one
    assert second.notice["secondsLeft"] is None


# --- who hears ------------------------------------------------------------------------------


def test_routes_name_experts_or_every_reviewer(push, admin_user, expert_member, make_breakpoint):
    tina = expert_member("tina", "tech-lead")
    oscar = expert_member("oscar", "ops-lead")
    outsider = UserFactory(username="no-role")
    for user, device in ((tina, "tina"), (oscar, "oscar")):
        subscribe(push, user, device)
    # A device of someone who lost the role is never a target.
    stale = subscribe(push, ReviewerFactory(username="leaver"), "leaver")
    stale.user.groups.clear()
    PushSubscription.objects.create(
        user=outsider, endpoint=push.endpoint("outsider"), p256dh="x", auth="y"
    )
    route_add(
        actor=Actor.for_user(admin_user),
        name="deploys",
        pattern="deploy.*",
        channels=[{"kind": "push", "to": "reviewers"}],
    )
    route_add(
        actor=Actor.for_user(admin_user),
        name="db",
        pattern="db.*",
        channels=[{"kind": "push", "to": "experts"}],
    )

    every = make_breakpoint(payload={"question": "?", "breakpointId": "deploy.web"})
    experts = make_breakpoint(
        payload={"question": "?", "breakpointId": "db.migrate", "expert": "ops-lead"}
    )

    def devices(bp) -> set[str]:
        return {d.target["subscription"] for d in pushes(bp)}

    ids = {s.endpoint.rsplit("/", 1)[-1]: s.pk for s in PushSubscription.objects.all()}
    assert devices(every) == {ids["tina"], ids["oscar"]}
    assert devices(experts) == {ids["oscar"]}


def test_unrouted_goes_to_its_experts_else_to_every_reviewer(push, expert_member, make_breakpoint):
    tina = expert_member("tina", "tech-lead")
    oscar = expert_member("oscar", "ops-lead")
    tina_device, oscar_device = subscribe(push, tina, "tina"), subscribe(push, oscar, "oscar")

    named = make_breakpoint(payload={"question": "?", "expert": "tech-lead"})
    anyone = make_breakpoint(payload={"question": "?"})

    assert {d.target["subscription"] for d in pushes(named)} == {tina_device.pk}
    assert {d.target["subscription"] for d in pushes(anyone)} == {tina_device.pk, oscar_device.pk}


def test_push_is_off_without_a_vapid_key(push, settings, reviewer, make_breakpoint):
    subscribe(push, reviewer, "alice")
    settings.BPM_VAPID_PRIVATE_KEY = ""

    bp = make_breakpoint()

    assert pushes(bp) == []


# --- the push service's answers ------------------------------------------------------------


def test_a_410_removes_the_device_and_fails_the_delivery_for_good(push, reviewer, make_breakpoint):
    device = subscribe(push, reviewer, "alice")
    push.answer_next("alice", 410)
    bp = make_breakpoint()

    outcome = delivery_attempt(pushes(bp)[0].pk)

    assert outcome.status == "failed"
    assert "removed" in outcome.error
    assert not PushSubscription.objects.filter(pk=device.pk).exists()
    # The next breakpoint has no device to go to.
    assert pushes(make_breakpoint()) == []


def test_a_500_is_retried_and_the_retry_is_delivered(push, reviewer, make_breakpoint):
    subscribe(push, reviewer, "alice")
    push.answer_next("alice", 500)
    bp = make_breakpoint()
    (delivery,) = pushes(bp)

    first = delivery_attempt(delivery.pk)
    delivery.refresh_from_db()
    Delivery.objects.filter(pk=delivery.pk).update(next_attempt_at=delivery.created_at)
    second = delivery_attempt(delivery.pk)

    assert (first.status, first.status_code) == ("retry", 500)
    assert second.status == "delivered"
    received = push.wait_for(2)
    assert [p.status for p in received] == [500, 201]
    assert received[0].notice == {
        **received[1].notice,
        "secondsLeft": received[0].notice["secondsLeft"],
    }


def test_a_429_waits_at_least_its_retry_after(push, reviewer, make_breakpoint):
    subscribe(push, reviewer, "alice")
    push.answer_next("alice", 429, retry_after="600")
    (delivery,) = pushes(make_breakpoint())

    outcome = delivery_attempt(delivery.pk)

    delivery.refresh_from_db()
    assert outcome.status == "retry"
    assert (delivery.next_attempt_at - delivery.created_at).total_seconds() >= 600


def test_a_device_whose_owner_lost_the_role_is_not_sent_to(push, reviewer, make_breakpoint):
    subscribe(push, reviewer, "alice")
    (delivery,) = pushes(make_breakpoint())
    reviewer.groups.clear()

    outcome = delivery_attempt(delivery.pk)

    assert outcome.status == "failed"
    assert push.wait_for(1, timeout=0.2) == []


# --- subscribing ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"endpoint": "https://evil.example.com/push/x"}, "endpoint"),
        ({"endpoint": "http://fcm.googleapis.com/fcm/send/x"}, "endpoint"),  # not https
        ({"endpoint": "https://user:pw@fcm.googleapis.com/x"}, "endpoint"),
        ({"endpoint": "https://fcm.googleapis.com.evil.example/x"}, "endpoint"),
        ({"endpoint": "https://fcm.googleapis.com/" + "x" * 1100}, "endpoint"),
        ({"endpoint": 7}, "endpoint"),
        ({"keys": {"p256dh": "AAAA", "auth": "AAAAAAAAAAAAAAAAAAAAAA"}}, "keys.p256dh"),
        ({"keys": {"p256dh": "BP" + "A" * 85, "auth": "AAAAAAAAAAAAAAAAAAAAAA"}}, "keys.p256dh"),
        ({"keys": {"auth": "AAAAAAAAAAAAAAAAAAAAAA"}}, "keys.p256dh"),
        ({"keys": "x"}, "keys"),
    ],
)
def test_a_subscription_the_service_would_not_send_to_is_refused(
    push, settings, reviewer, change, field
):
    settings.BPM_PUSH_SERVICES = ["fcm.googleapis.com"]
    data = push.subscription("alice")
    data["endpoint"] = "https://fcm.googleapis.com/fcm/send/abc"
    if "keys" in change and isinstance(change["keys"], dict):
        change = {"keys": {**change["keys"]}}
    data.update(change)

    with pytest.raises(InvalidInput) as refused:
        subscription_save(user=reviewer, data=data)

    assert field in refused.value.details
    assert not PushSubscription.objects.exists()


def test_a_subdomain_of_a_listed_push_service_is_accepted(push, settings, reviewer):
    settings.BPM_PUSH_SERVICES = ["notify.windows.com"]
    data = {**push.subscription("alice"), "endpoint": "https://wns2-by3p.notify.windows.com/w/?t=1"}

    assert subscription_save(user=reviewer, data=data).user == reviewer


def test_the_same_browser_again_updates_its_device_and_becomes_the_new_reviewers(
    push, reviewer, expert_member
):
    first = subscribe(push, reviewer, "shared")
    tina = expert_member("tina", "tech-lead")

    again = subscription_save(user=tina, data=push.subscription("shared"))

    assert again.pk == first.pk
    assert again.user == tina
    assert PushSubscription.objects.count() == 1


def test_only_reviewers_subscribe_and_each_has_a_bounded_number_of_devices(push, reviewer):
    with pytest.raises(Forbidden):
        subscription_save(user=UserFactory(username="no-role"), data=push.subscription("x"))
    for n in range(MAX_DEVICES_PER_USER):
        subscribe(push, reviewer, f"d{n}")

    with pytest.raises(InvalidInput):
        subscribe(push, reviewer, "one-more")

    assert PushSubscription.objects.filter(user=reviewer).count() == MAX_DEVICES_PER_USER


# --- the console's endpoints ----------------------------------------------------------------


def test_the_devices_endpoint_saves_and_removes_this_browsers_subscription(push, reviewer):
    browser = session_client(reviewer)
    data = push.subscription("alice")

    saved = browser.post("/push/devices", data, content_type="application/json")
    removed = browser.delete(
        "/push/devices", {"endpoint": data["endpoint"]}, content_type="application/json"
    )

    assert saved.status_code == 201
    assert removed.status_code == 200 and removed.json() == {"removed": 1}
    assert not PushSubscription.objects.exists()


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (b"{not json", 400, "validation_error"),
        (b"[1, 2]", 400, "validation_error"),
        (b'{"endpoint": "https://evil.example/x", "keys": {}}', 400, "validation_error"),
        (b'{"endpoint": "' + b"x" * 9000 + b'"}', 413, "payload_too_large"),
    ],
)
def test_the_devices_endpoint_answers_bad_input_in_the_error_envelope(
    push, reviewer, body, status, code
):
    response = session_client(reviewer).post("/push/devices", body, content_type="application/json")

    assert response.status_code == status
    assert response.json()["error"]["code"] == code
    assert not PushSubscription.objects.exists()


def test_the_devices_endpoint_needs_a_session_and_the_csrf_token(push, reviewer):
    data = push.subscription("alice")
    anonymous = Client().post("/push/devices", data, content_type="application/json")
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(reviewer)
    forged = strict.post("/push/devices", data, content_type="application/json")
    other = session_client(UserFactory(username="no-role"))
    outsider = other.post("/push/devices", data, content_type="application/json")

    assert anonymous.status_code == 401
    assert forged.status_code == 403
    assert outsider.status_code == 403
    assert not PushSubscription.objects.exists()


def test_the_service_worker_shows_notifications_and_caches_nothing(push):
    response = Client().get("/push/service-worker.js")

    script = response.content.decode()
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/javascript")
    assert "no-store" in response["Cache-Control"]
    assert "showNotification" in script and "notificationclick" in script
    assert '"fetch"' not in script and "caches" not in script


def test_the_devices_page_lists_only_the_reviewers_own_and_removes_them(push, reviewer):
    mine = subscribe(push, reviewer, "alice")
    theirs = subscribe(push, ReviewerFactory(username="bob"), "bob")
    browser = session_client(reviewer)

    page = browser.get("/admin/channels/pushsubscription/")
    other_delete = browser.post(
        f"/admin/channels/pushsubscription/{theirs.pk}/delete/", {"post": "yes"}
    )
    own_delete = browser.post(
        f"/admin/channels/pushsubscription/{mine.pk}/delete/", {"post": "yes"}
    )

    assert page.status_code == 200
    content = page.content.decode()
    assert "alice phone" in content and "bob phone" not in content
    assert f'data-public-key="{vapid_public_key()}"' in content
    assert (
        other_delete.status_code in (302, 403)
        and PushSubscription.objects.filter(pk=theirs.pk).exists()
    )
    assert own_delete.status_code == 302
    assert not PushSubscription.objects.filter(pk=mine.pk).exists()


def test_generate_vapid_key_makes_a_key_the_sender_uses(settings):
    out = io.StringIO()
    call_command("generate_vapid_key", stdout=out)
    lines = out.getvalue().splitlines()
    private = lines[0].split("=", 1)[1]
    public = lines[1].rsplit(" ", 1)[1]

    settings.BPM_VAPID_PRIVATE_KEY = private

    assert vapid_public_key() == public
    assert len(base64.urlsafe_b64decode(public + "==")) == 65


def test_subscription_targets_of_nobody_is_empty(db):
    assert subscriptions.subscription_targets([]) == []


def test_a_reviewer_cannot_remove_someone_elses_device_by_its_endpoint(push, reviewer):
    data = push.subscription("alice")
    subscription_save(user=reviewer, data=data)
    bob = session_client(ReviewerFactory(username="bob"))

    response = bob.delete(
        "/push/devices", {"endpoint": data["endpoint"]}, content_type="application/json"
    )

    assert response.json() == {"removed": 0}
    assert PushSubscription.objects.filter(user=reviewer).count() == 1


def test_a_reminder_pushes_again_and_says_so(push, reviewer, make_breakpoint):
    subscribe(push, reviewer, "alice")
    bp = make_breakpoint(payload={"question": "?", "title": "Ship", "remindEverySeconds": 300})

    reminded = breakpoints_remind_due(now=timezone.now() + timedelta(seconds=301))

    (delivery,) = pushes(bp, "reminder")
    assert reminded == 1
    assert delivery_attempt(delivery.pk).status == "delivered"
    (received,) = push.wait_for(1)
    assert received.notice["event"] == "reminder"
    assert received.headers["urgency"] == "normal"
