"""ServiceAdmin, the console's one way to write: tokens and webhooks through their services.

Adding shows a success message or a page shown once (no-store); the webhook change step
goes through webhook_update; a service's refusal comes back as a form error; tokens have
no change step and are never deleted.
"""

from unittest import mock

import pytest
from django.test import override_settings

from accounts.admin import tokens as token_admin
from accounts.models import ApiToken
from accounts.tokens import token_create_for_agent
from core.exceptions import InvalidInput, NotFound
from notifications import admin as webhook_admin
from notifications import services as webhooks
from notifications.models import Webhook
from tests.support.console import messages

TOKENS_URL = "/admin/accounts/apitoken/"
WEBHOOKS_URL = "/admin/notifications/webhook/"
LOOPBACK = ["127.0.0.1"]


@pytest.fixture
def webhook(db) -> Webhook:
    with override_settings(BPM_WEBHOOK_ALLOWED_HOSTS=LOOPBACK):
        return webhooks.webhook_add(url="http://127.0.0.1:9/hook", event_types=["created"])


# --- tokens ------------------------------------------------------------------------------


def test_the_token_form_is_the_service_form(admin_browser):
    page = admin_browser.get(TOKENS_URL + "add/")
    assert page.status_code == 200
    assert [t.name for t in page.templates][0] == "admin/breakpoints/service_form.html"
    html = page.content.decode()
    assert 'id="apitoken_form"' in html and "Create token" in html
    assert page.context["title"] == "New agent token"


def test_the_raw_token_page_is_never_cached_nor_redirected(admin_browser):
    response = admin_browser.post(TOKENS_URL + "add/", {"agent_id": "agent-7"})
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    assert "admin/accounts/apitoken/created.html" in [t.name for t in response.templates]
    assert response.context["token"].agent_id == "agent-7"


def test_a_token_service_refusal_is_a_form_error(admin_browser):
    refusal = InvalidInput("Not an agent id we accept.", {"agent_id": ["Not accepted."]})
    with mock.patch.object(token_admin, "token_create_for_agent", side_effect=refusal):
        response = admin_browser.post(TOKENS_URL + "add/", {"agent_id": "agent-7"})
    assert response.status_code == 200
    assert response.context["form"].errors["agent_id"] == ["Not accepted."]
    assert "raw_token" not in response.context
    assert not ApiToken.objects.exists()


def test_tokens_offer_no_delete_and_no_edit(admin_browser):
    token, _ = token_create_for_agent(agent_id="agent-a")
    listing = admin_browser.get(TOKENS_URL)
    actions = [name for name, _ in listing.context["action_form"].fields["action"].choices]
    assert "delete_selected" not in actions and "revoke_selected" in actions
    assert admin_browser.get(f"{TOKENS_URL}{token.pk}/delete/").status_code == 403
    detail = admin_browser.post(f"{TOKENS_URL}{token.pk}/change/", {"name": "forged"})
    assert detail.status_code == 403  # view-only
    token.refresh_from_db()
    assert token.name == ""


# --- webhooks ------------------------------------------------------------------------------


@override_settings(BPM_WEBHOOK_ALLOWED_HOSTS=LOOPBACK)
def test_adding_a_paused_webhook_with_its_own_secret_goes_back_to_the_list(admin_browser):
    with mock.patch.object(webhook_admin, "webhook_add", wraps=webhooks.webhook_add) as add:
        response = admin_browser.post(
            WEBHOOKS_URL + "add/", {"url": "http://u:pw@127.0.0.1:9/hook", "secret": "mine"}
        )
    assert response.status_code == 302 and response["Location"] == WEBHOOKS_URL
    add.assert_called_once()
    webhook = Webhook.objects.get()
    assert (webhook.active, webhook.secret, webhook.event_types) == (False, "mine", [])
    [message] = messages(response)
    assert message == f"Added webhook {webhook.pk}: http://127.0.0.1:9/hook (all)."
    assert "mine" not in message and "pw" not in message


def test_the_webhook_change_page_is_the_service_form(admin_browser, webhook):
    page = admin_browser.get(f"{WEBHOOKS_URL}{webhook.pk}/change/")
    assert page.status_code == 200
    form = page.context["form"]
    assert set(form.fields) == {"event_types", "active"}  # the URL and secret stay
    assert form.initial == {"event_types": ["created"], "active": True}
    html = page.content.decode()
    assert "http://127.0.0.1:9/hook" in html  # shown, not editable
    assert 'name="url"' not in html and 'name="secret"' not in html
    assert webhook.secret not in html
    assert f'href="{WEBHOOKS_URL}{webhook.pk}/delete/"' in html


def test_the_webhook_change_step_goes_through_webhook_update(admin_browser, webhook):
    with mock.patch.object(
        webhook_admin, "webhook_update", wraps=webhooks.webhook_update
    ) as update:
        response = admin_browser.post(
            f"{WEBHOOKS_URL}{webhook.pk}/change/",
            {"event_types": ["released", "expired"], "active": "on"},
        )
    assert response.status_code == 302 and response["Location"] == WEBHOOKS_URL
    update.assert_called_once_with(
        webhook_id=webhook.pk, event_types=["released", "expired"], active=True
    )
    assert messages(response) == [f"Saved webhook {webhook.pk}: released, expired, active."]


def test_a_webhook_change_refused_by_the_service_is_a_form_error(admin_browser, webhook):
    gone = NotFound(f"No webhook with id {webhook.pk}.")
    with mock.patch.object(webhook_admin, "webhook_update", side_effect=gone):
        response = admin_browser.post(f"{WEBHOOKS_URL}{webhook.pk}/change/", {"active": "on"})
    assert response.status_code == 200
    assert response.context["form"].non_field_errors() == [f"No webhook with id {webhook.pk}."]


def test_a_bad_event_type_never_reaches_the_service(admin_browser, webhook):
    with mock.patch.object(webhook_admin, "webhook_update") as update:
        response = admin_browser.post(
            f"{WEBHOOKS_URL}{webhook.pk}/change/", {"event_types": ["nope"]}
        )
    assert response.status_code == 200
    assert "event_types" in response.context["form"].errors
    update.assert_not_called()


def test_reviewers_cannot_change_a_webhook(reviewer_browser, webhook):
    url = f"{WEBHOOKS_URL}{webhook.pk}/change/"
    assert reviewer_browser.get(url).status_code == 403
    assert reviewer_browser.post(url, {"active": ""}).status_code == 403
    webhook.refresh_from_db()
    assert webhook.active is True


def test_a_missing_webhook_change_page_redirects_with_a_warning(admin_browser, db):
    response = admin_browser.get(f"{WEBHOOKS_URL}999/change/")
    assert response.status_code == 302
    assert any("doesn’t exist" in m for m in messages(response))


def test_removing_a_webhook_goes_through_webhook_remove(admin_browser, webhook):
    with mock.patch.object(
        webhook_admin, "webhook_remove", wraps=webhooks.webhook_remove
    ) as remove:
        response = admin_browser.post(f"{WEBHOOKS_URL}{webhook.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    remove.assert_called_once_with(webhook_id=webhook.pk)
    assert Webhook.objects.filter(pk=webhook.pk, removed_at__isnull=False).exists()
