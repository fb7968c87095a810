"""The queue's rows: built once per page where Django builds them per row, same output."""

import unicodedata

import pytest
from django.utils.text import Truncator

from console.admin import _truncated
from tests.factories import BreakpointFactory
from tests.reviews.conftest import QUEUE_URL, review_url


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
