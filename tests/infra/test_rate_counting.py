"""Counting requests against a rate: atomic under concurrency, steady across windows.

Issue 19: DRF's throttle kept a history list with a get-then-set, so parallel requests
read the same history and all got through (32 connections: 1.95x the limit). The counter
is now an atomic increment in the cache (Redis INCR, or under the local cache's lock).
The live check, 32 clients against the real server, is tests/live/integration/test_rate_limits.py.
"""

from types import SimpleNamespace

import pytest

from accounts.models import ApiToken
from accounts.throttling import TokenRateThrottle
from infra.ratelimits import rate_hit
from tests.support.threads import repeat_in_parallel

pytest_plugins = ["tests.support.throttling"]  # counters: local memory, and Redis

PARALLEL = 32
PERIOD = 60
START = 6_000_000 * PERIOD  # the first second of a window


def in_parallel(hit, tries_each: int) -> list:
    """`hit()` from PARALLEL threads released together, `tries_each` times each."""
    return repeat_in_parallel(PARALLEL, tries_each, lambda _: hit())


def test_parallel_hits_admit_exactly_the_limit(counters):
    results = in_parallel(lambda: rate_hit("k", 50, PERIOD, now=START + 1), tries_each=10)

    assert sum(wait is None for wait in results) == 50
    assert all(wait is None or wait > 0 for wait in results)


def test_parallel_requests_on_one_token_get_no_more_than_its_rate(counters, settings):
    settings.BPM_THROTTLE_TOKEN_RATE = "50/min"
    request = SimpleNamespace(auth=ApiToken(token_hash="f" * 64), user=None, META={})

    admitted = in_parallel(
        lambda: TokenRateThrottle().allow_request(request, view=None), tries_each=10
    )

    assert sum(admitted) == 50


def test_a_budget_spent_at_the_end_of_a_window_is_not_spent_again_just_after(counters):
    """Two fixed windows weighted: not twice the limit across a boundary."""
    spent = [rate_hit("k", 10, PERIOD, now=START + 59) for _ in range(10)]

    just_after = rate_hit("k", 10, PERIOD, now=START + 60)
    half_later = [rate_hit("k", 10, PERIOD, now=START + 90) for _ in range(6)]

    assert spent == [None] * 10
    assert just_after == pytest.approx(6.0)  # the previous window's share fades by one
    assert half_later[:5] == [None] * 5  # half of it is out of the last minute by now
    assert half_later[5] is not None


def test_refused_requests_do_not_count(counters):
    for _ in range(3):
        rate_hit("k", 3, PERIOD, now=START)
    refused = [rate_hit("k", 3, PERIOD, now=START + 1) for _ in range(100)]

    assert None not in refused
    # The next window sees 3 admitted requests, not 103: at three quarters through the
    # window, a quarter of them still weighs, and two requests fit.
    later = [rate_hit("k", 3, PERIOD, now=START + PERIOD + 45) for _ in range(3)]
    assert later[:2] == [None, None]
    assert later[2] is not None
