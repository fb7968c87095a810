"""The outbox every notification goes through, and the signed HTTP webhooks.

Every notification of a breakpoint change is a Delivery row: a webhook
subscriber's signed POST, or a message on a channel (core.channels; notifications.senders).

- subscriptions: webhook subscriptions, who receives which events (webhook_add,
  webhook_update, webhook_remove)
- outbox: the transactional outbox; the delivery rows of an event, to webhook subscribers
  and to the channel targets notifications.fanout names, written with the change,
  handed to the workers after commit, re-published by the sweep while due
- delivery: one attempt of one delivery (a signed POST for a webhook, the channel's sender
  through notifications.senders.send for the others), its backoff and its audit event; a
  worker's turn with one target (delivery_turn)
- targets: each target's cap of attempts in flight

Other code imports from this module; tests patch the modules themselves. The guard of
which addresses a webhook may reach (SSRF) is infra.net; the Celery tasks are in tasks.py.
"""

from infra.net import DeliveryRefused
from notifications.delivery import (
    MAX_ATTEMPTS,
    MAX_BACKOFF_SECONDS,
    REQUEST_TIMEOUT_SECONDS,
    WEBHOOK_ACTOR,
    AttemptOutcome,
    backoff_seconds,
    delivery_attempt,
    delivery_turn,
    signed_request,
)
from notifications.outbox import (
    DUE_BATCH_SIZE,
    REMOVED_ERROR,
    deliveries_due,
    deliveries_enqueue,
    deliveries_enqueue_bulk,
    deliveries_enqueue_many,
    delivery_resend,
    publish_deliveries,
    publish_deliveries_handed_on,
)
from notifications.subscriptions import (
    webhook_add,
    webhook_build,
    webhook_remove,
    webhook_update,
)

__all__ = [
    "DUE_BATCH_SIZE",
    "MAX_ATTEMPTS",
    "MAX_BACKOFF_SECONDS",
    "REMOVED_ERROR",
    "REQUEST_TIMEOUT_SECONDS",
    "WEBHOOK_ACTOR",
    "AttemptOutcome",
    "DeliveryRefused",
    "backoff_seconds",
    "deliveries_due",
    "deliveries_enqueue",
    "deliveries_enqueue_bulk",
    "deliveries_enqueue_many",
    "delivery_attempt",
    "delivery_resend",
    "delivery_turn",
    "publish_deliveries",
    "publish_deliveries_handed_on",
    "signed_request",
    "webhook_add",
    "webhook_build",
    "webhook_remove",
    "webhook_update",
]
