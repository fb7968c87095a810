"""The console on a phone: the web app manifest and its icons, the tags that make pages fit
a phone's screen, and no page holding a decision form kept for offline use."""

import json
import re
import struct

import pytest
from django.contrib.staticfiles import finders
from django.test import Client

from tests.support.console import QUEUE_URL, action_url, review_url

MANIFEST_URL = "/admin/manifest.webmanifest"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _static_file(url: str) -> bytes:
    """The bytes of the static file at `url` (/static/...), wherever the finders keep it."""
    assert url.startswith("/static/"), url
    path = finders.find(url.removeprefix("/static/"))
    assert path, f"no static file behind {url}"
    with open(path, "rb") as file:
        return file.read()


def _png_size(data: bytes) -> tuple[int, int]:
    """(width, height) from a PNG's header chunk (IHDR, always first)."""
    assert data.startswith(PNG_SIGNATURE)
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def _manifest(client: Client) -> dict:
    response = client.get(MANIFEST_URL)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/manifest+json"
    return json.loads(response.content)


# --- the manifest ----------------------------------------------------------------------


def test_the_manifest_installs_the_console_opening_on_the_waiting_queue(
    db, django_assert_num_queries
):
    with django_assert_num_queries(0):  # anonymous: browsers fetch it without cookies
        manifest = _manifest(Client())
    assert manifest["name"] == "Breakpoint Manager"
    assert manifest["short_name"] == "Breakpoints"
    assert manifest["display"] == "standalone"
    assert manifest["scope"] == "/admin/"
    assert manifest["start_url"] == QUEUE_URL + "?status__exact=waiting"
    assert manifest["start_url"].startswith(manifest["scope"])
    assert re.fullmatch(r"#[0-9a-f]{6}", manifest["theme_color"])
    assert re.fullmatch(r"#[0-9a-f]{6}", manifest["background_color"])


def test_the_manifests_icons_are_pngs_of_the_sizes_it_declares(db):
    icons = _manifest(Client())["icons"]
    for icon in icons:
        assert icon["type"] == "image/png"
        width, height = _png_size(_static_file(icon["src"]))
        assert icon["sizes"] == f"{width}x{height}", icon
    offered = {(icon["sizes"], icon["purpose"]) for icon in icons}
    assert {("192x192", "any"), ("512x512", "any"), ("512x512", "maskable")} <= offered


def test_the_manifest_is_only_read(db):
    assert Client().post(MANIFEST_URL).status_code == 405
    assert Client().head(MANIFEST_URL).status_code == 200


# --- the pages' head -------------------------------------------------------------------


def _head(html: str) -> str:
    return html[: html.index("</head>")]


@pytest.fixture
def console_pages(reviewer_browser, make_breakpoint):
    """The queue, the grouped queue and a review page, as a reviewer gets them."""
    bp = make_breakpoint()
    return {
        url: reviewer_browser.get(url).content.decode()
        for url in (QUEUE_URL, f"{QUEUE_URL}groups/", review_url(bp.pk))
    }


def test_console_pages_name_the_manifest_and_fit_the_device_width(db, console_pages):
    login = Client().get("/admin/login/").content.decode()
    for url, html in {**console_pages, "/admin/login/": login}.items():
        head = _head(html)
        assert f'<link rel="manifest" href="{MANIFEST_URL}">' in head, url
        viewport = re.search(r'<meta name="viewport" content="([^"]*)">', head)
        assert viewport, url
        assert viewport.group(1).startswith("width=device-width, initial-scale=1")
        # A phone's reader may always zoom.
        assert "user-scalable" not in viewport.group(1) and "maximum-scale" not in viewport.group(1)


def test_the_home_screen_icon_for_ios_is_a_180_px_png(console_pages):
    head = _head(console_pages[QUEUE_URL])
    icon = re.search(r'<link rel="apple-touch-icon" href="([^"]+)">', head)
    assert icon
    assert _png_size(_static_file(icon.group(1))) == (180, 180)


def test_the_phone_styles_come_after_the_admins_responsive_ones(console_pages):
    for url, html in console_pages.items():
        head = _head(html)
        assert head.index("admin/css/responsive.css") < head.index("reviews/phone.css"), url


# --- the phone's keyboard --------------------------------------------------------------


def _tag(html: str, name: str) -> str:
    """The opening tag of the form field named `name`."""
    match = re.search(rf'<(?:input|textarea)[^>]* name="{re.escape(name)}"[^>]*>', html)
    assert match, name
    return match.group(0)


def test_a_forms_fields_get_the_keyboard_their_values_need(reviewer_browser, make_breakpoint):
    form = {
        "type": "object",
        "properties": {
            "replicas": {"type": "integer", "minimum": 1},
            "offset": {"type": "integer"},
            "ratio": {"type": "number", "minimum": 0},
            "path": {"type": "string"},
            "hosts": {"type": "array", "items": {"type": "string"}},
            "limits": {"type": "object"},
        },
    }
    bp = make_breakpoint(
        payload={"title": "Deploy", "question": "Deploy?", "form": form, "proposal": {}}
    )
    html = reviewer_browser.get(review_url(bp.pk)).content.decode()
    assert 'inputmode="numeric"' in _tag(html, "value__replicas")
    assert "inputmode" not in _tag(html, "value__offset")  # a keypad has no minus sign
    assert 'inputmode="decimal"' in _tag(html, "value__ratio")
    for name in ("value__path", "value__hosts", "value__limits"):
        tag = _tag(html, name)
        assert 'autocapitalize="off"' in tag and 'spellcheck="false"' in tag, tag
    assert 'inputmode="numeric"' in _tag(html, "grant_uses")
    assert "autocapitalize" not in _tag(html, "comment")  # sentences for a person


def test_the_queues_filters_type_values_as_they_are_and_search(reviewer_browser):
    html = reviewer_browser.get(QUEUE_URL).content.decode()
    for name in ("tag", "key", "agent", "run"):
        tag = _tag(html, name)
        assert 'autocapitalize="off"' in tag and 'enterkeyhint="search"' in tag, tag


# --- nothing kept offline --------------------------------------------------------------


def _never_stored(response) -> None:
    """The response may not be stored anywhere, by the browser or on the way."""
    directives = {part.strip() for part in response["Cache-Control"].split(",")}
    assert {"no-store", "no-cache", "private", "max-age=0"} <= directives, response["Cache-Control"]


def test_the_queue_and_its_groups_are_never_stored(reviewer_browser, make_breakpoint):
    make_breakpoint()
    for url in (QUEUE_URL, f"{QUEUE_URL}?status__exact=waiting", f"{QUEUE_URL}groups/"):
        response = reviewer_browser.get(url)
        assert response.status_code == 200, url
        _never_stored(response)


def test_the_review_page_and_its_confirmations_are_never_stored(reviewer_browser, make_breakpoint):
    bp = make_breakpoint()
    review = reviewer_browser.get(review_url(bp.pk))
    assert b'class="bpm-decide"' in review.content
    _never_stored(review)
    confirm = reviewer_browser.post(
        action_url("release", bp.pk), {"decision": "approve", "comment": "ok"}
    )
    assert b'id="bpm-confirm-form"' in confirm.content
    _never_stored(confirm)
    always = reviewer_browser.post(action_url("always_approve", bp.pk), {"comment": "ok"})
    assert b'id="bpm-confirm-form"' in always.content
    _never_stored(always)


def test_a_batchs_confirmation_is_never_stored(reviewer_browser, make_breakpoint):
    bp = make_breakpoint()
    response = reviewer_browser.post(
        QUEUE_URL, {"action": "approve_selected", "_selected_action": [bp.pk]}
    )
    assert b'id="bpm-batch-form"' in response.content
    _never_stored(response)


def test_expire_and_cancel_confirmations_are_never_stored(admin_browser, make_breakpoint):
    bp = make_breakpoint()
    for name in ("expire", "cancel"):
        response = admin_browser.get(action_url(name, bp.pk))
        assert response.status_code == 200, name
        _never_stored(response)


def test_an_edited_forms_confirmation_is_never_stored(reviewer_browser, make_breakpoint):
    bp = make_breakpoint(
        payload={
            "question": "Deploy?",
            "form": {"type": "object", "properties": {"replicas": {"type": "integer"}}},
            "proposal": {"replicas": 3},
        }
    )
    response = reviewer_browser.post(
        action_url("release", bp.pk), {"decision": "approve", "value__replicas": "5"}
    )
    assert b'id="bpm-answer-changes"' in response.content
    _never_stored(response)
