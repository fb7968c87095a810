"""Who a person is at the identity provider: its issuer and subject (`sub`), stored.

People are matched on (issuer, subject) alone, never on an email address: an address can
change hands, a subject does not.
"""

from django.conf import settings
from django.db import models


class Identity(models.Model):
    """One account here for one subject of one issuer; `groups`: the identity provider's
    groups at the last sign-in or re-check."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="sso_identity"
    )
    issuer = models.CharField(max_length=255)
    subject = models.CharField(max_length=255)
    groups = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    signed_in_at = models.DateTimeField(null=True, blank=True)
    checked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "identities"
        constraints = [
            models.UniqueConstraint(fields=["issuer", "subject"], name="sso_identity_subject")
        ]

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"
