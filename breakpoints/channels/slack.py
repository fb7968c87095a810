"""The slack channel (being built: see issue 11)."""

from breakpoints.channels.base import Sent
from breakpoints.models import WebhookDelivery


def send(delivery: WebhookDelivery) -> Sent:
    """One attempt of a slack delivery."""
    return Sent(error="the slack channel is not built yet", retryable=False)
