"""The append-only audit trail: one Event per transition, comment and notification; one
AccessEvent per sign-in, refusal and role change that an identity provider brought; one
RuleEvent per change of the auto-approval rules (added, removed, promoted to live); one
GrantEvent per grant created, used, revoked or ended (expired or used up)."""

from django.db import models


class EventType(models.TextChoices):
    CREATED = "created"
    FEEDBACK = "feedback"
    RELEASED = "released"
    EXPIRED = "expired"
    CANCELLED = "cancelled"
    AUTO_APPROVED = "auto_approved"
    # A shadow rule would have approved it (it waits for a person): policies.shadow.
    AUTO_APPROVAL_SHADOW = "auto_approval.shadow"
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


class AccessEventType(models.TextChoices):
    SIGNED_IN = "signed_in"
    REFUSED = "refused"  # a sign-in refused: no role from the identity provider, or a password
    ROLE_CHANGED = "role_changed"  # roles or expert groups changed to follow the identity provider
    SESSION_ENDED = "session_ended"  # a session ended by its re-check
    SIGNED_OUT = "signed_out"
    LINKED = "linked"  # a subject linked to an existing account: its verified email, or sso_link


class AccessEvent(models.Model):
    """Who came in (or was kept out) and with which groups: written only by audit.services.

    `actor` is a snapshot of the username (or `sub:<subject>` for a person who has no
    account here), `groups` the identity provider's groups at that moment, `metadata` the
    rest (reason, role before and after, groups added and removed, the client's address).
    """

    type = models.CharField(max_length=32, choices=AccessEventType.choices)
    actor = models.CharField(max_length=200)
    via = models.CharField(max_length=16)  # "oidc" or "password"
    subject = models.CharField(max_length=255, blank=True)
    groups = models.JSONField(default=list, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    timestamp = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-timestamp", "-id"]

    def __str__(self) -> str:
        return f"{self.type}: {self.actor}"


class RuleEventType(models.TextChoices):
    CREATED = "created"  # a rule added (by an admin, a command, a reviewer's Always approve)
    REMOVED = "removed"
    PROMOTED = "promoted"  # a shadow rule made live


class RuleEvent(models.Model):
    """A change to an auto-approval rule that an auditor must find: written only by
    audit.services, in the transaction of the change.

    `rule_id` and `pattern` are snapshots, not a foreign key: the event outlives the rule.
    """

    type = models.CharField(max_length=32, choices=RuleEventType.choices)
    rule_id = models.CharField(max_length=13, db_index=True)
    pattern = models.CharField(max_length=500)
    actor = models.CharField(max_length=200)
    metadata = models.JSONField(default=dict, blank=True)
    timestamp = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-timestamp", "-id"]

    def __str__(self) -> str:
        return f"{self.type} {self.rule_id} by {self.actor}"


class GrantEventType(models.TextChoices):
    CREATED = "created"  # a reviewer's approval carried a grant
    USED = "used"  # the grant approved a breakpoint (metadata: breakpointId)
    REVOKED = "revoked"
    EXPIRED = "expired"  # it stopped applying: its expiry passed, or its last use was spent


class GrantEvent(models.Model):
    """What happened to a grant, for an auditor: written only by audit.services, in the
    transaction of the change. `grant_id`, `agent_id`, `key` and `breakpoint_id` are
    snapshots, not foreign keys: the event outlives the grant and the breakpoint."""

    type = models.CharField(max_length=16, choices=GrantEventType.choices)
    grant_id = models.CharField(max_length=32, db_index=True)
    agent_id = models.CharField(max_length=128)
    key = models.CharField(max_length=255)
    breakpoint_id = models.CharField(max_length=40, blank=True)
    actor = models.CharField(max_length=200)
    metadata = models.JSONField(default=dict, blank=True)
    timestamp = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-timestamp", "-id"]
        # A replay counts the uses of a window (policies.replay: grantApproved).
        indexes = [models.Index(fields=["type", "timestamp"], name="grantevent_type_time")]

    def __str__(self) -> str:
        return f"{self.type} {self.grant_id} by {self.actor}"
