"""What every channel sender shares: the outcome of one attempt, and the common texts."""

from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

# The longest a far end's Retry-After is honoured: a day.
MAX_RETRY_AFTER_SECONDS = 24 * 60 * 60


@dataclass(frozen=True)
class Sent:
    """What one attempt on a channel did.

    `error` empty means delivered. `retryable` errors are tried again with backoff (no
    sooner than `retry_after` seconds when the far end said so); others fail at once.
    `reply` keeps what later deliveries need (a posted message's id, an issue's key).
    """

    status_code: int | None = None
    error: str = ""
    retryable: bool = True
    retry_after: float | None = None
    reply: dict[str, Any] = field(default_factory=dict)


def retry_after_seconds(value: str | None) -> float | None:
    """A Retry-After header in seconds (a number or an HTTP date), within a day; None
    when absent or unreadable."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = (parsedate_to_datetime(value) - datetime.now(UTC)).total_seconds()
        except (TypeError, ValueError):
            return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_SECONDS)
