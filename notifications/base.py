"""What every channel sender shares: the outcome of one attempt, and the common texts."""

from dataclasses import dataclass, field
from typing import Any


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
