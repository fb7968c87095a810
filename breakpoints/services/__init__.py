"""Every write to a breakpoint. Views, admin, tasks and commands call these and hold no rule.

- create: breakpoint_create (validation, Idempotency-Key, auto-approval at birth)
- decisions: feedback_add (comment, release, votes), breakpoint_always_approve
- lifecycle: breakpoint_cancel, breakpoint_expire, the TTL sweep, retention
- transitions: the locked, conditional, audited state change they all share
"""

from breakpoints.services.create import breakpoint_create
from breakpoints.services.decisions import (
    VOTING_STRATEGIES,
    breakpoint_always_approve,
    feedback_add,
    release_preview,
    votes_outcome,
)
from breakpoints.services.lifecycle import (
    TTL_ACTOR,
    breakpoint_cancel,
    breakpoint_expire,
    breakpoint_expire_if_due,
    breakpoints_expire_due,
    breakpoints_purge,
    is_overdue,
)

__all__ = [
    "TTL_ACTOR",
    "VOTING_STRATEGIES",
    "breakpoint_always_approve",
    "breakpoint_cancel",
    "breakpoint_create",
    "breakpoint_expire",
    "breakpoint_expire_if_due",
    "breakpoints_expire_due",
    "breakpoints_purge",
    "feedback_add",
    "is_overdue",
    "release_preview",
    "votes_outcome",
]
