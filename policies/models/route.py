"""Notification routes: which channels hear about which breakpoints (admins manage them)."""

from django.db import models

from core import limits


class NotificationRoute(models.Model):
    """A pattern (the rule pattern language) and the channels of the breakpoints it matches.

    `channels` is a list of specs, {"kind": ..., and that channel's own keys}, validated by
    policies.routes with the channel of that kind (core.channels; each channel's spec_keys
    and spec_schemas say its shapes). `defaults` fills onTimeout, escalateAfterSeconds, escalateTo
    and remindEverySeconds when a matching breakpoint's payload leaves them out.
    """

    name = models.CharField(max_length=limits.MAX_ROUTE_NAME_LENGTH, unique=True)
    pattern = models.CharField(max_length=limits.MAX_PATTERN_LENGTH)
    channels = models.JSONField(default=list)
    defaults = models.JSONField(default=dict, blank=True)
    enabled = models.BooleanField(default=True)
    created_by = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "breakpoints_notificationroute"  # the table keeps the name it was created with
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.pattern})"
