"""Time context files crafted to be slow to render, on the review page and the decision page.

    python benchmarks/render_bench.py                    # a temporary SQLite database of its own
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bpm_bench \\
        python benchmarks/render_bench.py --use-database-url

The inputs an outside probe used to stall the service: 40,000 `[` as markdown (203 s to render with
Python-Markdown), a markdown list nested 500 deep (a RecursionError: a 500), `" \\t"` x 6,000
as autoit code (14.5 s in Pygments), and a 300,000-character markdown file (the largest
rendered rich), beside a floor: an ordinary 10 KB markdown file. For each, one breakpoint
holds the file; the script prints the time of rendering the file alone, of the review page
(a logged-in reviewer, test Client, no network) and of the emailed decision page, first
with an empty render cache (cold) and then again (the auto-refresh: cached), beside the
issue's target of < 1 s for a cold page, with PASS or FAIL. It exits 1 on a FAIL; the test
suite asserts the pages answer, never the times.

The cache is the project's (Redis when REDIS_URL is set): the script deletes its files'
cache entries before each cold run. By default it migrates a temporary SQLite database and
deletes it at the end; with --use-database-url it uses DATABASE_URL, which must name a
database containing "bench", and deletes the rows it made.
"""

import argparse
import logging
import os
import sys
import time
from urllib.parse import urlsplit

from _common import (
    AGENT_PREFIX,
    add_database_arguments,
    database_label,
    print_table,
    standalone_database,
)

TARGET_SECONDS = 1.0
AGENT_ID = f"{AGENT_PREFIX}render"
REVIEWER_NAME = f"bench-render-reviewer-{os.getpid()}"
NORMAL_MARKDOWN = (
    "## Step\n\nWe migrate **billing** in two steps, see [the plan](https://example.com).\n\n"
    "- add the column\n- backfill `rows`\n\n| step | owner |\n|---|---|\n| 1 | sre |\n\n"
)


def crafted_files() -> dict[str, dict]:
    return {
        "floor: 10 KB markdown": _markdown("normal.md", NORMAL_MARKDOWN, 10_000),
        "40,000 [ as markdown": _markdown("brackets.md", "[", 40_000),
        "list nested 500 deep": _markdown(
            "nested.md", "".join(f"{'  ' * depth}- item\n" for depth in range(500)), 0
        ),
        "' \\t' x 6,000 as autoit": {
            "path": "slow.au3",
            "format": "code",
            "language": "autoit",
            "content": " \t" * 6_000,
        },
        "300,000-char markdown": _markdown("big.md", NORMAL_MARKDOWN, 300_000),
    }


def _markdown(path: str, unit: str, size: int) -> dict:
    content = (unit * (size // len(unit) + 1))[:size] if size else unit
    return {"path": path, "format": "markdown", "content": content}


def timed(call) -> tuple[float, object]:
    start = time.perf_counter()
    result = call()
    return time.perf_counter() - start, result


class Pages:
    """A reviewer's browser on the console, and decision links minted for that reviewer."""

    def __init__(self) -> None:
        from django.contrib.auth import get_user_model
        from django.contrib.auth.models import Group
        from django.test import Client

        from core.actors import REVIEWERS_GROUP

        group, _ = Group.objects.get_or_create(name=REVIEWERS_GROUP)
        self.reviewer = get_user_model().objects.create(username=REVIEWER_NAME, is_staff=True)
        self.reviewer.groups.add(group)
        self.console = Client()
        self.console.force_login(self.reviewer)
        self.mail = Client()

    def review(self, breakpoint_id: str) -> int:
        from django.contrib.admin.utils import quote
        from django.urls import reverse

        url = reverse("admin:breakpoints_breakpoint_change", args=[quote(breakpoint_id)])
        return self.console.get(url).status_code

    def decide(self, breakpoint_id: str) -> int:
        from channels.email.links import decision_urls

        link = decision_urls(breakpoint_id, self.reviewer.pk)["approve"]
        return self.mail.get(urlsplit(link).path).status_code


def forget(item: dict) -> None:
    """Delete the file's cached rendering, so the next page renders it (cold)."""
    from django.core.cache import cache

    from web.rendering.budget import cache_key
    from web.rendering.markup import cache_source

    cache.delete(cache_key(cache_source(item)))


def measure(name: str, item: dict, pages: Pages) -> tuple[tuple, bool]:
    from breakpoints.services import breakpoint_create
    from core.actors import Actor
    from web.rendering.markup import context_files

    payload = {"title": f"Render bench: {name}", "context": {"files": [item]}}
    bp, _ = breakpoint_create(actor=Actor.for_agent(AGENT_ID), payload=payload)
    forget(item)
    render, _ = timed(lambda: context_files(payload))
    forget(item)
    review_cold, review_status = timed(lambda: pages.review(bp.pk))
    review_cached, _ = timed(lambda: pages.review(bp.pk))
    forget(item)
    decide_cold, decide_status = timed(lambda: pages.decide(bp.pk))
    decide_cached, _ = timed(lambda: pages.decide(bp.pk))
    passed = max(review_cold, decide_cold) < TARGET_SECONDS
    row = (
        name,
        f"{len(item['content']):,}",
        f"{render:.3f}",
        f"{review_status}",
        f"{review_cold:.3f}",
        f"{review_cached:.3f}",
        f"{decide_status}",
        f"{decide_cold:.3f}",
        f"{decide_cached:.3f}",
        f"< {TARGET_SECONDS:.0f} s {'PASS' if passed else 'FAIL'}",
    )
    return row, passed and review_status == decide_status == 200


def run() -> bool:
    """Measure every crafted file; True when one missed its target."""
    from django.conf import settings
    from django.contrib.auth import get_user_model

    from breakpoints.models import Breakpoint

    logging.getLogger("axes").setLevel(logging.WARNING)  # one line per force_login
    budget = settings.BPM_RENDER_BUDGET_SECONDS
    print(f"database {database_label()}; render budget {budget} s a page; times in seconds")
    print()
    failed = False
    try:
        pages = Pages()
        measure("warm-up", crafted_files()["floor: 10 KB markdown"], pages)  # templates, imports
        rows = []
        for name, item in crafted_files().items():
            row, passed = measure(name, item, pages)
            rows.append(row)
            failed = failed or not passed
        header = ("context file", "chars", "render", "review", "cold", "cached")
        header += ("decide", "cold", "cached", "target")
        print_table(header, rows)
    finally:
        Breakpoint.objects.filter(agent_id=AGENT_ID).delete()
        get_user_model().objects.filter(username=REVIEWER_NAME).delete()
    return failed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_database_arguments(parser)
    args = parser.parse_args()
    with standalone_database(args, "render"):
        failed = run()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
