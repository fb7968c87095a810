"""Every write to a breakpoint. Views, admin, tasks and commands call these and hold no rule.

- create: breakpoint_create (validation, Idempotency-Key, auto-approval at birth)
- decisions: feedback_add (comment, release, votes), feedback_add_granting (an approval
  with a grant), breakpoint_always_approve, "may this person release this?"
  (release_refusal, asked; release_check, asked by a release)
- batches: decisions_batch (many decisions, each through feedback_add), batch_refusals
- lifecycle: breakpoint_cancel, breakpoint_delete (admins, by hand), retention (breakpoints_purge)
- expiry: breakpoint_expire (by hand), breakpoint_expire_if_due, the TTL sweep, with
  the onTimeout policy (approve, reject, escalate)
- nudges: escalation (escalateAfterSeconds) and reminders while a breakpoint waits
- reads: reads that first expire what is overdue, for views (selectors only read)
- refusals: a refused decision on the record, once, whatever the channel
- decision_times: decision_times_refresh, the aggregate behind expectedDecision
- transitions: the locked, conditional, audited state change they all share
"""

from breakpoints.services.batches import (
    BatchItem,
    BatchOutcome,
    batch_refusals,
    batch_size_check,
    decisions_batch,
)
from breakpoints.services.create import breakpoint_create
from breakpoints.services.decision_times import decision_times_refresh
from breakpoints.services.decisions import (
    breakpoint_always_approve,
    feedback_add,
    feedback_add_granting,
    release_check,
    release_preview,
    release_refusal,
)
from breakpoints.services.expiry import (
    TTL_ACTOR,
    breakpoint_expire,
    breakpoint_expire_if_due,
    breakpoints_expire_due,
)
from breakpoints.services.lifecycle import breakpoint_cancel, breakpoint_delete, breakpoints_purge
from breakpoints.services.nudges import breakpoints_escalate_due, breakpoints_remind_due
from breakpoints.services.reads import (
    breakpoint_read,
    breakpoint_rows_page_read,
    breakpoint_status_read,
    breakpoint_statuses_read,
    breakpoints_page_read,
)

__all__ = [
    "BatchItem",
    "BatchOutcome",
    "TTL_ACTOR",
    "batch_refusals",
    "batch_size_check",
    "breakpoint_always_approve",
    "breakpoint_cancel",
    "breakpoint_create",
    "breakpoint_delete",
    "breakpoint_expire",
    "breakpoint_expire_if_due",
    "breakpoint_read",
    "breakpoint_status_read",
    "breakpoint_statuses_read",
    "breakpoints_escalate_due",
    "breakpoints_expire_due",
    "breakpoint_rows_page_read",
    "breakpoints_page_read",
    "breakpoints_purge",
    "breakpoints_remind_due",
    "decision_times_refresh",
    "decisions_batch",
    "feedback_add",
    "feedback_add_granting",
    "release_check",
    "release_preview",
    "release_refusal",
]
