"""The reviewer console (Django admin) through a browser-like test client: its addresses,
its messages, and the markup a hostile agent sends to see whether it runs there."""

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
