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


class RuleMode(models.TextChoices):
    """A live rule decides; a shadow rule only records what it would have decided."""

    LIVE = "live", "Live"
    SHADOW = "shadow", "Shadow"


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
    mode = models.CharField(
        max_length=8,
        choices=RuleMode.choices,
        default=RuleMode.LIVE,
        help_text="live: decides; shadow: only records the breakpoints it would have approved.",
    )
    note = models.TextField(blank=True)
    created_by = models.CharField(max_length=200, help_text="Username at the time of creation.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "breakpoints_autoapprovalrule"  # the table keeps the name it was created with
        ordering = ["created_at", "id"]
        verbose_name = "auto-approval rule"

    def __str__(self) -> str:
        shadow = " (shadow)" if self.mode == RuleMode.SHADOW else ""
        return f"{self.pk}: {self.action} {self.pattern}{shadow}"


class ShadowOutcome(models.TextChoices):
    AGREED = "agreed"  # a person then approved the breakpoint
    DISAGREED = "disagreed"  # a person then rejected it


class ShadowFire(models.Model):
    """A breakpoint a shadow rule would have auto-approved, and what a person then decided.

    Written by policies.shadow only: one row per (rule, breakpoint) at creation, its
    `outcome` set when a person decides (a timeout policy, an expiry or a cancellation
    leaves it empty: nobody agreed or disagreed). The auto_approval.shadow audit event
    says the same to a reader of the breakpoint; these rows are what the counts read.
    """

    # No separate FK indexes: shadowfire_rule_outcome and shadowfire_bp_rule lead with them.
    rule = models.ForeignKey(
        AutoApprovalRule, on_delete=models.CASCADE, related_name="shadow_fires", db_index=False
    )
    # A string reference, not an import: the breakpoints app sits above this one.
    breakpoint = models.ForeignKey(
        "breakpoints.Breakpoint", on_delete=models.CASCADE, related_name="+", db_index=False
    )
    fired_at = models.DateTimeField(auto_now_add=True)
    outcome = models.CharField(max_length=9, choices=ShadowOutcome.choices, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["breakpoint", "rule"], name="shadowfire_bp_rule")
        ]
        indexes = [models.Index(fields=["rule", "outcome"], name="shadowfire_rule_outcome")]

    def __str__(self) -> str:
        return f"{self.rule_id} on {self.breakpoint_id}: {self.outcome or 'undecided'}"


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
