"""Webhook subscriptions and their deliveries (the transactional outbox)."""

import base64
import secrets

from django.db import models
from django.db.models import Q

from core import limits
from core.channels import channel_choices, channel_provider
from infra.net import redacted_url

# Delivery.channel of a webhook subscriber's delivery; every other value is the kind of a
# channel of core.channels.
WEBHOOK = "webhook"


def new_delivery_id() -> str:
    """The `webhook-id` header: the same on every retry, so receivers can deduplicate."""
    return "msg_" + secrets.token_urlsafe(18)


def new_webhook_secret() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


class WebhookQuerySet(models.QuerySet["Webhook"]):
    def current(self) -> "WebhookQuerySet":
        """Subscriptions not removed (active or paused)."""
        return self.filter(removed_at__isnull=True)


class WebhookEventType(models.TextChoices):
    CREATED = "created"
    RELEASED = "released"
    EXPIRED = "expired"
    CANCELLED = "cancelled"
    FEEDBACK = "feedback"
    ESCALATED = "escalated"
    REMINDER = "reminder"
    TRIGGER_FIRED = "trigger.fired"  # an external event a trigger rule forwards


class Webhook(models.Model):
    url = models.URLField(max_length=limits.MAX_WEBHOOK_URL_LENGTH)
    secret = models.CharField(
        max_length=limits.MAX_WEBHOOK_SECRET_LENGTH,
        default=new_webhook_secret,
        help_text="whsec_<base64> is used base64-decoded; any other secret as UTF-8 bytes.",
    )
    event_types = models.JSONField(
        default=list, blank=True, help_text="Subscribed event types; empty means all."
    )
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    removed_at = models.DateTimeField(
        null=True,
        blank=True,
        editable=False,
        help_text="Set when removed: kept with its deliveries for the history, never again "
        "sent to, listed or re-activated.",
    )

    objects = WebhookQuerySet.as_manager()

    class Meta:
        db_table = "breakpoints_webhook"  # the table keeps the name it was created with
        ordering = ["id"]

    def __str__(self) -> str:
        return redacted_url(self.url)

    @property
    def is_removed(self) -> bool:
        return self.removed_at is not None

    def wants(self, event_type: str) -> bool:
        return not self.event_types or event_type in self.event_types


class DeliveryStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    DELIVERED = "delivered", "Delivered"
    FAILED = "failed", "Failed"


class RowsJSONField(models.JSONField):
    """A JSONField that PostgreSQL's bulk inserts write as rows of VALUES, not UNNEST
    arrays (Django 5.2 unnests a bulk insert unless a field has its own placeholder).

    psycopg writes a jsonb[] array element by element through a regular expression, and an
    outbox body holds a breakpoint's whole representation: a release's two deliveries,
    written together, spent more CPU there than in anything else (docs/benchmarks.md)."""

    def get_placeholder(self, value: object, compiler: object, connection: object) -> str:
        return "%s"


def delivery_channels() -> list[tuple[str, str]]:
    """Delivery.channel's choices: a webhook, or one of the listed channels."""
    return [(WEBHOOK, "Webhook"), *channel_choices()]


class Delivery(models.Model):
    """One notification on one channel (a webhook subscriber, or a target on one of the
    channels of core.channels), written in the transaction of the change.

    Workers claim a pending row with a short lease (`locked_until`); the outbox sweep
    re-dispatches pending rows whose lease ran out, so nothing is lost when the broker
    was down at commit time or a worker died mid-delivery.
    """

    id = models.CharField(primary_key=True, max_length=40, default=new_delivery_id, editable=False)
    channel = models.CharField(max_length=16, choices=delivery_channels, default=WEBHOOK)
    # The subscriber of a webhook delivery; other channels name their target instead.
    webhook = models.ForeignKey(
        Webhook, on_delete=models.CASCADE, related_name="deliveries", null=True, blank=True
    )
    target = models.JSONField(
        default=dict, blank=True, help_text="Where a channel sends: Slack channel, address…"
    )
    reply = models.JSONField(
        default=dict, blank=True, help_text="What the far end answered (a Slack ts, a JIRA key)."
    )
    # None for what concerns no breakpoint (a forwarded external event).
    breakpoint = models.ForeignKey(
        "breakpoints.Breakpoint",
        on_delete=models.CASCADE,
        related_name="deliveries",
        null=True,
        blank=True,
    )
    event_type = models.CharField(max_length=40)
    body = RowsJSONField(help_text="The exact JSON sent: {type, timestamp, data}.")
    status = models.CharField(
        max_length=16, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING
    )
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField()
    locked_until = models.DateTimeField(null=True, blank=True)
    last_status_code = models.PositiveIntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "breakpoints_webhookdelivery"  # the table keeps the name it was created with
        ordering = ["-created_at"]
        verbose_name_plural = "deliveries"
        indexes = [
            models.Index(
                fields=["next_attempt_at"],
                name="delivery_pending_due",
                condition=Q(status="pending"),
            ),
            # Dead letters: the console lists them newest first, /metrics counts them.
            models.Index(
                fields=["-created_at"], name="delivery_failed_created", condition=Q(status="failed")
            ),
        ]

    def __str__(self) -> str:
        to = self.webhook_id if self.channel == WEBHOOK else self.channel
        return f"{self.event_type} → {to} ({self.status})"

    @property
    def subscriber(self) -> Webhook:
        """The webhook of a webhook-channel delivery (other channels have none)."""
        if self.webhook is None:
            raise ValueError(f"Delivery {self.pk} is on the {self.channel} channel, not a webhook")
        return self.webhook

    def destination(self) -> str:
        """Where it goes, for people: the webhook's URL without credentials, or the target."""
        if self.channel == WEBHOOK:
            return redacted_url(self.subscriber.url)
        channel = channel_provider(self.channel)
        shown = channel.target_label(self.target) if channel is not None else ""
        return f"{self.channel}: {shown or '?'}"
