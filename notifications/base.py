"""What every channel sender shares: the outcome of one attempt, and the common texts."""

from dataclasses import dataclass, field
from typing import Any

from django.conf import settings


@dataclass(frozen=True)
class Sent:
    """What one attempt on a channel did.

    `error` empty means delivered. `retryable` errors are tried again with backoff (no
    sooner than `retry_after` seconds when the far end said so); others fail at once.
    `reply` keeps what later deliveries need (a Slack message's channel and ts, a JIRA
    issue key).
    """

    status_code: int | None = None
    error: str = ""
    retryable: bool = True
    retry_after: float | None = None
    reply: dict[str, Any] = field(default_factory=dict)


def console_url(breakpoint_id: str) -> str:
    """The breakpoint's review page, absolute (BPM_PUBLIC_URL) for messages and mails."""
    base = settings.BPM_PUBLIC_URL.rstrip("/")
    return f"{base}/admin/breakpoints/breakpoint/{breakpoint_id}/change/"
