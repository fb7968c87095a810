"""Rate limits on the API: requests per token, and failed authentications per address.

The counters live in Django's cache (Redis in production, shared by every process).
They fail open: with the cache unreachable a request is served, never refused or hung.
DRF's throttles (accounts/throttling.py) use the same cache.
"""

import logging
import math
import time
from typing import Any

from django.conf import settings
from django.core.cache import cache

from core.exceptions import RateLimited

logger = logging.getLogger(__name__)

WINDOW_SECONDS = 60


def _incr(key: str, ttl: int) -> int:
    """Add one to the counter at `key` (created with `ttl` seconds to live) and return it.

    Atomic across threads and processes (Redis INCR, or under the local cache's lock): two
    requests never both read the same count, as a get-then-set would let them.
    """
    try:
        return cache.incr(key)
    except ValueError:  # the first hit in its window
        if cache.add(key, 1, timeout=ttl):
            return 1
        return cache.incr(key)  # another request created it in between


def _failures_key(address: str, window: int) -> str:
    return f"bpm:authfail:{address}:{window}"


def auth_failure_record(address: str) -> int | None:
    """Count one more token from `address` that did not verify, in the current minute.

    Returns the seconds until that minute ends once the address has sent more than
    BPM_AUTH_FAILURES_PER_MINUTE of them (its next failures are answered 429), else None.
    Only tokens that cost a lookup are counted: a valid token is never held back by it.
    """
    now = int(time.time())
    window = now // WINDOW_SECONDS
    try:
        failures = _incr(_failures_key(address, window), 2 * WINDOW_SECONDS)
    except Exception:  # noqa: BLE001 - fail open
        logger.warning("Rate-limit cache unreachable", exc_info=True)
        return None
    if failures <= settings.BPM_AUTH_FAILURES_PER_MINUTE:
        return None
    return (window + 1) * WINDOW_SECONDS - now  # 1 to 60


def rate_hit(key: str, limit: int, period: int, now: float | None = None) -> float | None:
    """Take one request from the budget of `limit` per `period` seconds kept at `key`.

    Returns None when it fits, else the seconds until one more would (it is then not
    counted). A sliding window estimated from two fixed ones, as nginx and Cloudflare do:
    the requests admitted in the current window, plus the previous window's weighted by
    how much of it the last `period` seconds still cover. So a client that keeps sending
    gets `limit` per `period` at a steady pace, not twice the limit across a boundary. Each
    admission is decided on an atomic increment: concurrent requests cannot all see room.
    """
    now = time.time() if now is None else now
    window, offset = divmod(now, period)
    current = f"{key}:{int(window)}"
    count = _incr(current, 2 * period)
    earlier = cache.get(f"{key}:{int(window) - 1}") or 0
    weight = 1 - offset / period
    excess = earlier * weight + count - limit
    if excess <= 0:
        return None
    cache.decr(current)  # refused: only admitted requests count
    if earlier and excess <= earlier * weight:
        return excess * period / earlier  # the previous window's share fades enough
    # Wait for the next window, then for this one's count (the next one's "previous",
    # almost at full weight then) to fade by one request.
    return period - offset + period / max(limit, 1)


def address_of(remote: str, forwarded: str) -> str:
    """The caller's address: the connection's, or with BPM_NUM_PROXIES trusted proxies the
    X-Forwarded-For hop the outermost of them appended. Every limit and /metrics use it
    (through client_address() here, or web.asgi_http.scope_address() in front of Django)."""
    proxies = settings.BPM_NUM_PROXIES
    if proxies and forwarded:
        hops = [hop.strip() for hop in forwarded.split(",")]
        return hops[-min(proxies, len(hops))]
    return remote


def client_address(request: Any) -> str:
    """address_of() for a Django (or DRF) request."""
    meta = request.META
    return address_of(meta.get("REMOTE_ADDR", ""), meta.get("HTTP_X_FORWARDED_FOR", ""))


PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_rate(rate: str) -> tuple[int, int] | None:
    """'120/min' -> (120, 60), as DRF writes rates; None for "off" or empty."""
    if rate in ("", "off"):
        return None
    count, _, period = rate.partition("/")
    return int(count), PERIODS[period.strip()[:1].lower()]


def rate_limit(key: str, rate: str, what: str) -> None:
    """RateLimited (429 + Retry-After) when `key` is past `rate`; fails open like the rest."""
    parsed = parse_rate(rate)
    if parsed is None:
        return
    try:
        wait = rate_hit(key, *parsed)
    except Exception:  # noqa: BLE001 - an unreachable cache must not refuse or hang
        logger.warning("Rate-limit cache unreachable", exc_info=True)
        return
    if wait is not None:
        seconds = max(1, math.ceil(wait))
        raise RateLimited(f"Too many {what}; retry in {seconds} s.", retry_after=seconds)


def sign_in_attempt(address: str) -> None:
    """Count one password sign-in attempt from `address`: RateLimited (429 + Retry-After)
    past BPM_LOGIN_ATTEMPT_RATE. Called before the password is checked, whatever the
    username: an address that rotates usernames (which the per-username lockout never
    sees twice) pays for its flood in refusals, not in the server's hashing time."""
    rate_limit(f"bpm:signin:{address}", settings.BPM_LOGIN_ATTEMPT_RATE, "sign-in attempts")
