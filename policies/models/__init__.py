"""Models of the policies app: auto-approval rules, always-break-on tags, notification routes,
the configuration's generation."""

from policies.models.generation import ConfigurationGeneration
from policies.models.route import NotificationRoute
from policies.models.rule import (
    AlwaysBreakOnTag,
    AutoApprovalRule,
    RuleAction,
    RuleMode,
    ShadowFire,
    ShadowOutcome,
    new_rule_id,
)

__all__ = [
    "AlwaysBreakOnTag",
    "AutoApprovalRule",
    "ConfigurationGeneration",
    "NotificationRoute",
    "RuleAction",
    "RuleMode",
    "ShadowFire",
    "ShadowOutcome",
    "new_rule_id",
]
