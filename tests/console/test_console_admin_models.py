"""Tokens and the audit trail in the console: admins mint and revoke; events are read-only."""

from django.db import connection
from django.test.utils import CaptureQueriesContext

from accounts.models import ApiToken
from accounts.tokens import token_authenticate, token_create_for_agent
from audit.models import Event
from breakpoints.models import Feedback

TOKENS_URL = "/admin/accounts/apitoken/"


def test_admin_creates_an_agent_token_shown_once(admin_browser):
    page = admin_browser.get(TOKENS_URL + "add/")
    assert page.status_code == 200
    response = admin_browser.post(TOKENS_URL + "add/", {"agent_id": "agent-42", "name": "ci"})
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    raw = response.context["raw_token"]
    assert raw.startswith("bpma_") and raw in response.content.decode()
    token = ApiToken.objects.get(agent_id="agent-42")
    assert token.name == "ci" and token.token_hash != raw
    assert token_authenticate(raw) == token
    # Nowhere to be seen again.
    assert raw not in admin_browser.get(TOKENS_URL).content.decode()
    assert raw not in admin_browser.get(f"{TOKENS_URL}{token.pk}/change/").content.decode()


def test_token_form_rejects_a_blank_agent(admin_browser):
    response = admin_browser.post(TOKENS_URL + "add/", {"agent_id": ""})
    assert response.status_code == 200
    assert "raw_token" not in response.context
    assert not ApiToken.objects.exists()


def test_admin_revokes_tokens_with_the_action(admin_browser, db):
    token, raw = token_create_for_agent(agent_id="agent-a")
    response = admin_browser.post(
        TOKENS_URL, {"action": "revoke_selected", "_selected_action": [token.pk]}, follow=True
    )
    assert b"Revoked 1 token" in response.content
    token.refresh_from_db()
    assert token.revoked_at is not None
    assert token_authenticate(raw) is None


def test_tokens_are_never_edited_or_deleted_in_the_console(admin_browser, db):
    token, _ = token_create_for_agent(agent_id="agent-a")
    detail = admin_browser.get(f"{TOKENS_URL}{token.pk}/change/")
    assert detail.status_code == 200
    assert b'name="agent_id"' not in detail.content  # read-only view
    assert admin_browser.post(f"{TOKENS_URL}{token.pk}/delete/", {"post": "yes"}).status_code == 403
    assert ApiToken.objects.filter(pk=token.pk).exists()


def test_reviewer_cannot_revoke_tokens(reviewer_browser, db):
    token, _ = token_create_for_agent(agent_id="agent-a")
    response = reviewer_browser.post(
        TOKENS_URL, {"action": "revoke_selected", "_selected_action": [token.pk]}
    )
    assert response.status_code == 403
    token.refresh_from_db()
    assert token.revoked_at is None


def test_events_are_read_only_even_for_superusers(admin_browser, make_breakpoint):
    bp = make_breakpoint()
    event = Event.objects.get(breakpoint=bp)
    listing = admin_browser.get("/admin/audit/event/")
    assert listing.status_code == 200 and b"created" in listing.content
    assert admin_browser.get("/admin/audit/event/add/").status_code == 403
    assert (
        admin_browser.post(f"/admin/audit/event/{event.pk}/delete/", {"post": "yes"}).status_code
        == 403
    )
    view = admin_browser.post(f"/admin/audit/event/{event.pk}/change/", {"actor": "forged"})
    assert view.status_code == 403
    event.refresh_from_db()
    assert event.actor == "agent:agent-a"


def test_event_list_query_count_is_fixed(admin_browser, make_breakpoint):
    for _ in range(3):
        make_breakpoint()
    with CaptureQueriesContext(connection) as few:
        admin_browser.get("/admin/audit/event/")
    for _ in range(20):
        make_breakpoint()
    with CaptureQueriesContext(connection) as many:
        admin_browser.get("/admin/audit/event/")
    assert len(few) == len(many)


def test_feedback_list_is_read_only_and_flat(reviewer_browser, console_reviewer, make_breakpoint):
    from breakpoints.services import feedback_add
    from core.actors import Actor

    for _ in range(3):
        feedback_add(
            breakpoint_id=make_breakpoint().pk, actor=Actor.for_user(console_reviewer), comment="hm"
        )
    with CaptureQueriesContext(connection) as few:
        assert reviewer_browser.get("/admin/breakpoints/feedback/").status_code == 200
    for _ in range(10):
        feedback_add(
            breakpoint_id=make_breakpoint().pk, actor=Actor.for_user(console_reviewer), comment="hm"
        )
    with CaptureQueriesContext(connection) as many:
        assert reviewer_browser.get("/admin/breakpoints/feedback/").status_code == 200
    assert len(few) == len(many)
    feedback = Feedback.objects.first()
    assert (
        reviewer_browser.post(
            f"/admin/breakpoints/feedback/{feedback.pk}/delete/", {"post": "yes"}
        ).status_code
        == 403
    )
