"""The senders of the channels other than webhooks: each channel's own (core.channels).

The outbox writes a channel's delivery like a webhook one, in the transaction of the
change; notifications.delivery claims it, sends it through `send` below, retries with
backoff and records every attempt. The channel is found in the registry by the
delivery's `channel`, so this app imports none of them.
"""

from core.channels import channel_providers
from notifications.base import Sent
from notifications.models import Delivery


def send(delivery: Delivery) -> Sent:
    """One attempt of a delivery on a channel, by that channel (a channel no longer listed
    in BPM_CHANNELS raises KeyError: a failure the outbox retries)."""
    sent: Sent = channel_providers()[delivery.channel].send(delivery)
    return sent


__all__ = ["Sent", "send"]
