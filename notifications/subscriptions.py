"""Subscriptions: which URL receives which breakpoint events, signed with which secret."""

from urllib.parse import urlsplit

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from core.exceptions import InvalidInput, NotFound
from infra import net as guard
from notifications.delivery import signer
from notifications.models import Delivery, Webhook, WebhookEventType
from notifications.outbox import cancel_pending


def parse_event_types(event_types: list[str] | None) -> list[str]:
    """The chosen event types, known ones only, in WebhookEventType's order (none: all)."""
    chosen = [t.strip() for t in (event_types or []) if t.strip()]
    unknown = sorted(set(chosen) - set(WebhookEventType.values))
    if unknown:
        raise InvalidInput(
            f"Unknown event type(s): {', '.join(unknown)}. "
            f"Choose from: {', '.join(WebhookEventType.values)}.",
            {"events": unknown},
        )
    return sorted(set(chosen), key=WebhookEventType.values.index)


def webhook_build(*, url: str, event_types: list[str] | None = None, secret: str = "") -> Webhook:
    """A validated, unsaved subscription: raises InvalidInput on a bad URL, type or secret."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidInput("The webhook URL must be an absolute http(s) URL.", {"url": [url]})
    if guard.refused_at_subscription(parts.hostname, parts.port):
        raise InvalidInput(
            f"{parts.hostname} is a private or loopback address; allow it with "
            "BPM_WEBHOOK_ALLOWED_HOSTS first.",
            {"url": [url]},
        )
    webhook = Webhook(url=url.strip(), event_types=parse_event_types(event_types))
    if secret:
        webhook.secret = secret
    try:
        signer(webhook.secret)
        webhook.full_clean()
    except ValidationError as exc:
        raise InvalidInput("The webhook is not valid.", exc.message_dict) from exc
    except Exception as exc:  # standardwebhooks refuses a whsec_ secret that is not base64
        raise InvalidInput(f"The secret is not usable: {exc}", {"secret": [str(exc)]}) from exc
    return webhook


def webhook_add(*, url: str, event_types: list[str] | None = None, secret: str = "") -> Webhook:
    """Subscribe `url` to the given event types (none means all)."""
    webhook = webhook_build(url=url, event_types=event_types, secret=secret)
    webhook.save()
    return webhook


def webhook_update(*, webhook_id: int, event_types: list[str], active: bool) -> Webhook:
    """Change what a subscription receives, or pause it; the URL and secret stay.

    A removed subscription is not found: removal is final, never undone by an edit.
    """
    chosen = parse_event_types(event_types)
    if (
        not Webhook.objects.current()
        .filter(pk=webhook_id)
        .update(event_types=chosen, active=active)
    ):
        raise NotFound(f"No webhook with id {webhook_id}.")
    return Webhook.objects.get(pk=webhook_id)


def webhook_remove(*, webhook_id: int) -> Webhook:
    """Remove a subscription for good, keeping it and its deliveries for the history.

    It stops receiving at once: its pending deliveries fail with REMOVED_ERROR in the
    same transaction, and the outbox sweep cancels any that a concurrent change wrote.
    """
    now = timezone.now()
    with transaction.atomic():
        if not Webhook.objects.current().filter(pk=webhook_id).update(removed_at=now, active=False):
            raise NotFound(f"No webhook with id {webhook_id}.")
        cancel_pending(Delivery.objects.filter(webhook_id=webhook_id))
    return Webhook.objects.get(pk=webhook_id)
