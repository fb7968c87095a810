"""The audit of auto-approval rules: each change an auditor must find (a rule added,
removed, promoted from shadow to live) is recorded in the transaction of the change.

The audit app keeps the record (audit.services.rule_event_record); it is this app's
sibling, so the breakpoints app registers it when ready and neither imports the other.
"""

from typing import Any, Protocol

# audit.models.RuleEventType's values (audit is a sibling app).
RULE_CREATED = "created"
RULE_REMOVED = "removed"
RULE_PROMOTED = "promoted"


class RuleAuditRecorder(Protocol):
    def __call__(
        self, *, type: str, rule_id: str, pattern: str, actor: str, **metadata: Any
    ) -> Any: ...


_rule_audit: RuleAuditRecorder | None = None


def rule_audit_register(recorder: RuleAuditRecorder) -> None:
    """audit.services.rule_event_record, registered by the breakpoints app when ready."""
    global _rule_audit
    _rule_audit = recorder


def rule_audit(**event: Any) -> None:
    """Record a rule event; call it inside the change's transaction."""
    if _rule_audit is None:
        # Never change a rule unrecorded: a missing recorder is a wiring bug, not a choice.
        raise RuntimeError("No rule audit registered (the breakpoints app is not ready).")
    _rule_audit(**event)
