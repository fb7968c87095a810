"""Feedback: reviewers' comments on a breakpoint, including the releasing one."""

from django.conf import settings
from django.db import models

from core.choices import via_choices


class Feedback(models.Model):
    # No separate FK index: feedback_bp_created (breakpoint, created_at) serves the lookups.
    breakpoint = models.ForeignKey(
        "breakpoints.Breakpoint", on_delete=models.CASCADE, related_name="feedback", db_index=False
    )
    author = models.CharField(max_length=150, help_text="Username at the time of writing.")
    author_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    comment = models.TextField(blank=True)
    releases = models.BooleanField(default=False, help_text="This comment released the breakpoint.")
    approved = models.BooleanField(null=True, blank=True)
    option = models.CharField(max_length=500, null=True, blank=True)
    via = models.CharField(
        max_length=16, choices=via_choices, blank=True, help_text="Where it was given."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "reviews_feedback"  # the table keeps the name it was created with
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["breakpoint", "created_at"], name="feedback_bp_created")]
        verbose_name_plural = "feedback"

    def __str__(self) -> str:
        return f"{self.author}: {self.comment[:60]}"
