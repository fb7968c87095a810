"""The Slack, email and JIRA channels' outbound side, all through the webhooks' outbox.

- routes: notification routes (admins): which channels hear about which breakpoints
- fanout: the channel targets of one breakpoint event (the outbox writes one delivery each)
- slack (with slack_blocks, its messages), email (with email_links, the signed one-time
  decision links in its mails), jira: each one attempt of a delivery (`send`)
- base: what a send returns (Sent), links to the console

The inbound side (Slack's buttons, the email links' decision page, JIRA's webhook) is in
breakpoints.integrations. The outbox (notifications.outbox) writes channel
deliveries in the transaction of the change, like webhook ones;
notifications.delivery claims, sends through `send` below, retries with backoff and
records every attempt.
"""

from collections.abc import Callable

from channels.email import messages as email
from channels.jira import issues as jira
from channels.slack import messages as slack
from core.choices import Channel
from notifications.base import Sent
from notifications.models import WebhookDelivery

SENDERS: dict[str, Callable[[WebhookDelivery], Sent]] = {
    Channel.SLACK: slack.send,
    Channel.EMAIL: email.send,
    Channel.JIRA: jira.send,
}


def send(delivery: WebhookDelivery) -> Sent:
    """One attempt of a Slack, email or JIRA delivery, by its channel's sender."""
    return SENDERS[delivery.channel](delivery)


__all__ = ["SENDERS", "Sent", "send"]
