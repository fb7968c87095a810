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


# An endpoint URL as push services hand them out (FCM's are about 200 characters); the
# keys are base64url: p256dh a 65-byte P-256 point (87 characters), auth 16 bytes (22).
MAX_ENDPOINT_LENGTH = 1024
MAX_PUSH_KEY_LENGTH = 128
MAX_DEVICE_LABEL_LENGTH = 200


class PushSubscription(models.Model):
    """One device on which a reviewer turned on notifications (channels.push): the Push
    API subscription its browser gave. The endpoint is unique: a browser profile has one
    subscription, which belongs to whoever turned it on last."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="push_subscriptions"
    )
    endpoint = models.URLField(max_length=MAX_ENDPOINT_LENGTH, unique=True)
    p256dh = models.CharField(max_length=MAX_PUSH_KEY_LENGTH)
    auth = models.CharField(max_length=MAX_PUSH_KEY_LENGTH)
    label = models.CharField(
        max_length=MAX_DEVICE_LABEL_LENGTH, blank=True, help_text="The device, as its browser says."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    last_sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "device"

    def __str__(self) -> str:
        return self.label or f"device {self.pk}"
