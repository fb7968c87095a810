"""Channels beyond webhooks: Slack, email and JIRA, all through the same outbox.

- routes: notification routes (admins): which channels hear about which breakpoints
- fanout: the channel targets of one breakpoint event (the outbox writes one delivery each)
- slack, email, jira: each one attempt of a delivery (`send`), and its own inbound side
- base: what a send returns (Sent), links to the console

The outbox (breakpoints.webhooks.outbox) writes channel deliveries in the transaction of
the change, like webhook ones; breakpoints.webhooks.delivery claims, sends through
`send` below, retries with backoff and records every attempt.
"""

from collections.abc import Callable

from breakpoints.channels import email, jira, slack
from breakpoints.channels.base import Sent
from breakpoints.choices import Channel
from breakpoints.models import WebhookDelivery

SENDERS: dict[str, Callable[[WebhookDelivery], Sent]] = {
    Channel.SLACK: slack.send,
    Channel.EMAIL: email.send,
    Channel.JIRA: jira.send,
}


def send(delivery: WebhookDelivery) -> Sent:
    """One attempt of a Slack, email or JIRA delivery, by its channel's sender."""
    return SENDERS[delivery.channel](delivery)


__all__ = ["SENDERS", "Sent", "send"]
