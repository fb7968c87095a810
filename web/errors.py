"""The API's one error contract: every error is {"error": {"code", "message", "details"}}.

Domain code raises core.exceptions (or Django's/DRF's own); the DRF exception handler
and the project-level 404/500 handlers map them all to the envelope and an HTTP status.
"""

import logging
from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string
from django.views import defaults
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions as drf
from rest_framework.response import Response

from core.exceptions import DomainError, RateLimited
from web import outage

logger = logging.getLogger(__name__)


# The HTTP status of each domain error code: the one place domain errors meet HTTP.
HTTP_STATUS = {
    "validation_error": 400,
    "not_authenticated": 401,
    "permission_denied": 403,
    "not_found": 404,
    "invalid_state": 409,
    "idempotency_conflict": 409,
    "conflict": 409,
    "throttled": 429,
    "unavailable": 503,
}


def http_status(exc: DomainError) -> int:
    return HTTP_STATUS[exc.code]


def envelope(code: str, message: str, details: dict[str, Any] | None = None) -> dict:
    return {"error": {"code": code, "message": message, "details": details or {}}}


def error_response(
    status: int, code: str, message: str, details: dict[str, Any] | None = None
) -> JsonResponse:
    return JsonResponse(envelope(code, message, details), status=status)


_DRF_CODES: list[tuple[type[Exception], int, str]] = [
    (drf.NotAuthenticated, 401, "not_authenticated"),
    (drf.AuthenticationFailed, 401, "not_authenticated"),
    (drf.PermissionDenied, 403, "permission_denied"),
    (drf.NotFound, 404, "not_found"),
    (drf.MethodNotAllowed, 405, "method_not_allowed"),
    (drf.NotAcceptable, 406, "not_acceptable"),
    (drf.UnsupportedMediaType, 415, "unsupported_media_type"),
    (drf.Throttled, 429, "throttled"),
    (drf.ParseError, 400, "validation_error"),
    (drf.ValidationError, 400, "validation_error"),
]

_MESSAGES = {
    "validation_error": "The request is not valid.",
    "not_found": "Not found.",
}


def _flatten(detail: Any) -> Any:
    """DRF ErrorDetail trees into plain JSON (lists of strings keyed by field)."""
    if isinstance(detail, dict):
        return {str(key): _flatten(value) for key, value in detail.items()}
    if isinstance(detail, list):
        return [_flatten(item) for item in detail]
    return str(detail)


def api_exception_handler(exc: Exception, context: dict) -> Response | None:
    """DRF EXCEPTION_HANDLER: map every known exception to the envelope."""
    if isinstance(exc, DomainError):
        headers = {"Retry-After": str(exc.retry_after)} if isinstance(exc, RateLimited) else None
        return Response(
            envelope(exc.code, exc.message, exc.details), status=http_status(exc), headers=headers
        )
    if isinstance(exc, Http404):
        exc = drf.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = drf.PermissionDenied()
    elif isinstance(exc, RequestDataTooBig):
        return Response(envelope("payload_too_large", "The request body is too large."), status=413)
    for exc_type, status, code in _DRF_CODES:
        if isinstance(exc, exc_type):
            headers = {}
            # Throttled.wait is set by DRF but not declared in its stub.
            wait = getattr(exc, "wait", None)
            if isinstance(exc, drf.Throttled) and wait is not None:
                headers["Retry-After"] = str(int(wait))
            auth_header = getattr(exc, "auth_header", None)
            if auth_header:
                # A 401 must name the scheme to use (RFC 9110); DRF sets it on the exception.
                headers["WWW-Authenticate"] = auth_header
            if isinstance(exc, drf.ValidationError):
                details = _flatten(exc.detail)
                if not isinstance(details, dict):
                    details = {"non_field_errors": details}
                message = _first_message(details) or _MESSAGES[code]
            else:
                details = {}
                message = str(exc.detail) if hasattr(exc, "detail") else str(exc)
            return Response(envelope(code, message, details), status=status, headers=headers)
    if isinstance(exc, drf.APIException):
        return Response(envelope(exc.default_code, str(exc.detail)), status=exc.status_code)
    return None


def _first_message(details: dict[str, Any]) -> str:
    """A readable one-line summary: 'payload.question: Must be a string.'"""
    for field, value in details.items():
        while isinstance(value, list | dict) and value:
            value = value[0] if isinstance(value, list) else next(iter(value.values()))
        if isinstance(value, str):
            return value if field == "non_field_errors" else f"{field}: {value}"
    return ""


def _wants_json(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


# Machines read JSON here: the API, the senders of Slack actions and JIRA webhooks
# (which retry a 5xx: a 503 during an outage is what makes them try again), and the
# Devices page's script (it shows the envelope's message).
_MACHINE_PREFIXES = ("/api/", "/integrations/", "/push/devices")


# It reads nothing and changes nothing, so CSRF has nothing to guard: without the
# exemption a write method (POST /api/nope) got Django's HTML CSRF 403 page instead.
@csrf_exempt
def api_not_found(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
    """Unknown /api/ paths answer in the envelope, with any method, in DEBUG too."""
    return error_response(404, "not_found", "No such endpoint.")


def handler404(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if _wants_json(request):
        return error_response(404, "not_found", "No such endpoint.")
    return defaults.page_not_found(request, exception)


def unavailable_envelope(retry_after: int) -> dict:
    """The 503 `unavailable` body of a database outage (Django's paths and the status path)."""
    return envelope(
        "unavailable",
        "The database is not reachable; retry shortly.",
        {"retryAfter": retry_after},
    )


def unavailable_response(request: HttpRequest) -> HttpResponse:
    """503 `unavailable` with Retry-After: the envelope for machines, a short page for people.

    Rendered without the request (no context processors): it must not touch the database.
    """
    retry_after = outage.retry_after_seconds()
    response: HttpResponse
    if request.path.startswith(_MACHINE_PREFIXES):
        response = JsonResponse(unavailable_envelope(retry_after), status=503)
    else:
        page = render_to_string("503.html", {"retry_after": retry_after})
        response = HttpResponse(page, status=503)
    response["Retry-After"] = str(retry_after)
    response["Cache-Control"] = "no-store"
    return response


def handler500(request: HttpRequest) -> HttpResponse:
    """Django calls it for an exception anywhere in a request; a database outage is a 503."""
    failure = outage.current_database_failure()
    if failure is not None:
        outage.record_failure(failure)
        return unavailable_response(request)
    if _wants_json(request):
        return error_response(500, "server_error", "Internal server error.")
    return defaults.server_error(request)
