"""API tokens that agents and people use to reach the API."""

from django.conf import settings
from django.db import models
from django.db.models import Q

from core import limits
from core.choices import TokenKind


class ApiToken(models.Model):
    """A bearer token: bound to an agentId (agent) or to a person (user). Only a hash is kept."""

    kind = models.CharField(max_length=8, choices=TokenKind.choices)
    name = models.CharField(max_length=limits.MAX_TOKEN_NAME_LENGTH, blank=True)
    agent_id = models.CharField(max_length=limits.MAX_AGENT_ID_LENGTH, null=True, blank=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="api_tokens",
    )
    owner = models.CharField(
        max_length=limits.MAX_REQUESTED_BY_LENGTH,
        null=True,
        blank=True,
        help_text="Agent tokens: the person (username or email) the agent acts for; its "
        "breakpoints' requestedBy when they do not name one.",
    )
    prefix = models.CharField(max_length=16, db_index=True)
    token_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "breakpoints_apitoken"  # the table keeps the name it was created with
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                name="token_bound_to_agent_or_user",
                condition=(
                    Q(kind=TokenKind.AGENT, agent_id__isnull=False, user__isnull=True)
                    | Q(kind=TokenKind.USER, agent_id__isnull=True, user__isnull=False)
                ),
            ),
        ]

    def __str__(self) -> str:
        owner = self.agent_id if self.kind == TokenKind.AGENT else self.user
        return f"{self.prefix}… ({self.kind}: {owner})"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None
