"""Four eyes: whether a breakpoint is under it, and what that forbids.

A breakpoint is under four eyes when its own preventSelfReview (the payload's, or a
matching route's default, fixed at creation) or the service's BPM_PREVENT_SELF_REVIEW asks
for it. Such a breakpoint is decided by a person other than its requester, always:
- no automatic approval of any kind releases it (auto-approve rules, "Always approve",
  autoApproveAfterN, and an onTimeout policy of `approve`): autoapproval.evaluate and
  autoapproval.forbidding_reason ask `under_four_eyes`;
- nor does a trigger rule's approval (an external event, no person deciding): the
  decision service asks `require_person_to_approve` on every release, and refuses it
  (recorded as every refusal is). A trigger may still reject or cancel it: neither
  approves anything, and a person may always do the same;
- an onTimeout of `approve` is refused where it would meet four eyes: a breakpoint's
  creation (400) and a route's defaults when saved (`timeout_approve_problem`);
- it must name its requester (`requester_problem`): a creation without one is refused (400);
- the requester is refused a decision on every channel (core.actors.require_not_requester,
  asked by the breakpoint services).
"""

from collections.abc import Mapping
from typing import Any

from django.conf import settings

from core.choices import OnTimeout, Via
from core.exceptions import Forbidden

FOUR_EYES_REASON = (
    "Four eyes (preventSelfReview): a person other than its requester must decide it; "
    "no automatic approval applies"
)


# The channels whose decisions no person gives: a trigger rule acts on an external event.
AUTOMATIC_CHANNELS = frozenset({Via.TRIGGER})
AUTOMATIC_APPROVAL_REFUSAL = (
    "Four eyes (preventSelfReview): a trigger rule's approval is automatic, and no automatic "
    "approval applies; a person other than its requester must approve it (a trigger may "
    "still reject or cancel it)."
)


def service_wide() -> bool:
    """Whether the service puts every breakpoint under four eyes (BPM_PREVENT_SELF_REVIEW)."""
    return bool(settings.BPM_PREVENT_SELF_REVIEW)


def under_four_eyes(prevent_self_review: bool | None) -> bool:
    """Whether a breakpoint whose own preventSelfReview is this is under four eyes."""
    return bool(prevent_self_review) or service_wide()


def requester_problem(requested_by: str | None, *, four_eyes: bool) -> str | None:
    """Why a breakpoint under four eyes (`four_eyes`) cannot be created requested by
    `requested_by`, or None: it must name its requester, or four eyes keeps nobody from
    deciding it."""
    if requested_by or not four_eyes:
        return None
    return (
        "Under four eyes (preventSelfReview) a breakpoint must name its requester: send "
        "requestedBy (the username or email of a person here), or use a token with an owner."
    )


def require_person_to_approve(
    *, via: str, approved: bool, prevent_self_review: bool | None
) -> None:
    """Four eyes: refuse (Forbidden) an approval given through a channel no person decides
    on (a trigger rule) of a breakpoint under four eyes. A rejection passes: it approves
    nothing. Asked by the decision service for every release, whatever the channel."""
    if approved and via in AUTOMATIC_CHANNELS and under_four_eyes(prevent_self_review):
        raise Forbidden(AUTOMATIC_APPROVAL_REFUSAL, {"via": via, "rule": "preventSelfReview"})


def timeout_approve_problem(values: Mapping[str, Any], *, four_eyes: bool) -> str | None:
    """Why `values` (a payload's timeout keys merged over its routes' defaults, or a route's
    defaults) may not say onTimeout: approve, or None. `four_eyes`: whether what they apply
    to is under four eyes from elsewhere (a payload, a route, the service)."""
    if values.get("onTimeout") != OnTimeout.APPROVE:
        return None
    if not (four_eyes or under_four_eyes(values.get("preventSelfReview") is True)):
        return None
    return (
        "onTimeout: approve cannot apply under four eyes (preventSelfReview): a person other "
        "than the requester must decide. Use expire, reject or escalate."
    )
