"""Exceptions: one per error code of the API's envelope, plus the client's own.

Every API error is `{"error": {"code", "message", "details"}}`; `ApiError.from_envelope` picks
the class by `code`, so `except NotFound` or `except InvalidState as e: e.details["currentStatus"]`
read naturally.
"""

from __future__ import annotations

from typing import Any


class BpmError(Exception):
    """Base of everything this package raises."""


class ConfigurationError(BpmError):
    """No token, or a server URL that is not http(s)."""


class DecodeError(BpmError):
    """An answer that does not have the shape the API documents."""


class ConnectionFailed(BpmError):
    """The server could not be reached (after the retries the call allowed)."""


class WaitTimeout(BpmError):
    """The breakpoint was still waiting when the caller's timeout ran out."""

    def __init__(self, breakpoint_id: str | list[str], timeout: float):
        self.breakpoint_id = breakpoint_id
        self.timeout = timeout
        super().__init__(f"{breakpoint_id} still waiting after {timeout:g} s")


class ApiError(BpmError):
    """An error answer from the API, with the envelope's code, message and details."""

    code = "error"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        details: dict[str, Any] | None = None,
        status_code: int = 0,
        request_id: str | None = None,
    ):
        super().__init__(message)
        self.message = message
        self.code = code or type(self).code
        self.details = details or {}
        self.status_code = status_code
        self.request_id = request_id

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"

    @classmethod
    def from_envelope(cls, status_code: int, body: Any, request_id: str | None = None) -> ApiError:
        error = body.get("error") if isinstance(body, dict) else None
        if not isinstance(error, dict):
            code = STATUS_CODES.get(status_code, "server_error")
            return ERRORS.get(code, ApiError)(
                f"HTTP {status_code}", code=code, status_code=status_code, request_id=request_id
            )
        code = str(error.get("code") or STATUS_CODES.get(status_code, "error"))
        details = error.get("details") if isinstance(error.get("details"), dict) else {}
        return ERRORS.get(code, ApiError)(
            str(error.get("message") or f"HTTP {status_code}"),
            code=code,
            details=details,
            status_code=status_code,
            request_id=request_id,
        )


class ValidationError(ApiError):
    code = "validation_error"


class NotAuthenticated(ApiError):
    code = "not_authenticated"


class PermissionDenied(ApiError):
    code = "permission_denied"


class NotFound(ApiError):
    code = "not_found"


class InvalidState(ApiError):
    """The breakpoint is no longer waiting (`details["currentStatus"]` says what it is)."""

    code = "invalid_state"


class IdempotencyConflict(ApiError):
    code = "idempotency_conflict"


class Conflict(ApiError):
    code = "conflict"


class PayloadTooLarge(ApiError):
    code = "payload_too_large"


class Throttled(ApiError):
    code = "throttled"


class ServerError(ApiError):
    code = "server_error"


class Unavailable(ApiError):
    code = "unavailable"


ERRORS: dict[str, type[ApiError]] = {
    cls.code: cls
    for cls in (
        ValidationError,
        NotAuthenticated,
        PermissionDenied,
        NotFound,
        InvalidState,
        IdempotencyConflict,
        Conflict,
        PayloadTooLarge,
        Throttled,
        ServerError,
        Unavailable,
    )
}

# For answers without an envelope (a proxy's 502, say).
STATUS_CODES = {
    400: "validation_error",
    401: "not_authenticated",
    403: "permission_denied",
    404: "not_found",
    413: "payload_too_large",
    429: "throttled",
    500: "server_error",
    502: "unavailable",
    503: "unavailable",
    504: "unavailable",
}
