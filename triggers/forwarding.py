"""The `forward` action: the event goes out as a signed webhook of type trigger.fired,
for an orchestrator to start a run with the event's payload as its inputs."""

from core.timestamps import timestamp
from notifications.models import WebhookEventType
from notifications.outbox import deliveries_enqueue_unattached
from triggers.models import ExternalEvent


def forward_body(event: ExternalEvent, rule_name: str) -> dict:
    return {
        "event": {
            "id": event.pk,
            "source": event.source.name,
            "type": event.type,
            "deliveryId": event.delivery_id,
            "receivedAt": timestamp(event.received_at),
            "payload": event.payload,
        },
        "rule": rule_name,
    }


def forward_enqueue(*, event: ExternalEvent, rule_name: str) -> int:
    """One pending delivery per subscriber of trigger.fired, in the caller's transaction."""
    ids = deliveries_enqueue_unattached(
        event_type=WebhookEventType.TRIGGER_FIRED, data=forward_body(event, rule_name)
    )
    return len(ids)
