"""Ask a human from an AI agent: the Breakpoint Manager client.

from bpm_client import Client

result = Client().breakpoint("Deploy to production?", files=["plan.md"], tags=["deploy"])
if result.approved:
    deploy()
"""

__version__ = "0.1.0"

from .aio import AsyncClient  # noqa: E402
from .client import Client  # noqa: E402
from .errors import (  # noqa: E402
    ApiError,
    BpmError,
    ConfigurationError,
    Conflict,
    ConnectionFailed,
    DecodeError,
    IdempotencyConflict,
    InvalidState,
    NotAuthenticated,
    NotFound,
    PayloadTooLarge,
    PermissionDenied,
    ServerError,
    Throttled,
    Unavailable,
    ValidationError,
    WaitTimeout,
)
from .models import (  # noqa: E402
    Breakpoint,
    BreakpointResult,
    Event,
    Feedback,
    FeedbackCreated,
    Grant,
    Status,
    StatusEntry,
)
from .receipts import JwksUnavailable, ReceiptInvalid, ValuesNotRepresentable  # noqa: E402
from .steps import Retry  # noqa: E402

__all__ = [
    "ApiError",
    "AsyncClient",
    "BpmError",
    "Breakpoint",
    "BreakpointResult",
    "Client",
    "ConfigurationError",
    "Conflict",
    "ConnectionFailed",
    "DecodeError",
    "Event",
    "Feedback",
    "FeedbackCreated",
    "Grant",
    "IdempotencyConflict",
    "InvalidState",
    "JwksUnavailable",
    "NotAuthenticated",
    "NotFound",
    "PayloadTooLarge",
    "PermissionDenied",
    "ReceiptInvalid",
    "Retry",
    "ServerError",
    "Status",
    "StatusEntry",
    "Throttled",
    "Unavailable",
    "ValidationError",
    "ValuesNotRepresentable",
    "WaitTimeout",
]
