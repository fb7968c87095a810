"""Notifications of breakpoint changes; today one channel: signed HTTP webhooks.

- subscriptions: who receives which events (webhook_add, webhook_update, webhook_remove)
- guard: which addresses may be reached (SSRF), and posting to the vetted ones only
- outbox: the transactional outbox; delivery rows written with the change, handed to
  the workers after commit, re-published by the sweep while due
- delivery: one signed attempt of one delivery, its backoff and its audit event; a
  worker's turn with one target (delivery_turn)
- targets: each target's cap of attempts in flight

Other channels (Slack, email, JIRA) belong beside `delivery` as sibling modules: each
sends what the outbox recorded, reaches the network through `guard`, and is re-exported
here. Other code imports from this package; tests patch the modules themselves.
"""

from breakpoints.webhooks.delivery import (
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
from breakpoints.webhooks.guard import DeliveryRefused
from breakpoints.webhooks.outbox import (
    DELIVER_TASK,
    DUE_BATCH_SIZE,
    REMOVED_ERROR,
    deliveries_due,
    deliveries_enqueue,
    deliveries_enqueue_bulk,
    delivery_resend,
    publish_deliveries,
)
from breakpoints.webhooks.subscriptions import (
    webhook_add,
    webhook_build,
    webhook_remove,
    webhook_update,
)

__all__ = [
    "DELIVER_TASK",
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
    "delivery_attempt",
    "delivery_resend",
    "delivery_turn",
    "publish_deliveries",
    "signed_request",
    "webhook_add",
    "webhook_build",
    "webhook_remove",
    "webhook_update",
]
