"""The queue's rows: built once per page where Django builds them per row, same output."""

import unicodedata
from datetime import timedelta

import pytest
from django.contrib import admin
from django.contrib.admin.templatetags.admin_list import items_for_result
from django.test import RequestFactory
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.text import Truncator
from django.utils.translation import gettext_lazy

from breakpoints.models import Breakpoint
from console.admin import _truncated, queue_rows
from core.choices import Status
from tests.support.console import QUEUE_URL, review_url
from tests.support.factories import BreakpointFactory
from web.rendering import html as rendering


def test_each_row_links_to_its_own_review_screen(reviewer_browser):
    # Ids the admin's quote() and reverse()'s percent-encoding both change.
    ids = ["bp-plain", "bp_under_score", "bp with space/and:colon", "bp-é?#%"]
    for breakpoint_id in ids:
        BreakpointFactory(id=breakpoint_id, title=f"title of {breakpoint_id}")

    page = reviewer_browser.get(QUEUE_URL).content.decode()

    for breakpoint_id in ids:
        assert f'href="{review_url(breakpoint_id)}"' in page


@pytest.mark.parametrize(
    "text",
    [
        "",
        "short",
        "x" * 160,
        "x" * 161,
        "word " * 50,
        unicodedata.normalize("NFD", "café " * 10),  # decomposed: Truncator composes it
        unicodedata.normalize("NFD", "é" * 170),  # combining marks do not count
    ],
)
def test_truncated_is_truncator_chars(text):
    assert _truncated(text, 160) == Truncator(text).chars(160)


# --- the rows are the admin's own -----------------------------------------------------


def _queue_rows_both_ways(user, params: dict) -> tuple[list[list[str]], list[list[str]]]:
    """(Django's items_for_result, console.admin.queue_rows) for the queue page `params`."""
    request = RequestFactory().get(QUEUE_URL, params)
    request.user = user
    changelist = admin.site._registry[Breakpoint].get_changelist_instance(request)
    assert changelist.result_list, "the page has rows"
    stock = [
        [str(cell) for cell in items_for_result(changelist, bp, None)]
        for bp in changelist.result_list
    ]
    ours = [[str(cell) for cell in row] for row in queue_rows(changelist)]
    return stock, ours


@pytest.fixture
def varied_queue(db):
    """Rows with every shape a cell can take (times far from a unit's boundary)."""
    now = timezone.now()
    long_ago = now - timedelta(days=2, hours=5)
    BreakpointFactory(id="bp-waiting", expires_at=now + timedelta(hours=3, seconds=30))
    BreakpointFactory(id="bp-no-expiry", title=None, question="<b>Deploy</b> now?")
    BreakpointFactory(
        id="bp with space/and:colon",
        title="<script>alert(1)</script>",
        tags=["deploy", "<img src=x>", "a&b"],
        run_id=None,
        experts=["nobody-by-that-name", "owner"],
    )
    BreakpointFactory(id="bp-é?#%", agent_id="   ", tags=[], question="")
    for status, result in [
        (Status.RELEASED, {"approved": True}),
        (Status.RELEASED, {"approved": False}),
        (Status.RELEASED, {"approved": True, "option": "Plan <B>"}),
        (Status.EXPIRED, None),
        (Status.CANCELLED, None),
    ]:
        BreakpointFactory(status=status, result=result, tags=["deploy"])
    Breakpoint.objects.update(created_at=long_ago)


@pytest.mark.parametrize(
    "params",
    [{}, {"tag": "deploy"}, {"q": "plan", "status__exact": "released"}, {"o": "2.-5"}],
)
def test_queue_rows_are_the_cells_the_admin_writes(varied_queue, console_admin, params):
    stock, ours = _queue_rows_both_ways(console_admin, params)
    assert any("action-checkbox" in row[0] for row in stock)  # admins have actions
    assert ours == stock


def test_queue_rows_for_a_reviewer_with_the_decision_actions(varied_queue, console_reviewer):
    stock, ours = _queue_rows_both_ways(console_reviewer, {"tag": "deploy"})
    assert any("action-checkbox" in row[0] for row in stock)  # approve / reject selected
    assert ours == stock


FORMAT_ARGS = {
    "plain text": ("tag", "Deploy"),
    "markup characters": ("<script>alert('x')</script>", 'a "quoted" & amp'),
    "safe markup kept": (mark_safe("<b>kept</b>"), format_html("<i>{}</i>", "<x>")),
    "lazy text": (gettext_lazy("Select this object for an action - {}"), "é ✓"),
    "numbers and None": (3, None),
    "a format field inside an argument": ("{}", "{0}"),
}


@pytest.mark.parametrize("args", FORMAT_ARGS.values(), ids=FORMAT_ARGS.keys())
def test_the_cells_format_html_writes_what_django_s_writes(args):
    template = '<a href="?{}" title="x">{}</a>'

    written = rendering.format_html(template, *args)

    assert written == format_html(template, *args)
    assert isinstance(written, SafeString)
