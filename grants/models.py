"""A grant: a reviewer's "approve, and allow this again" for an agent's later breakpoints."""

import secrets
from datetime import datetime

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from core import limits

GRANT_ID_LENGTH = 22


def new_grant_id() -> str:
    """`grant-` and 16 lowercase hex digits (64 random bits)."""
    return "grant-" + secrets.token_hex(8)


class GrantScope(models.TextChoices):
    RUN = "run", "This run"  # the same agent, key and runId
    KEY = "key", "This key"  # the same agent and key, any run


class GrantStatus(models.TextChoices):
    LIVE = "live"
    REVOKED = "revoked"
    EXPIRED = "expired"
    USED = "used"


class GrantEnd(models.TextChoices):
    """Why a grant stopped applying (Grant.ended_reason)."""

    REVOKED = "revoked"
    EXPIRED = "expired"  # its expiry passed (recorded by the sweep)
    USED = "used"  # its last use was spent


class Grant(models.Model):
    """Approve the same agent's next breakpoints of one key (and run), for some uses or some
    time, on one reviewer's say-so.

    Written only by grants.services. `granted_by` and `revoked_by` are username snapshots
    (the event reads right after an account is gone); `granted_by_user` is who must still
    be a reviewer (and hold a seat the later breakpoint names) for the grant to apply.
    `ended_at` is set once, when it stops applying (revoked, used up, or its expiry
    recorded): the live grants' (agent, key) pairs every create consults are those without
    it, and setting it moves the configuration's generation (policies.configuration).
    """

    id = models.CharField(
        primary_key=True, max_length=GRANT_ID_LENGTH, default=new_grant_id, editable=False
    )
    scope = models.CharField(max_length=8, choices=GrantScope.choices)
    agent_id = models.CharField(max_length=limits.MAX_AGENT_ID_LENGTH)
    run_id = models.CharField(max_length=limits.MAX_RUN_ID_LENGTH, null=True, blank=True)
    key = models.CharField(max_length=limits.MAX_KEY_LENGTH)
    values = models.JSONField(default=dict, blank=True)
    uses_granted = models.PositiveIntegerField(null=True, blank=True)
    uses_left = models.PositiveIntegerField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    granted_by = models.CharField(max_length=200)
    granted_by_user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        db_index=False,  # grant_granter_created leads with it
    )
    breakpoint_id = models.CharField(max_length=limits.BREAKPOINT_ID_LENGTH)
    created_at = models.DateTimeField(default=timezone.now)
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.CharField(max_length=200, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    ended_reason = models.CharField(max_length=8, choices=GrantEnd.choices, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            # A create's lookup: the live grants of one agent and key.
            models.Index(
                fields=["agent_id", "key"], name="grant_live_pair", condition=Q(ended_at=None)
            ),
            # The lists: a reviewer's own, newest first; every grant, newest first (admins).
            models.Index(
                fields=["granted_by_user", "-created_at", "-id"], name="grant_granter_created"
            ),
            models.Index(fields=["-created_at", "-id"], name="grant_created"),
            # The sweep: live grants with an expiry.
            models.Index(
                fields=["expires_at"], name="grant_live_expiry", condition=Q(ended_at=None)
            ),
        ]

    def __str__(self) -> str:
        return f"{self.pk}: {self.scope} {self.agent_id} {self.key}"

    def status_at(self, now: datetime | None = None) -> str:
        """live, revoked, used (no use left) or expired (past its expiry)."""
        if self.revoked_at is not None:
            return GrantStatus.REVOKED
        if self.uses_left is not None and self.uses_left <= 0:
            return GrantStatus.USED
        if self.expires_at is not None and self.expires_at <= (now or timezone.now()):
            return GrantStatus.EXPIRED
        return GrantStatus.LIVE

    @property
    def status(self) -> str:
        return self.status_at()
