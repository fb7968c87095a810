"""The uses of mailed decision links: what makes each link work once."""

from django.conf import settings
from django.db import models

# secrets.token_urlsafe(16) is 22 characters; room to grow without a migration.
NONCE_LENGTH = 64


class DecisionLinkUse(models.Model):
    """One decision taken through an email link (channels.email.links).

    Only the link's random nonce is stored, never the signed token: the unique nonce is
    what refuses a second use, even when two requests race (the second INSERT fails).
    The row is written in the transaction of the decision, so a refused decision leaves
    the link usable.
    """

    nonce = models.CharField(max_length=NONCE_LENGTH, unique=True)
    breakpoint = models.ForeignKey(
        "breakpoints.Breakpoint", on_delete=models.CASCADE, related_name="decision_link_uses"
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    used_at = models.DateTimeField(auto_now_add=True)
    outcome = models.CharField(
        max_length=16, help_text="What the link decided: approved, rejected."
    )

    class Meta:
        db_table = "breakpoints_decisionlinkuse"  # the table keeps the name it was created with
        ordering = ["-used_at"]

    def __str__(self) -> str:
        return f"{self.outcome} on {self.breakpoint_id}"
