"""Context files crafted to be slow or deep to render never stop a reviewer deciding.

Each file below took seconds to minutes of CPU (or was a RecursionError: a 500) when the
review page and the emailed decision page converted markdown with Python-Markdown and
highlighted code without a budget. Now both pages answer with the decision form, showing
what ran out of time as escaped text. No timing is asserted here: benchmarks/render_bench.py
prints how long each page takes.
"""

from urllib.parse import urlsplit

import pytest

from channels.email.links import decision_urls
from tests.support.console import review_url

NORMAL_MARKDOWN = "# Plan\n\nSome *text*, `code` and [a link](https://example.com).\n\n- a\n- b\n\n"

CRAFTED_FILES = {
    "40,000 brackets": {"path": "brackets.md", "format": "markdown", "content": "[" * 40_000},
    "list nested 500 deep": {
        "path": "nested.md",
        "format": "markdown",
        "content": "".join(f"{'  ' * depth}- item\n" for depth in range(500)),
    },
    "autoit blanks": {
        "path": "slow.au3",
        "format": "code",
        "language": "autoit",
        "content": " \t" * 6_000,
    },
    "300,000-character markdown": {
        "path": "big.md",
        "format": "markdown",
        "content": (NORMAL_MARKDOWN * (300_000 // len(NORMAL_MARKDOWN) + 1))[:300_000],
    },
}


@pytest.fixture(autouse=True)
def _production_budget(settings):
    settings.BPM_RENDER_BUDGET_SECONDS = 0.5  # the default (tests/conftest.py raises it)


@pytest.fixture(params=list(CRAFTED_FILES))
def heavy_breakpoint(request, make_breakpoint):
    crafted = CRAFTED_FILES[request.param]
    payload = {"question": "Approve the plan?", "context": {"files": [crafted]}}
    return make_breakpoint(payload=payload), crafted


def test_the_review_page_shows_a_crafted_file_and_the_decision_form(
    reviewer_browser, heavy_breakpoint
):
    bp, crafted = heavy_breakpoint

    response = reviewer_browser.get(review_url(bp.pk))

    assert response.status_code == 200
    page = response.content.decode()
    assert "Review and release" in page and 'class="bpm-decide"' in page
    assert crafted["path"] in page


def test_the_emailed_decision_page_shows_a_crafted_file_and_the_form(
    client, heavy_breakpoint, console_reviewer
):
    bp, crafted = heavy_breakpoint
    link = decision_urls(bp.pk, console_reviewer.pk)["approve"]

    response = client.get(urlsplit(link).path)

    assert response.status_code == 200
    page = response.content.decode()
    assert 'data-bpm-page="form"' in page and 'method="post"' in page
    assert crafted["path"] in page
