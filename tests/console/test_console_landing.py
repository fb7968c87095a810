"""The console's landing page and chrome: reviewers start on the waiting queue, the app
index is "All sections", no dead "View site" link, no nav sidebar, an inline favicon."""

from django.contrib import admin
from django.test import Client

from tests.support.console import QUEUE_URL, SECTIONS_URL, session_client
from tests.support.factories import PASSWORD, UserFactory

WAITING_QUEUE = QUEUE_URL + "?status__exact=waiting"


def test_the_admin_index_sends_reviewers_and_admins_to_the_waiting_queue(
    reviewer_browser, admin_browser
):
    for client in (reviewer_browser, admin_browser):
        response = client.get("/admin/")
        assert response.status_code == 302
        assert response["Location"] == WAITING_QUEUE


def test_logging_in_lands_on_the_waiting_queue(console_reviewer, make_breakpoint):
    make_breakpoint(payload={"title": "Still waiting", "question": "Go?"})
    response = Client().post(
        "/admin/login/?next=/admin/",
        {"username": "rita", "password": PASSWORD, "next": "/admin/"},
        follow=True,
    )
    assert response.redirect_chain[-1] == (WAITING_QUEUE, 302)
    assert "Still waiting" in response.content.decode()


def test_all_sections_keeps_the_app_index_one_click_away(reviewer_browser, admin_browser):
    queue = reviewer_browser.get(QUEUE_URL).content.decode()
    assert f'<a href="{SECTIONS_URL}" id="bpm-sections">All sections</a>' in queue
    sections = admin_browser.get(SECTIONS_URL)
    assert sections.status_code == 200
    html = sections.content.decode()
    for url in (
        "/admin/breakpoints/breakpoint/",
        "/admin/accounts/apitoken/",
        "/admin/auth/user/",
    ):
        assert url in html


def test_staff_without_a_role_keep_the_stock_index(db):
    client = session_client(UserFactory(username="staffer"))
    response = client.get("/admin/")
    assert response.status_code == 200  # not redirected into a 403 on the queue
    assert "/admin/breakpoints/breakpoint/" not in response.content.decode()


def test_anonymous_index_asks_for_a_login(client, db):
    response = client.get("/admin/")
    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")


def test_no_view_site_link_and_no_nav_sidebar(reviewer_browser):
    assert admin.site.site_url is None  # "/" has no page: the link was a 404
    assert admin.site.enable_nav_sidebar is False
    html = reviewer_browser.get(QUEUE_URL).content.decode()
    assert "View site" not in html
    assert 'id="nav-sidebar"' not in html
    assert "nav_sidebar.js" not in html


def test_every_console_page_declares_an_inline_favicon(client, reviewer_browser):
    """A <link rel="icon"> with a data: URI: browsers no longer ask for /favicon.ico."""
    icon = '<link rel="icon" type="image/svg+xml" href="data:image/svg+xml,'
    assert icon in client.get("/admin/login/").content.decode()
    assert icon in reviewer_browser.get(QUEUE_URL).content.decode()
