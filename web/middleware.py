"""Request-wide concerns: correlation ids, the request body size limit, the Content-Security-
Policy, the log context, database outages (the probes are answered first, by ops.health)."""

import uuid
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from infra.logging import current_request, current_request_id
from web import outage
from web.asgi_http import valid_request_id
from web.errors import error_response, unavailable_response


class RequestIDMiddleware:
    """Echo the caller's X-Request-ID (when well formed) or mint one, on every response."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        incoming = request.headers.get("X-Request-ID", "")
        request_id = valid_request_id(incoming) or uuid.uuid4().hex
        request.request_id = request_id  # type: ignore[attr-defined]
        token = current_request_id.set(request_id)
        try:
            response = self.get_response(request)
        finally:
            current_request_id.reset(token)
        response["X-Request-ID"] = request_id
        return response


class BodySizeLimitMiddleware:
    """Refuse bodies over BPM_MAX_BODY_BYTES with 413 before anything reads them."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        limit = settings.BPM_MAX_BODY_BYTES
        raw_length = request.META.get("CONTENT_LENGTH") or "0"
        try:
            length = int(raw_length)
        except ValueError:
            return error_response(400, "validation_error", "Content-Length is not a number.")
        if length > limit:
            return error_response(
                413,
                "payload_too_large",
                f"Request body is {length} bytes; the limit is {limit} bytes.",
                {"limit": limit},
            )
        return self.get_response(request)


class LogContextMiddleware:
    """Make the request's agent or user, token prefix and breakpoint id known to logging.

    infra.logging reads them lazily from the request in each log call (never forcing
    authentication); the breakpoint id comes from the URL of a breakpoint's API route or
    console page.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        token = current_request.set(request)
        try:
            return self.get_response(request)
        finally:
            current_request.reset(token)

    def process_view(
        self, request: HttpRequest, view_func: Callable, view_args: tuple, view_kwargs: dict
    ) -> None:
        match = request.resolver_match
        name = (match.url_name or "") if match is not None else ""
        if name.startswith("breakpoint-") and "pk" in view_kwargs:
            request.log_breakpoint_id = view_kwargs["pk"]  # type: ignore[attr-defined]
        elif name.startswith("breakpoints_breakpoint_") and "object_id" in view_kwargs:
            request.log_breakpoint_id = view_kwargs["object_id"]  # type: ignore[attr-defined]


class DatabaseOutageMiddleware:
    """Answer 503 at once, without trying, while this process fails fast after the pool
    could not hand out a connection (web.outage). The failures themselves become 503s
    in web.errors.handler500."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if outage.failing_fast():
            return unavailable_response(request)
        return self.get_response(request)


# The console and the emailed decision pages show what agents sent: only our own scripts
# run, nothing is loaded from elsewhere, no page may frame them. Context files in HTML are
# shown in a sandboxed srcdoc iframe, which inherits this policy (no remote images either).
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self' 'unsafe-inline'",  # Django admin's own templates use style=""
        "img-src 'self' data:",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)
CSP_PATHS = ("/admin/", "/decide/")


class ContentSecurityPolicyMiddleware:
    """Content-Security-Policy on the console's and the decision links' HTML pages."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        is_html = response.get("Content-Type", "").startswith("text/html")
        if is_html and request.path.startswith(CSP_PATHS):
            response.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        return response
