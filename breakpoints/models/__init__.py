"""Models of the breakpoints app, one module each."""

from breakpoints.models.breakpoint import Breakpoint, new_breakpoint_id
from breakpoints.models.decision_link import DecisionLinkUse
from breakpoints.models.route import NotificationRoute
from breakpoints.models.rule import AlwaysBreakOnTag, AutoApprovalRule, RuleAction, new_rule_id
from breakpoints.models.token import ApiToken
from breakpoints.models.webhook import (
    DeliveryStatus,
    Webhook,
    WebhookDelivery,
    WebhookEventType,
)

__all__ = [
    "AlwaysBreakOnTag",
    "ApiToken",
    "AutoApprovalRule",
    "Breakpoint",
    "DecisionLinkUse",
    "DeliveryStatus",
    "NotificationRoute",
    "RuleAction",
    "Webhook",
    "WebhookDelivery",
    "WebhookEventType",
    "new_breakpoint_id",
    "new_rule_id",
]
