"""Webhooks in the console: admins subscribe (the generated secret shown once), private
targets are refused unless allowed, deliveries list their attempts and can be re-sent.

Non-transactional `db` tests: on_commit publishing never runs, so nothing reaches a broker;
attempts are made by calling webhooks.delivery_attempt against a real local receiver.
"""

import pytest
from django.contrib.admin.utils import quote
from django.test import override_settings

from notifications import services as webhooks
from notifications.models import Delivery, DeliveryStatus, Webhook
from tests.support.console import SECTIONS_URL, messages, review_url
from tests.support.webhook_receiver import WebhookReceiver

WEBHOOKS_URL = "/admin/notifications/webhook/"
DELIVERIES_URL = "/admin/notifications/delivery/"
LOOPBACK = ["127.0.0.1"]


@pytest.fixture
def receiver():
    with WebhookReceiver() as running:
        yield running


def _subscribe(url: str) -> Webhook:
    with override_settings(BPM_WEBHOOK_ALLOWED_HOSTS=LOOPBACK):
        return webhooks.webhook_add(url=url)


@override_settings(BPM_WEBHOOK_ALLOWED_HOSTS=LOOPBACK)
def test_admin_adds_a_webhook_and_sees_the_generated_secret_once(admin_browser):
    assert admin_browser.get(WEBHOOKS_URL + "add/").status_code == 200
    response = admin_browser.post(
        WEBHOOKS_URL + "add/",
        {"url": "http://127.0.0.1:9/hook", "event_types": ["created", "released"], "active": "on"},
    )
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    webhook = Webhook.objects.get()
    assert webhook.url == "http://127.0.0.1:9/hook"
    assert webhook.event_types == ["created", "released"]
    assert webhook.secret.startswith("whsec_")
    assert webhook.secret in response.content.decode()
    # Never again: not in the list, not on the change page.
    assert webhook.secret not in admin_browser.get(WEBHOOKS_URL).content.decode()
    change = admin_browser.get(f"{WEBHOOKS_URL}{webhook.pk}/change/").content.decode()
    assert webhook.secret not in change


@override_settings(BPM_WEBHOOK_ALLOWED_HOSTS=LOOPBACK)
def test_a_secret_given_by_the_admin_is_not_echoed(admin_browser):
    response = admin_browser.post(
        WEBHOOKS_URL + "add/",
        {"url": "http://127.0.0.1:9/hook", "secret": "my-own-secret", "active": "on"},
    )
    assert response.status_code == 302
    assert Webhook.objects.get().secret == "my-own-secret"
    assert not any("my-own-secret" in m for m in messages(response))


def test_a_private_url_without_the_allowance_is_a_form_error(admin_browser):
    response = admin_browser.post(
        WEBHOOKS_URL + "add/", {"url": "http://127.0.0.1:9/hook", "active": "on"}
    )
    assert response.status_code == 200
    errors = response.context["adminform"].form.non_field_errors()
    assert any("private or loopback" in error for error in errors), errors
    assert "BPM_WEBHOOK_ALLOWED_HOSTS" in response.content.decode()
    assert not Webhook.objects.exists()


@pytest.mark.parametrize("url", [WEBHOOKS_URL, WEBHOOKS_URL + "add/", DELIVERIES_URL])
def test_reviewers_get_403_on_webhooks_and_deliveries(reviewer_browser, url):
    assert reviewer_browser.get(url).status_code == 403


def test_reviewers_do_not_see_webhooks_in_the_index(reviewer_browser):
    index = reviewer_browser.get(SECTIONS_URL).content.decode()
    assert WEBHOOKS_URL not in index and DELIVERIES_URL not in index


def test_reviewer_cannot_resend_deliveries(reviewer_browser, make_breakpoint):
    _subscribe("http://127.0.0.1:9/hook")
    delivery = Delivery.objects.get(breakpoint=make_breakpoint())
    response = reviewer_browser.post(
        DELIVERIES_URL, {"action": "resend_selected", "_selected_action": [delivery.pk]}
    )
    assert response.status_code == 403


def test_deliveries_list_a_pending_delivery_of_a_new_breakpoint(admin_browser, make_breakpoint):
    _subscribe("http://127.0.0.1:9/hook")
    bp = make_breakpoint()
    delivery = Delivery.objects.get(breakpoint=bp)
    listing = admin_browser.get(DELIVERIES_URL).content.decode()
    assert delivery.pk in listing and bp.pk in listing
    assert 'bpm-badge--waiting">pending' in listing
    detail = admin_browser.get(f"{DELIVERIES_URL}{quote(delivery.pk)}/change/").content.decode()
    assert "No attempt yet." in detail


def test_delivery_page_shows_each_attempt_and_resend_makes_it_pending(
    admin_browser, make_breakpoint, receiver
):
    _subscribe(receiver.url)
    bp = make_breakpoint()
    delivery = Delivery.objects.get(breakpoint=bp)
    with override_settings(BPM_WEBHOOK_ALLOWED_HOSTS=LOOPBACK):
        outcome = webhooks.delivery_attempt(delivery.pk)
    assert outcome.status == "delivered"
    assert [r.webhook_id for r in receiver.received] == [delivery.pk]

    detail = admin_browser.get(f"{DELIVERIES_URL}{quote(delivery.pk)}/change/")
    html = detail.content.decode()
    assert "<th>HTTP</th>" in html
    assert "<td>1</td>" in html and "<td>200</td>" in html and "delivered" in html
    assert 'bpm-badge--released">delivered' in admin_browser.get(DELIVERIES_URL).content.decode()

    response = admin_browser.post(
        DELIVERIES_URL,
        {"action": "resend_selected", "_selected_action": [delivery.pk]},
        follow=True,
    )
    assert any("Queued 1" in m for m in messages(response))
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.PENDING
    assert delivery.attempts == 1  # the history stays; the same webhook-id goes out again


def test_deliveries_are_read_only(admin_browser, make_breakpoint):
    _subscribe("http://127.0.0.1:9/hook")
    delivery = Delivery.objects.get(breakpoint=make_breakpoint())
    assert admin_browser.get(DELIVERIES_URL + "add/").status_code == 403
    response = admin_browser.post(f"{DELIVERIES_URL}{quote(delivery.pk)}/delete/", {"post": "yes"})
    assert response.status_code == 403
    assert Delivery.objects.filter(pk=delivery.pk).exists()


def test_admin_removes_a_webhook_and_keeps_its_deliveries(admin_browser, make_breakpoint):
    """The console's delete is the soft delete of remove_webhook: the history stays."""
    webhook = _subscribe("http://127.0.0.1:9/hook")
    kept = _subscribe("http://127.0.0.1:9/kept")
    bp = make_breakpoint()
    delivery = Delivery.objects.get(webhook=webhook)
    confirm = admin_browser.get(f"{WEBHOOKS_URL}{webhook.pk}/delete/")
    assert confirm.status_code == 200
    assert confirm.context["perms_lacking"] == set()
    assert delivery.pk not in confirm.content.decode()  # deliveries are not deleted with it

    response = admin_browser.post(f"{WEBHOOKS_URL}{webhook.pk}/delete/", {"post": "yes"})

    assert response.status_code == 302
    webhook.refresh_from_db()
    assert webhook.removed_at is not None and webhook.active is False
    delivery.refresh_from_db()
    assert (delivery.status, delivery.last_error) == (
        "failed",
        "cancelled: the webhook was removed",
    )
    assert Delivery.objects.filter(breakpoint=bp).count() == 2
    listing = admin_browser.get(WEBHOOKS_URL)
    assert [w.pk for w in listing.context["cl"].result_list] == [kept.pk]
    # Gone from the console: no change page to switch it back on.
    change = admin_browser.get(f"{WEBHOOKS_URL}{webhook.pk}/change/")
    assert change.status_code == 302
    webhook.refresh_from_db()
    assert webhook.active is False
    assert delivery.pk in admin_browser.get(DELIVERIES_URL).content.decode()


def test_bulk_delete_removes_the_selected_webhooks_softly(admin_browser, make_breakpoint):
    first = _subscribe("http://127.0.0.1:9/a")
    second = _subscribe("http://127.0.0.1:9/b")
    make_breakpoint()

    response = admin_browser.post(
        WEBHOOKS_URL,
        {"action": "delete_selected", "_selected_action": [first.pk, second.pk], "post": "yes"},
    )

    assert response.status_code == 302
    assert set(Webhook.objects.filter(removed_at__isnull=False).values_list("pk", flat=True)) == {
        first.pk,
        second.pk,
    }
    assert Delivery.objects.count() == 2


def test_resending_a_delivery_of_a_removed_webhook_is_refused_with_a_message(
    admin_browser, make_breakpoint
):
    webhook = _subscribe("http://127.0.0.1:9/hook")
    delivery = Delivery.objects.get(breakpoint=make_breakpoint())
    webhooks.webhook_remove(webhook_id=webhook.pk)

    response = admin_browser.post(
        DELIVERIES_URL,
        {"action": "resend_selected", "_selected_action": [delivery.pk]},
        follow=True,
    )

    assert response.status_code == 200
    assert any("was removed" in m for m in messages(response)), messages(response)
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.FAILED


def test_delivery_pages_show_the_webhook_url_without_its_credentials(
    admin_browser, make_breakpoint
):
    _subscribe("http://u:S3cret@127.0.0.1:9/hook?token=abc")
    delivery = Delivery.objects.get(breakpoint=make_breakpoint())

    listing = admin_browser.get(DELIVERIES_URL).content.decode()
    detail = admin_browser.get(f"{DELIVERIES_URL}{quote(delivery.pk)}/change/").content.decode()

    for html in (listing, detail):
        assert "http://127.0.0.1:9/hook" in html
        assert "S3cret" not in html and "token=abc" not in html


def test_admin_pauses_a_webhook(admin_browser):
    webhook = _subscribe("http://127.0.0.1:9/hook")
    response = admin_browser.post(
        f"{WEBHOOKS_URL}{webhook.pk}/change/", {"event_types": ["released"]}
    )
    assert response.status_code == 302
    webhook.refresh_from_db()
    assert (webhook.active, webhook.event_types) == (False, ["released"])


def test_deliveries_list_fits_a_laptop(admin_browser, make_breakpoint):
    """Short ids (whole on hover), status early, no created-at: Status is never off-screen."""
    url = "http://127.0.0.1:9/" + "long-path/" * 10
    _subscribe(url)
    bp = make_breakpoint()
    delivery = Delivery.objects.get(breakpoint=bp)
    response = admin_browser.get(DELIVERIES_URL)
    html = response.content.decode()
    columns = list(response.context["cl"].list_display)
    assert columns[1:3] == ["short_id", "status_badge"]  # after the action checkbox
    assert "created_at" not in columns
    assert f'<code title="{delivery.pk}">{delivery.pk[:13]}…</code>' in html
    link = f'<a href="{review_url(bp.pk)}"><code title="{bp.pk}">{bp.pk[:13]}…</code></a>'
    assert link in html  # to the review screen
    assert f'<span title="{url}">{url[:39]}…</span>' in html
