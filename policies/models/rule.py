"""Auto-approval rules and the always-break-on tags that override them."""

import secrets

from django.db import models

from core import limits
from core.limits import MAX_PATTERN_LENGTH


def new_rule_id() -> str:
    """`rule-` and 8 lowercase hex digits, as babysitter's CLI prints them."""
    return "rule-" + secrets.token_hex(4)


class RuleAction(models.TextChoices):
    AUTO_APPROVE = "auto-approve", "Auto-approve"
    NEVER_AUTO_APPROVE = "never-auto-approve", "Never auto-approve"


class AutoApprovalRule(models.Model):
    """A pattern on the breakpoint key (with optional predicates) and what to do on a match."""

    id = models.CharField(primary_key=True, max_length=13, default=new_rule_id, editable=False)
    pattern = models.CharField(
        max_length=MAX_PATTERN_LENGTH,
        help_text="Canonical form, e.g. gate.*(tags contains 'prerequisites' AND expert = 'owner').",
    )
    action = models.CharField(
        max_length=32, choices=RuleAction.choices, default=RuleAction.AUTO_APPROVE
    )
    note = models.TextField(blank=True)
    created_by = models.CharField(max_length=200, help_text="Username at the time of creation.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "breakpoints_autoapprovalrule"  # the table keeps the name it was created with
        ordering = ["created_at", "id"]
        verbose_name = "auto-approval rule"

    def __str__(self) -> str:
        return f"{self.pk}: {self.action} {self.pattern}"


class AlwaysBreakOnTag(models.Model):
    """A tag that always requires a manual decision, whatever auto-approve rules say."""

    tag = models.CharField(max_length=limits.MAX_TAG_LENGTH, unique=True)
    note = models.TextField(blank=True)
    created_by = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "breakpoints_alwaysbreakontag"  # the table keeps the name it was created with
        ordering = ["tag"]
        verbose_name = "always-break-on tag"

    def __str__(self) -> str:
        return self.tag
