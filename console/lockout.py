"""The console's answer to a locked-out login (django-axes' AXES_LOCKOUT_CALLABLE).

axes' own answer renders the page with 429 but no Retry-After; this one says when to come
back, in the header as well as on the page.
"""

from typing import Any

from axes.helpers import get_cool_off, get_failure_limit
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def locked_out(
    request: HttpRequest, original_response: Any = None, credentials: dict | None = None
) -> HttpResponse:
    cool_off = get_cool_off(request)
    context = {
        "failure_limit": get_failure_limit(request, credentials),
        "cooloff_timedelta": cool_off,
    }
    response = render(request, settings.AXES_LOCKOUT_TEMPLATE, context, status=429)
    # The whole cool-off: an upper bound (the lock is as old as the last failure).
    response["Retry-After"] = str(int(cool_off.total_seconds())) if cool_off else "60"
    return response
