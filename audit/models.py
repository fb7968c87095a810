"""The append-only audit trail: one Event per transition, comment and notification."""

from django.db import models


class EventType(models.TextChoices):
    CREATED = "created"
    FEEDBACK = "feedback"
    RELEASED = "released"
    EXPIRED = "expired"
    CANCELLED = "cancelled"
    AUTO_APPROVED = "auto_approved"
    ESCALATED = "escalated"
    REMINDER = "reminder"
    REFUSED = "refused"  # a decision from a channel (Slack, email, JIRA) that was refused
    NOTIFICATION = "notification"


class Event(models.Model):
    """Written only by audit.services, inside the caller's transaction.

    `actor` is a snapshot ("alice", "agent:agent-7", "system:ttl") so the event still
    reads right after users or tokens are deleted.
    """

    # No separate FK index: event_bp_time (breakpoint, timestamp) serves the lookups.
    breakpoint = models.ForeignKey(
        "breakpoints.Breakpoint", on_delete=models.CASCADE, related_name="events", db_index=False
    )
    type = models.CharField(max_length=32, choices=EventType.choices)
    actor = models.CharField(max_length=200)
    timestamp = models.DateTimeField(auto_now_add=True)
    metadata = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["timestamp", "id"]
        indexes = [models.Index(fields=["breakpoint", "timestamp"], name="event_bp_time")]

    def __str__(self) -> str:
        return f"{self.type} by {self.actor}"
