"""The queue: waiting first (oldest on top), filters that combine, ages and time left."""

import re
from datetime import timedelta

from django.utils import timezone
from django.utils.http import urlencode

from breakpoints.models import Breakpoint
from tests.support.console import QUEUE_URL
from tests.support.factories import BreakpointFactory


def _titles(response) -> list[str]:
    return re.findall(r'<span class="bpm-title">([^<]*)</span>', response.content.decode())


def _age(bp: Breakpoint, minutes: int) -> None:
    Breakpoint.objects.filter(pk=bp.pk).update(
        created_at=timezone.now() - timedelta(minutes=minutes)
    )


def test_waiting_first_oldest_waiting_on_top_then_newest_finished(reviewer_browser, db):
    for title, status, minutes in [
        ("new waiting", "waiting", 1),
        ("old released", "released", 500),
        ("oldest waiting", "waiting", 90),
        ("new expired", "expired", 2),
        ("middle waiting", "waiting", 30),
    ]:
        _age(BreakpointFactory(title=title, status=status), minutes)
    titles = _titles(reviewer_browser.get(QUEUE_URL))
    assert titles == [
        "oldest waiting",
        "middle waiting",
        "new waiting",
        "new expired",
        "old released",
    ]
    only_waiting = _titles(reviewer_browser.get(QUEUE_URL + "?status__exact=waiting"))
    assert only_waiting == ["oldest waiting", "middle waiting", "new waiting"]


def test_filters_combine_tag_agent_status_and_search(reviewer_browser, db):
    BreakpointFactory(title="A", tags=["billing", "db"], agent_id="agent-1", question="Migrate?")
    BreakpointFactory(title="B", tags=["billing"], agent_id="agent-2", question="Deploy?")
    BreakpointFactory(title="C", tags=["deploy"], agent_id="agent-1", question="Deploy now?")
    BreakpointFactory(title="D", tags=["billing"], agent_id="agent-1", status="released")

    def titles(query: str) -> set[str]:
        return set(_titles(reviewer_browser.get(QUEUE_URL + query)))

    assert titles("?tag=billing") == {"A", "B", "D"}
    assert titles("?tag=billing,db") == {"A"}  # comma: all must match
    assert titles("?agent=agent-1") == {"A", "C", "D"}
    assert titles("?agent=agent-1&tag=billing&status__exact=waiting") == {"A"}
    assert titles("?q=deploy") == {"B", "C"}
    assert titles("?q=C") == {"C"}  # titles too


def test_search_box_needs_every_word_and_keeps_a_quoted_phrase_whole(reviewer_browser, db):
    BreakpointFactory(title="Deploy billing", question="Ship it now?")
    BreakpointFactory(title="Deploy search", question="Now or later?")
    BreakpointFactory(title="Billing report", question="Send it?")

    def titles(query: str) -> set[str]:
        return set(_titles(reviewer_browser.get(QUEUE_URL + "?" + urlencode({"q": query}))))

    assert titles("deploy") == {"Deploy billing", "Deploy search"}
    assert titles("billing deploy") == {"Deploy billing"}  # words in any order, all of them
    assert titles("now billing") == {"Deploy billing"}  # one in the title, one in the question
    assert titles('"deploy billing"') == {"Deploy billing"}
    assert titles('"billing deploy"') == set()  # a quoted phrase is one term


def test_created_date_filter(reviewer_browser, db):
    _age(BreakpointFactory(title="last year"), 60 * 24 * 400)
    BreakpointFactory(title="today")
    since = (timezone.now() - timedelta(days=7)).replace(microsecond=0).isoformat()
    query = urlencode({"created_at__gte": since})
    assert _titles(reviewer_browser.get(f"{QUEUE_URL}?{query}")) == ["today"]
    page = reviewer_browser.get(QUEUE_URL).content.decode()
    assert "Past 7 days" in page  # the stock date filter in the sidebar


def test_input_filters_keep_the_other_filters(reviewer_browser, db):
    BreakpointFactory(title="A", tags=["billing"])
    html = reviewer_browser.get(QUEUE_URL + "?status__exact=waiting&q=x").content.decode()
    tag_form = html[html.index('name="tag"') - 600 : html.index('name="tag"')]
    assert '<input type="hidden" name="status__exact" value="waiting">' in tag_form
    assert '<input type="hidden" name="q" value="x">' in tag_form


def test_tag_links_are_url_encoded(reviewer_browser, db):
    BreakpointFactory(title="A", tags=["c++ & more"])
    html = reviewer_browser.get(QUEUE_URL).content.decode()
    assert 'href="?tag=c%2B%2B+%26+more"' in html
    assert set(_titles(reviewer_browser.get(QUEUE_URL + "?tag=c%2B%2B+%26+more"))) == {"A"}


def test_age_and_time_left_columns(reviewer_browser, db):
    soon = BreakpointFactory(title="soon", expires_at=timezone.now() + timedelta(minutes=3))
    _age(soon, 125)
    BreakpointFactory(title="later", expires_at=timezone.now() + timedelta(hours=5, minutes=1))
    BreakpointFactory(title="forever")
    BreakpointFactory(title="done", status="released")
    html = reviewer_browser.get(QUEUE_URL).content.decode()
    assert ">2h 5m</time>" in html
    assert re.search(r'class="bpm-soon"[^>]*>[23]m</time>', html)
    assert re.search(r'class="bpm-left"[^>]*>(5h|4h 59m)</time>', html)
    assert "no expiry" in html
    assert '<span class="bpm-badge bpm-badge--released">Released</span>' in html
    assert '<span class="bpm-badge bpm-badge--waiting">Waiting</span>' in html


def test_queue_script_and_styles_are_static_files(reviewer_browser, db):
    html = reviewer_browser.get(QUEUE_URL).content.decode()
    assert '<script src="/static/reviews/console.js" defer></script>' in html
    assert '<link rel="stylesheet" href="/static/reviews/console.css">' in html
    assert 'name="bpm-poll-ms"' in html
    assert 'id="bpm-results" data-bpm-refresh' in html


def test_queue_shows_an_overdue_breakpoint_as_expired(reviewer_browser, make_breakpoint):
    bp = make_breakpoint(ttl_seconds=60, payload={"title": "Overdue one", "question": "Still?"})
    Breakpoint.objects.filter(pk=bp.pk).update(expires_at=timezone.now() - timedelta(seconds=5))

    response = reviewer_browser.get(QUEUE_URL)

    assert response.status_code == 200
    assert Breakpoint.objects.get(pk=bp.pk).status == "expired"
    assert "bpm-badge--expired" in response.content.decode()


def test_released_rows_say_their_decision(reviewer_browser, db):
    """A rejection is not a green "released": the badge says approved, rejected or the option."""
    BreakpointFactory(title="yes", status="released", result={"approved": True})
    BreakpointFactory(title="no", status="released", result={"approved": False, "feedback": "x"})
    BreakpointFactory(
        title="pick", status="released", result={"approved": True, "option": "Ship <b>Monday</b>"}
    )
    BreakpointFactory(title="late", status="expired", result={"approved": False})
    html = reviewer_browser.get(QUEUE_URL).content.decode()
    assert (
        '<span class="bpm-badge bpm-badge--approved" data-bpm-decision="approved">'
        "Released · approved</span>"
    ) in html
    assert (
        '<span class="bpm-badge bpm-badge--rejected" data-bpm-decision="rejected">'
        "Released · rejected</span>"
    ) in html
    assert (
        'Released · chose <span class="bpm-badge__option" title="Ship &lt;b&gt;Monday&lt;/b&gt;">'
        "“Ship &lt;b&gt;Monday&lt;/b&gt;”</span>"
    ) in html
    assert "<b>Monday" not in html
    assert '<span class="bpm-badge bpm-badge--expired">Expired</span>' in html  # no decision


def test_a_long_option_is_cut_short_in_the_badge(reviewer_browser, db):
    option = "Ship it on Monday morning after the database backup has been verified twice"
    BreakpointFactory(status="released", result={"approved": True, "option": option})
    html = reviewer_browser.get(QUEUE_URL).content.decode()
    assert f'title="{option}">“{option[:39]}…”</span>' in html


def test_the_browser_tab_names_the_queue(reviewer_browser, db):
    """Not Django's "Select breakpoint to view" (issue 31): the page's heading, Queue."""
    page = reviewer_browser.get(QUEUE_URL).content.decode()

    assert re.search(r"<title>\s*Queue \| Breakpoint Manager\s*</title>", page)
    assert "Select breakpoint" not in page
