"""Password checks in the console: refused before any hashing when they would cost too much.

A password hash (PBKDF2, ~0.5-2 s of CPU) is the dearest thing an anonymous caller can make
the server do, and the per-username lockout (django-axes) counts nothing for a caller who
sends a new username each time. So every POST to a form that checks a password (the
sign-in, the password change) first passes two checks, in this order:

- the address's attempts (infra.ratelimits.sign_in_attempt, BPM_LOGIN_ATTEMPT_RATE, shared by
  every process through the cache): past it 429, whatever the username;
- this process's password checks in progress (BPM_LOGIN_CONCURRENCY): when all are taken,
  503 at once rather than a thread waiting for a core.

Both answer a short page with Retry-After (people meet them in a browser), rendered without
the request: no session, no database. Neither counts as a failed login for the lockout.
"""

import functools
import threading
from collections.abc import Callable
from typing import Any, TypeVar, cast

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.template.loader import render_to_string

from core.exceptions import RateLimited
from infra.ratelimits import client_address, sign_in_attempt

View = TypeVar("View", bound=Callable[..., HttpResponseBase])

# A password check takes about a second: by then one of the checks in progress is done.
BUSY_RETRY_AFTER_SECONDS = 2

# One bound per process (per size: tests change the setting).
_bounds: dict[int, threading.BoundedSemaphore] = {}


def password_checks() -> threading.BoundedSemaphore:
    """This process's permits for password checks in progress (BPM_LOGIN_CONCURRENCY)."""
    size = settings.BPM_LOGIN_CONCURRENCY
    bound = _bounds.get(size)
    if bound is None:
        bound = _bounds.setdefault(size, threading.BoundedSemaphore(size))
    return bound


def refusal(status: int, retry_after: int, message: str) -> HttpResponse:
    """The page that says why the form was not checked and when to try again."""
    page = render_to_string(
        "admin/sign_in_refused.html", {"message": message, "retry_after": retry_after}
    )
    response = HttpResponse(page, status=status)
    response["Retry-After"] = str(retry_after)
    response["Cache-Control"] = "no-store"
    return response


def guarding_password_checks(view: View) -> View:
    """`view`, whose POSTs pass the address's attempt limit and take one of this process's
    password-check permits (held while the view runs) before the view sees them."""

    @functools.wraps(view)
    def guarded(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if request.method != "POST":
            return view(request, *args, **kwargs)
        try:
            sign_in_attempt(client_address(request))
        except RateLimited as exc:
            return refusal(
                429,
                exc.retry_after,
                "Too many sign-in attempts from your address. "
                f"Try again in {exc.retry_after} seconds.",
            )
        bound = password_checks()
        if not bound.acquire(blocking=False):
            return refusal(
                503,
                BUSY_RETRY_AFTER_SECONDS,
                "The server is checking other passwords just now. "
                f"Try again in {BUSY_RETRY_AFTER_SECONDS} seconds.",
            )
        try:
            return view(request, *args, **kwargs)
        finally:
            bound.release()

    return cast(View, guarded)
