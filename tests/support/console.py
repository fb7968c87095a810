"""The reviewer console (Django admin) through a browser-like test client: its addresses,
its messages, and the markup a hostile agent sends to see whether it runs there."""

from html.parser import HTMLParser

from django.contrib.admin.utils import quote
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse

QUEUE_URL = "/admin/breakpoints/breakpoint/"
# The stock app index ("All sections"): /admin/ itself sends reviewers to the queue.
SECTIONS_URL = "/admin/sections/"

# Markup that must never run in the console, whoever wrote it.
XSS_SCRIPT = "<script>alert(1)</script>"
XSS_IMG = "<img src=x onerror=alert(1)>"
XSS = XSS_SCRIPT + XSS_IMG


def session_client(user) -> Client:
    """A test client logged in as `user` (a session, as a browser has)."""
    client = Client()
    client.force_login(user)
    return client


def messages(response) -> list[str]:
    """The console's flash messages on this response."""
    return [str(m) for m in get_messages(response.wsgi_request)]


def review_url(breakpoint_id: str) -> str:
    return reverse("admin:breakpoints_breakpoint_change", args=[quote(breakpoint_id)])


def action_url(name: str, breakpoint_id: str) -> str:
    return reverse(f"admin:breakpoints_breakpoint_{name}", args=[quote(breakpoint_id)])


class _Page(HTMLParser):
    """Collects what a browser would execute: script bodies, event-handler attributes, frames."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.scripts: list[str] = []
        self.handlers: list[tuple[str, str]] = []
        self.iframes: list[dict[str, str | None]] = []
        self.images: list[dict[str, str | None]] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        self.handlers += [(tag, name) for name, _ in attrs if name.lower().startswith("on")]
        if tag == "script":
            self._in_script = True
            self.scripts.append(attributes.get("src") or "")
        elif tag == "iframe":
            self.iframes.append(attributes)
        elif tag == "img":
            self.images.append(attributes)

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.scripts[-1] += data


def assert_inert(html: str) -> _Page:
    """No agent-controlled script element, handler attribute or image; frames sandboxed."""
    assert "<script>alert(1)" not in html
    page = _Page()
    page.feed(html)
    assert page.handlers == []
    assert not [s for s in page.scripts if "alert" in s]
    assert all(
        src.startswith("/static/") or src.startswith("/admin/") for src in page.scripts if src
    )
    assert not [img for img in page.images if img.get("src") == "x"]
    for frame in page.iframes:
        assert frame.get("sandbox") == "", frame  # no allow-scripts, no allow-same-origin
        assert "src" not in frame
    return page
