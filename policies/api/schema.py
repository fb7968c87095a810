"""How the OpenAPI document describes the policies' settings wherever they are given."""

from core import limits

ESCALATE_TO_DESCRIPTION = (
    "An expert name. Required (a name, not null) when escalateAfterSeconds is set or "
    "onTimeout is escalate; without it such a request is refused with 400."
)
# -1 (never auto-approve) or MIN..MAX: one integer range, 0 refused in words and with a 400.
AUTO_APPROVE_AFTER_N_SCHEMA = {
    "type": "integer",
    "minimum": limits.NO_AUTO_APPROVE_THRESHOLD,
    "maximum": limits.MAX_AUTO_APPROVE_AFTER_N,
    "description": f"Auto-approve after this many consecutive manual approvals of the same "
    f"key: {limits.MIN_AUTO_APPROVE_AFTER_N}-{limits.MAX_AUTO_APPROVE_AFTER_N}, or "
    f"{limits.NO_AUTO_APPROVE_THRESHOLD} for never; 0 is refused with 400.",
}
