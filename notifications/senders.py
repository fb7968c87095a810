"""The senders of the channels other than webhooks: one per channel, registered by it.

The outbox writes a Slack, email or JIRA delivery like a webhook one, in the
transaction of the change; notifications.delivery claims it, sends it through `send`
below, retries with backoff and records every attempt. Each channel's package registers
its sender when the app registry is ready (channels.apps), so this app imports none of
them.
"""

from collections.abc import Callable

from notifications.base import Sent
from notifications.models import Delivery

Sender = Callable[[Delivery], Sent]

SENDERS: dict[str, Sender] = {}


def register(channel: str, sender: Sender) -> None:
    """`sender` makes one attempt of a delivery on `channel` (slack, email, jira)."""
    SENDERS[channel] = sender


def send(delivery: Delivery) -> Sent:
    """One attempt of a Slack, email or JIRA delivery, by its channel's sender."""
    return SENDERS[delivery.channel](delivery)


__all__ = ["SENDERS", "Sent", "register", "send"]
