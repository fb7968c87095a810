"""The jira channel (being built: see issue 11)."""

from breakpoints.channels.base import Sent
from breakpoints.models import WebhookDelivery


def send(delivery: WebhookDelivery) -> Sent:
    """One attempt of a jira delivery."""
    return Sent(error="the jira channel is not built yet", retryable=False)
