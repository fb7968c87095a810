"""The errors services raise: plain Python, no HTTP framework.

Each carries a stable `code` (the contract's error codes), a message for humans and
machine-readable `details`. Only web.errors maps them to HTTP statuses and the
error envelope; consoles, commands and workers read `message` and `details` directly.
"""

from typing import Any


class DomainError(Exception):
    """Base of the errors services raise; each subclass has one contract code."""

    code = "validation_error"
    # The `refused` audit event recorded for this refusal, once one is (a service that
    # calls another records it once: breakpoints.services.refusals).
    refusal_event_id: int | None = None

    def __init__(self, message: str, details: dict[str, Any] | None = None):
        super().__init__(message)
        self.message = message
        self.details = details or {}


class InvalidInput(DomainError):
    code = "validation_error"


class NotAuthenticated(DomainError):
    code = "not_authenticated"


class Forbidden(DomainError):
    code = "permission_denied"


class SelfReview(Forbidden):
    """The person a breakpoint was requested by may not decide it (preventSelfReview)."""


class NotFound(DomainError):
    code = "not_found"


class InvalidState(DomainError):
    """A transition that the current status does not allow; details carry that status."""

    code = "invalid_state"

    def __init__(self, message: str, *, current_status: str, details: dict | None = None):
        super().__init__(message, {"currentStatus": current_status, **(details or {})})
        self.current_status = current_status


class IdempotencyConflict(DomainError):
    code = "idempotency_conflict"


class Conflict(DomainError):
    """A write that collides with what exists (a name already taken)."""

    code = "conflict"


class RateLimited(DomainError):
    """Too many requests (or failed attempts) for now; retry after `retry_after` seconds."""

    code = "throttled"

    def __init__(self, message: str, *, retry_after: int):
        super().__init__(message, {"retryAfter": retry_after})
        self.retry_after = retry_after


class Unavailable(DomainError):
    """The service cannot answer now (e.g. the database); clients retry after a pause."""

    code = "unavailable"
