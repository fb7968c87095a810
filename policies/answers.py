"""Answers only a person can give: a form with required fields and no proposal.

An agent may declare a form (payload.form) and propose values (payload.proposal); an
automatic approval approves the proposal as it is. A breakpoint whose form requires
fields and that proposes none has nothing to approve as it is: a person fills it in,
always (breakpoints.payload.form_schema.needs_answer decides which breakpoints these are):
- no automatic approval of any kind releases it (auto-approve rules, autoApproveAfterN,
  an onTimeout policy of `approve`): autoapproval.evaluate and
  autoapproval.forbidding_reason are told `needs_answer`;
- an onTimeout of `approve` (the payload's, or a default of a route it matches) is refused
  at its creation (400: `timeout_approve_problem`).
"""

from collections.abc import Mapping
from typing import Any

from core.choices import OnTimeout

NEEDS_ANSWER_REASON = (
    "Its form has required fields and no proposal: a person must fill it in; no automatic "
    "approval applies"
)


def timeout_approve_problem(values: Mapping[str, Any], *, needs_answer: bool) -> str | None:
    """Why `values` (a payload's timeout keys merged over its routes' defaults) may not
    say onTimeout: approve for a breakpoint that `needs_answer`, or None."""
    if values.get("onTimeout") != OnTimeout.APPROVE or not needs_answer:
        return None
    return (
        "onTimeout: approve cannot apply to a form with required fields and no proposal: "
        "there is nothing to approve as it is. Send a proposal, or use expire, reject or "
        "escalate."
    )
