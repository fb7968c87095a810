"""The queue counts its rows only up to a cap, so a huge table costs no full COUNT(*)."""

from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.support.console import QUEUE_URL
from tests.support.factories import BreakpointFactory
from web.console import pagination


def test_queue_count_stops_at_the_cap(reviewer_browser, monkeypatch):
    monkeypatch.setattr(pagination, "COUNT_CAP", 3)
    BreakpointFactory.create_batch(5)

    with CaptureQueriesContext(connection) as queries:
        response = reviewer_browser.get(QUEUE_URL + "?status__exact=waiting")

    assert response.status_code == 200
    assert "3+ breakpoints" in response.content.decode()
    counts = [q["sql"] for q in queries if "COUNT(" in q["sql"].upper() and "LIMIT 4" in q["sql"]]
    assert counts, "the queue's count must be limited"


def test_a_count_under_the_cap_is_exact(reviewer_browser, monkeypatch):
    monkeypatch.setattr(pagination, "COUNT_CAP", 3)
    BreakpointFactory.create_batch(3)

    response = reviewer_browser.get(QUEUE_URL + "?status__exact=waiting")

    assert "3 breakpoints" in response.content.decode()
    assert "3+ breakpoints" not in response.content.decode()
