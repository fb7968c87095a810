"""Rate limits on the API: requests per token, and failed authentications per address.

The counters live in Django's cache (Redis in production, shared by every process).
They fail open: with the cache unreachable a request is served, never refused or hung.
DRF's throttles (breakpoints/api/throttling.py) use the same cache.
"""

import logging
import time
from typing import Any

from django.conf import settings
from django.core.cache import cache

logger = logging.getLogger(__name__)

WINDOW_SECONDS = 60


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
    key = _failures_key(address, window)
    try:
        cache.add(key, 0, timeout=2 * WINDOW_SECONDS)
        failures = cache.incr(key)  # atomic: Redis INCR, or under the local cache's lock
    except Exception:  # noqa: BLE001 - fail open
        logger.warning("Rate-limit cache unreachable", exc_info=True)
        return None
    if failures <= settings.BPM_AUTH_FAILURES_PER_MINUTE:
        return None
    return (window + 1) * WINDOW_SECONDS - now  # 1 to 60


def address_of(remote: str, forwarded: str) -> str:
    """The caller's address: the connection's, or with BPM_NUM_PROXIES trusted proxies the
    X-Forwarded-For hop the outermost of them appended. Every limit and /metrics use it
    (through client_address() here, or config.asgi_http.scope_address() in front of Django)."""
    proxies = settings.BPM_NUM_PROXIES
    if proxies and forwarded:
        hops = [hop.strip() for hop in forwarded.split(",")]
        return hops[-min(proxies, len(hops))]
    return remote


def client_address(request: Any) -> str:
    """address_of() for a Django (or DRF) request."""
    meta = request.META
    return address_of(meta.get("REMOTE_ADDR", ""), meta.get("HTTP_X_FORWARDED_FOR", ""))
