"""Who may do what in the console: reviewers review, admins also expire and manage tokens."""

import re

import pytest
from django.contrib.admin.utils import quote

from accounts.models import ApiToken
from breakpoints.models import Breakpoint
from tests.support.console import (
    QUEUE_URL,
    SECTIONS_URL,
    action_url,
    review_url,
    session_client,
)
from tests.support.factories import UserFactory


def test_reviewer_sees_the_queue_and_a_breakpoint(reviewer_browser, make_breakpoint):
    bp = make_breakpoint()
    queue = reviewer_browser.get(QUEUE_URL)
    assert queue.status_code == 200
    assert bp.title.encode() in queue.content
    detail = reviewer_browser.get(review_url(bp.pk))
    assert detail.status_code == 200
    assert b"Approve the plan?" in detail.content
    assert b"Review and release" in detail.content


def test_reviewer_does_not_see_expire_delete_or_their_bulk_actions(
    reviewer_browser, make_breakpoint
):
    bp = make_breakpoint()
    detail = reviewer_browser.get(review_url(bp.pk))
    assert action_url("expire", bp.pk).encode() not in detail.content
    assert b"Delete" not in detail.content
    queue = reviewer_browser.get(QUEUE_URL).content.decode()
    # The bulk actions a reviewer has are the decisions (console.batches), no other.
    actions = re.findall(r'<option value="([a-z_]+)"', queue.split('name="action"')[1])
    assert actions == ["approve_selected", "reject_selected"]


def test_reviewer_posting_to_expire_is_refused_and_nothing_changes(
    reviewer_browser, make_breakpoint
):
    bp = make_breakpoint()
    assert reviewer_browser.get(action_url("expire", bp.pk)).status_code == 403
    response = reviewer_browser.post(action_url("expire", bp.pk), {"reason": "because"})
    assert response.status_code == 403
    assert Breakpoint.objects.get(pk=bp.pk).status == "waiting"


@pytest.mark.parametrize(
    "url",
    [
        "/admin/accounts/apitoken/",
        "/admin/accounts/apitoken/add/",
        "/admin/auth/user/",
        "/admin/auth/group/",
        "/admin/auth/user/add/",
    ],
)
def test_reviewer_cannot_open_tokens_or_users(reviewer_browser, url):
    assert reviewer_browser.get(url).status_code == 403


def test_reviewer_cannot_delete_or_add_breakpoints(reviewer_browser, make_breakpoint):
    bp = make_breakpoint()
    assert reviewer_browser.get(f"{QUEUE_URL}{quote(bp.pk)}/delete/").status_code == 403
    assert (
        reviewer_browser.post(f"{QUEUE_URL}{quote(bp.pk)}/delete/", {"post": "yes"}).status_code
        == 403
    )
    assert reviewer_browser.get(f"{QUEUE_URL}add/").status_code == 403
    assert Breakpoint.objects.filter(pk=bp.pk).exists()


def test_reviewer_index_lists_only_console_models(reviewer_browser):
    index = reviewer_browser.get(SECTIONS_URL)
    assert index.status_code == 200
    assert b"/admin/breakpoints/breakpoint/" in index.content
    assert b"/admin/audit/event/" in index.content
    assert b"/admin/accounts/apitoken/" not in index.content
    assert b"/admin/auth/user/" not in index.content


def test_admin_sees_expire_delete_tokens_and_users(admin_browser, make_breakpoint):
    bp = make_breakpoint()
    detail = admin_browser.get(review_url(bp.pk))
    assert action_url("expire", bp.pk).encode() in detail.content
    assert admin_browser.get(action_url("expire", bp.pk)).status_code == 200
    assert admin_browser.get("/admin/accounts/apitoken/").status_code == 200
    assert admin_browser.get("/admin/auth/user/").status_code == 200
    assert admin_browser.get(f"{QUEUE_URL}{quote(bp.pk)}/delete/").status_code == 200


def test_admin_can_delete_a_breakpoint_with_its_events(admin_browser, make_breakpoint):
    bp = make_breakpoint()
    response = admin_browser.post(f"{QUEUE_URL}{quote(bp.pk)}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert not Breakpoint.objects.filter(pk=bp.pk).exists()


def test_nobody_edits_a_breakpoint_not_even_a_superuser(db, make_breakpoint):
    """The payload is evidence: the review screen has no edit form, POSTing changes nothing."""
    superuser = UserFactory(username="su", is_superuser=True)
    bp = make_breakpoint()
    client = session_client(superuser)
    response = client.post(
        review_url(bp.pk), {"payload": '{"question": "forged"}', "status": "released"}
    )
    assert response.status_code == 200
    bp.refresh_from_db()
    assert bp.payload["question"] == "Approve the plan?"
    assert bp.status == "waiting"
    assert b'name="payload"' not in client.get(review_url(bp.pk)).content


def test_staff_without_a_role_sees_nothing(db, make_breakpoint):
    bp = make_breakpoint()
    client = session_client(UserFactory(username="staffer"))
    assert client.get(QUEUE_URL).status_code == 403
    assert client.get(review_url(bp.pk)).status_code == 403
    response = client.post(action_url("release", bp.pk), {"decision": "approve", "confirm": "yes"})
    assert response.status_code == 403
    assert Breakpoint.objects.get(pk=bp.pk).status == "waiting"


def test_anonymous_is_sent_to_login(client, make_breakpoint):
    bp = make_breakpoint()
    response = client.get(review_url(bp.pk))
    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]


def test_reviewer_group_has_view_permissions_only(console_reviewer):
    """The role sync grants Django's own view permissions, nothing more."""
    assert console_reviewer.has_perm("breakpoints.view_breakpoint")
    assert console_reviewer.has_perm("breakpoints.view_feedback")
    assert console_reviewer.has_perm("audit.view_event")
    for perm in (
        "breakpoints.change_breakpoint",
        "breakpoints.delete_breakpoint",
        "breakpoints.add_breakpoint",
        "accounts.view_apitoken",
        "accounts.add_apitoken",
        "auth.change_user",
        "auth.add_group",
    ):
        assert not console_reviewer.has_perm(perm), perm


def test_admin_group_has_all_console_permissions(console_admin):
    for perm in (
        "breakpoints.delete_breakpoint",
        "accounts.add_apitoken",
        "accounts.change_apitoken",
        "auth.change_user",
        "auth.view_group",
        "audit.view_event",
    ):
        assert console_admin.has_perm(perm), perm
    # Groups and permissions are the superusers' (see tests/accounts/test_console_people.py).
    for perm in ("auth.add_group", "auth.change_group", "auth.change_permission"):
        assert not console_admin.has_perm(perm), perm


def test_reviewer_create_gives_console_access(db, make_breakpoint):
    from accounts.people import reviewer_create

    user = reviewer_create(username="newbie", password="a-long-password-123")
    client = session_client(user)
    assert client.get(QUEUE_URL).status_code == 200
    assert client.get("/admin/accounts/apitoken/").status_code == 403
    assert ApiToken.objects.count() == 0
