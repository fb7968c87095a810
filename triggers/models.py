"""External events in, and the trigger rules that act on breakpoints when they arrive.

An EventSource is an authenticated sender (GitHub, GitLab, Standard Webhooks, or any
script signing with HMAC); each accepted delivery is stored once as an ExternalEvent
(idempotent by the sender's delivery id) and evaluated by the worker against the
TriggerRules, which release, cancel or create breakpoints, or forward the event.
"""

import base64
import secrets

from django.conf import settings
from django.db import models
from django.db.models import Q

from core import limits

STANDARD_WEBHOOKS_PREFIX = "whsec_"


def new_event_id() -> str:
    return "evt_" + secrets.token_urlsafe(16)


def new_source_secret(kind: str = "") -> str:
    """A random secret in the form its kind expects.

    Standard Webhooks: the spec's `whsec_` + standard base64 of 32 random bytes (its
    libraries and the openssl recipe use the decoded bytes as the key; a secret without the
    prefix is still verified, as its UTF-8 bytes). GitHub, GitLab and generic HMAC use the
    text itself as the key or token: URL-safe characters, pasted anywhere unchanged.
    """
    if kind == SourceKind.STANDARD_WEBHOOKS:
        return STANDARD_WEBHOOKS_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()
    return secrets.token_urlsafe(32)


class SourceKind(models.TextChoices):
    STANDARD_WEBHOOKS = "standard-webhooks"
    GITHUB = "github"
    GITLAB = "gitlab"
    GENERIC_HMAC = "generic-hmac"


class EventSource(models.Model):
    name = models.SlugField(max_length=limits.MAX_SOURCE_NAME_LENGTH, unique=True)
    kind = models.CharField(max_length=32, choices=SourceKind.choices)
    secret = models.CharField(
        max_length=limits.MAX_WEBHOOK_SECRET_LENGTH, default=new_source_secret
    )
    enabled = models.BooleanField(default=True)
    created_by = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"


class EventStatus(models.TextChoices):
    PENDING = "pending"  # stored, rules not evaluated yet
    PROCESSED = "processed"  # every rule evaluated (each one's outcome in `results`)
    FAILED = "failed"  # evaluation itself failed MAX_ATTEMPTS times


class ExternalEvent(models.Model):
    """One accepted delivery: evaluated by the worker, with an outbox's discipline."""

    id = models.CharField(primary_key=True, max_length=40, default=new_event_id, editable=False)
    source = models.ForeignKey(EventSource, on_delete=models.PROTECT, related_name="events")
    type = models.CharField(max_length=limits.MAX_EVENT_TYPE_LENGTH)
    delivery_id = models.CharField(max_length=limits.MAX_DELIVERY_ID_LENGTH)
    payload = models.JSONField()
    headers = models.JSONField(default=dict, blank=True, help_text="The headers that matter.")
    received_at = models.DateTimeField(auto_now_add=True)
    status = models.CharField(
        max_length=16, choices=EventStatus.choices, default=EventStatus.PENDING
    )
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField()
    # A worker's claim while it evaluates (triggers.services.evaluate); once past, its
    # worker is taken for lost and the events sweep publishes the event again.
    locked_until = models.DateTimeField(null=True, blank=True)
    processed_at = models.DateTimeField(null=True, blank=True)
    results = models.JSONField(
        default=list, blank=True, help_text="Per rule: matched, actions taken, error."
    )
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-received_at"]
        constraints = [
            models.UniqueConstraint(fields=["source", "delivery_id"], name="event_unique_delivery"),
        ]
        indexes = [
            models.Index(fields=["-received_at"], name="event_received"),
            models.Index(
                fields=["next_attempt_at"],
                name="event_pending_due",
                condition=Q(status="pending"),
            ),
            # A source's backlog (triggers.services.ingest.pending_count): past its bound,
            # the source's deliveries are answered 429.
            models.Index(
                fields=["source"], name="event_pending_source", condition=Q(status="pending")
            ),
        ]

    def __str__(self) -> str:
        return f"{self.source_id}:{self.type} ({self.status})"


class TriggerAction(models.TextChoices):
    RELEASE = "release"  # approve or reject the waiting breakpoints the selector picks
    CANCEL = "cancel"  # cancel them
    CREATE = "create"  # create a breakpoint from templates over the event
    FORWARD = "forward"  # an outbound signed webhook `trigger.fired` carrying the event


class TriggerRule(models.Model):
    """When an event from `source` (any, if empty) of `event_type` (a glob, * for any)
    satisfies every JMESPath condition, do `action` with `params` (templates over the
    event), with the permissions of `owner`."""

    name = models.SlugField(max_length=limits.MAX_SOURCE_NAME_LENGTH, unique=True)
    source = models.ForeignKey(
        EventSource, null=True, blank=True, on_delete=models.CASCADE, related_name="rules"
    )
    event_type = models.CharField(max_length=limits.MAX_EVENT_TYPE_LENGTH, default="*")
    conditions = models.JSONField(default=list, blank=True)
    action = models.CharField(max_length=16, choices=TriggerAction.choices)
    params = models.JSONField(default=dict, blank=True)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT)
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name}: {self.action}"
