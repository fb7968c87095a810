"""DRF throttles: per token (or console login), and per address for anonymous calls.

Rates come from the BPM_THROTTLE_* settings, read when each request is checked ("off"
disables one); a 429 carries Retry-After (web/errors.py). Keyed by the token's hash,
never its database id, so a counter never outlives its token. Counting is an atomic
increment (infra.ratelimits.rate_hit), not DRF's history list, which parallel
requests read and wrote over each other (1.95x the limit got through). Like
every limit here they fail open.
"""

import logging
from typing import Any

from django.conf import settings
from rest_framework.throttling import SimpleRateThrottle

from accounts.models import ApiToken
from infra.ratelimits import client_address, rate_hit

logger = logging.getLogger(__name__)


class _FailOpen(SimpleRateThrottle):
    setting = ""
    num_requests: int  # set from the rate by SimpleRateThrottle.__init__
    duration: int

    def get_ident(self, request: Any) -> str:
        return client_address(request)  # the same address every limit uses

    def get_rate(self) -> str | None:
        rate = getattr(settings, self.setting)
        return None if rate in ("", "off") else rate

    def allow_request(self, request: Any, view: Any) -> bool:
        if self.rate is None:
            return True
        key = self.get_cache_key(request, view)
        if key is None:
            return True
        try:
            self._wait = rate_hit(key, self.num_requests, self.duration)
        except Exception:  # noqa: BLE001 - an unreachable cache must not refuse or hang
            logger.warning("Rate-limit cache unreachable", exc_info=True)
            return True
        return self._wait is None

    def wait(self) -> float | None:
        return getattr(self, "_wait", None)


class TokenRateThrottle(_FailOpen):
    scope = "token"
    setting = "BPM_THROTTLE_TOKEN_RATE"

    def get_cache_key(self, request: Any, view: Any) -> str | None:
        if isinstance(request.auth, ApiToken):
            ident = f"token:{request.auth.token_hash[:32]}"
        elif request.user is not None and request.user.is_authenticated:
            ident = f"user:{request.user.pk}"
        else:
            return None
        return self.cache_format % {"scope": self.scope, "ident": ident}


class AnonymousRateThrottle(_FailOpen):
    scope = "anonymous"
    setting = "BPM_THROTTLE_ANON_RATE"

    def get_cache_key(self, request: Any, view: Any) -> str | None:
        if request.user is not None and request.user.is_authenticated:
            return None
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}
