"""Console fixtures: browser-session clients for a reviewer and an admin, rich breakpoints."""

import pytest
from django.contrib.admin.utils import quote
from django.test import Client
from django.urls import reverse

from tests.factories import AdminFactory, ReviewerFactory
from tests.support.console import session_client

XSS_SCRIPT = "<script>alert(1)</script>"
XSS_IMG = "<img src=x onerror=alert(1)>"
XSS = XSS_SCRIPT + XSS_IMG


@pytest.fixture
def console_reviewer(db):
    return ReviewerFactory(username="rita")


@pytest.fixture
def console_admin(db):
    return AdminFactory(username="adam")


@pytest.fixture
def reviewer_browser(console_reviewer) -> Client:
    """A logged-in reviewer (group reviewers, is_staff)."""
    return session_client(console_reviewer)


@pytest.fixture
def admin_browser(console_admin) -> Client:
    """A logged-in admin (groups reviewers and admins, is_staff)."""
    return session_client(console_admin)


def review_url(breakpoint_id: str) -> str:
    return reverse("admin:breakpoints_breakpoint_change", args=[quote(breakpoint_id)])


def action_url(name: str, breakpoint_id: str) -> str:
    return reverse(f"admin:breakpoints_breakpoint_{name}", args=[quote(breakpoint_id)])


QUEUE_URL = "/admin/breakpoints/breakpoint/"
# The stock app index ("All sections"): /admin/ itself sends reviewers to the queue.
SECTIONS_URL = "/admin/sections/"


@pytest.fixture
def rich_payload():
    """A babysitter payload with one context file of each format, plus one without content."""
    return {
        "question": "Ship the new billing plan?",
        "title": "Billing plan review",
        "tags": ["billing", "design"],
        "attempt": 2,
        "previousFeedback": "Split the migration in two.",
        "options": ["Ship now", "Ship Monday"],
        "context": {
            "runId": "run-42",
            "files": [
                {
                    "path": "artifacts/plan.md",
                    "format": "markdown",
                    "content": "# The plan\n\n- one\n- two",
                },
                {
                    "path": "code/main.py",
                    "format": "code",
                    "language": "python",
                    "content": "def main():\n    return 42\n",
                },
                {"path": "notes.txt", "format": "text", "content": "plain <b>notes</b>"},
                {"path": "report.html", "format": "html", "content": "<h1>Report</h1>"},
                {"path": "artifacts/missing.md", "format": "markdown"},
            ],
        },
    }
