"""Bounded rich rendering of what agents send: a time budget per page, and a shared cache.

An agent chooses the bytes the reviewer's page renders, so converting markdown and
highlighting code must cost a bounded time whatever it sends. One page (the review page,
the emailed decision page, one email) gets BPM_RENDER_BUDGET_SECONDS for its rich
renderings; each file may use half of it, checked while it renders (markup.py stops the
parser or the lexer at its deadline and shows escaped text instead). A file only starts
while the page has a file's share left; past that it is shown as escaped text for now.

What was rendered is cached by content in Django's cache (Redis in production), so the
page's auto-refresh and the other reviewers read it instead of rendering again. A file
that ran out of its own time is not cached as its fallback the first time: a busy moment
may have cut a file that fits, and the next page tries it again. Only a file that runs out
of time on a second try too (a hostile one) has its fallback cached, for a shorter while,
so it costs its budget twice, not on every refresh. A file's clock starts after what does
not depend on its content (looking its lexer up: the first lookup of a language imports its
module). The cache fails open: with it unreachable, pages still render within their budget.
"""

import hashlib
import json
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from django.conf import settings
from django.core.cache import cache
from django.utils.safestring import SafeString, mark_safe

logger = logging.getLogger(__name__)

# Bump when the rendering changes, so no page shows HTML an older version made.
RENDER_VERSION = "2"
RICH_CACHE_SECONDS = 24 * 60 * 60
# A fallback is kept for less time: a busy machine may have cut a file that fits. The
# mark of a first timeout is kept as long: a second one within it caches the fallback.
FALLBACK_CACHE_SECONDS = 10 * 60
TIMED_OUT_SUFFIX = ":timed-out"


class Rendered(NamedTuple):
    """One rendering: its HTML, and whether it finished (False: the escaped fallback)."""

    html: SafeString
    complete: bool


class RenderBudget:
    """The time one page may spend on rich renderings, and its cache reads and writes."""

    def __init__(self, seconds: float | None = None, file_seconds: float | None = None) -> None:
        total = settings.BPM_RENDER_BUDGET_SECONDS if seconds is None else seconds
        self.file_seconds = total / 2 if file_seconds is None else file_seconds
        self.deadline = time.monotonic() + total
        self._cached: dict[str, str] = {}
        self._fresh: dict[bool, dict[str, str]] = {True: {}, False: {}}

    def render(
        self,
        source: Any,
        rich: Callable[[Callable[[], float]], Rendered],
        plain: Callable[[], SafeString],
    ) -> SafeString:
        """The cached rendering of `source`, else `rich(start)` if the page has time for
        one more file, else `plain()` (not cached: a later visit renders it).

        `rich` calls `start()` once it has prepared what does not depend on the content:
        that starts the file's clock and returns its deadline."""
        key = cache_key(source)
        if key in self._cached:
            # mark_safe: only ever written below, from a rendering of our own.
            return mark_safe(self._cached[key])
        if self.deadline - time.monotonic() < self.file_seconds:
            return plain()
        html, complete = rich(lambda: time.monotonic() + self.file_seconds)
        self._cached[key] = html
        if complete:
            self._fresh[True][key] = html
        elif key + TIMED_OUT_SUFFIX in self._cached:  # its second timeout: keep the fallback
            self._fresh[False][key] = html
        else:  # its first: only the mark, the next page tries again
            self._fresh[False][key + TIMED_OUT_SUFFIX] = ""
        return html

    def deadline_for_one(self) -> float:
        """A deadline for one uncached rendering (a file's share of what is left)."""
        return min(self.deadline, time.monotonic() + self.file_seconds)

    def prefetch(self, sources: Iterable[Any]) -> None:
        """Read the cached renderings of `sources`, and the marks of their timeouts, in one
        round trip."""
        suffixes = ("", TIMED_OUT_SUFFIX)
        keys = [cache_key(source) + suffix for source in sources for suffix in suffixes]
        if keys:
            self._cached.update(_fail_open(cache.get_many, keys) or {})

    def save(self) -> None:
        """Write what this page rendered, in one round trip per lifetime."""
        for complete, fresh in self._fresh.items():
            timeout = RICH_CACHE_SECONDS if complete else FALLBACK_CACHE_SECONDS
            if fresh:
                _fail_open(cache.set_many, fresh, timeout=timeout)
            fresh.clear()


def cache_key(source: Any) -> str:
    """A cache key naming everything a rendering depends on (content, format, language)."""
    text = json.dumps(source, sort_keys=True, ensure_ascii=False, default=str)
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return f"bpm:render:{RENDER_VERSION}:{digest}"


def _fail_open(call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """call(*args, **kwargs), or None when the cache is unreachable."""
    try:
        return call(*args, **kwargs)
    except Exception:  # noqa: BLE001 - a cache outage must not break the page
        logger.warning("Render cache unreachable", exc_info=True)
        return None
