"""The BreakpointResult an agent receives, for every way a breakpoint ends.

babysitter's shape: approved, response/feedback, option, respondedBy, allResponses; and
the answer to a form (values, edited: breakpoints.payload.form_schema). Each ending has one builder
here; services pick the builder, never the keys.
"""

from collections import Counter
from datetime import datetime
from typing import Any

from django.template.defaultfilters import pluralize

from breakpoints.answers.voting import approvers
from breakpoints.payload.form_schema import edited
from core import receipt_keys, receipts
from core.digests import values_digest
from core.timestamps import timestamp

# Where a decision came from, in a receipt: a channel (core.choices.Via), or these.
VIA_RULE = "rule"  # an auto-approval rule, at creation
VIA_SYSTEM = "system"  # the TTL sweep, a timeout policy, a management command
VIA_GRANT = "grant"  # a reviewer's grant, at creation (the receipt names it and its granter)


def vote(
    *,
    approved: bool,
    comment: str,
    option: str | None,
    responder: str,
    at: datetime,
    seat: str | None = None,
    values: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One response, as listed in result.allResponses (and Breakpoint.votes); an approving
    one of a breakpoint with a form carries its values."""
    response: dict[str, Any] = {
        "respondedBy": responder,
        "approved": approved,
        "feedback": comment,
        "respondedAt": timestamp(at),
    }
    if option is not None:
        response["option"] = option
    if seat is not None:
        response["seat"] = seat
    if values is not None:
        response["values"] = values
    return response


def result_released(deciding_vote: dict[str, Any]) -> dict[str, Any]:
    """One response decides: a reviewer's release, or a rule's auto-approval."""
    result: dict[str, Any] = {
        "approved": deciding_vote["approved"],
        "response": deciding_vote["feedback"],
        "feedback": deciding_vote["feedback"],
        "respondedBy": deciding_vote["respondedBy"],
    }
    if "option" in deciding_vote:
        result["option"] = deciding_vote["option"]
    if "values" in deciding_vote:
        result["values"] = deciding_vote["values"]
    result["allResponses"] = [deciding_vote]
    return result


def result_auto_approved(
    *, responder: str, reason: str, at: datetime, values: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A rule approved at birth: the same shape as a reviewer's release, the rule responding
    (with the proposal as it is, when there is a form)."""
    feedback = f"Auto-approved: {reason}"
    return result_released(
        vote(
            approved=True, comment=feedback, option=None, responder=responder, at=at, values=values
        )
    )


def result_voted(approved: bool, votes: list[dict[str, Any]]) -> dict[str, Any]:
    """The votes of a collect-all or quorum breakpoint decided it.

    feedback/response join the comments of the side that won (so a rejected agent reads
    why); option is the one most chosen on that side; respondedBy lists every voter;
    approvers each approving seat and who answered for it. An approval's values are
    those every approving vote approved (decisions refuses an approving vote whose
    values differ from an earlier approval's).
    """
    winning = [response for response in votes if response["approved"] is approved]
    comments = [response for response in winning if response["feedback"].strip()]
    if len(comments) == 1:
        text = comments[0]["feedback"]
    else:
        text = "\n".join(
            f"{response['respondedBy']} ({response['seat']}): {response['feedback']}"
            for response in comments
        )
    result: dict[str, Any] = {"approved": approved, "response": text, "feedback": text}
    options = [response["option"] for response in winning if response.get("option")]
    if options:
        result["option"] = Counter(options).most_common(1)[0][0]
    answers = [response["values"] for response in winning if "values" in response]
    if approved and answers:
        result["values"] = answers[0]  # every approving vote's, alike (voting.approval_disagreeing)
    result["respondedBy"] = list(dict.fromkeys(response["respondedBy"] for response in votes))
    result["approvers"] = approvers(votes)
    result["allResponses"] = votes
    return result


def result_cancelled(*, responder: str, reason: str = "") -> dict[str, Any]:
    return _not_approved(responder, reason.strip() or f"Cancelled by {responder}.")


def result_expired(*, responder: str, reason: str = "") -> dict[str, Any]:
    """Expired by hand (an admin) or by the system, with the reason given."""
    return _not_approved(responder, reason or f"Expired by {responder}.")


def result_timed_out(*, responder: str, ttl_seconds: int | None) -> dict[str, Any]:
    """Expired because nobody decided within its TTL."""
    within = f"{ttl_seconds} second{pluralize(ttl_seconds)}"
    return _not_approved(responder, f"Expired: no decision within {within}.")


def _not_approved(responder: str, feedback: str) -> dict[str, Any]:
    return {"approved": False, "feedback": feedback, "respondedBy": responder}


TIMEOUT_POLICY_RESPONDER = "timeout-policy"


def result_timeout_policy(
    *,
    approved: bool,
    ttl_seconds: int | None,
    at: datetime,
    votes: list[dict[str, Any]],
    values: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """payload.onTimeout approve/reject released it: the policy is the responder.

    Votes already cast (collect-all, quorum) stay in allResponses, before the policy's. An
    approval approves the proposal as it is (`values`, when there is a form).
    """
    policy = "approve" if approved else "reject"
    verb = "Approved" if approved else "Rejected"
    feedback = (
        f"{verb} by the timeout policy (onTimeout: {policy}): no decision within "
        f"{ttl_seconds} second{pluralize(ttl_seconds)}."
    )
    result = result_released(
        vote(
            approved=approved,
            comment=feedback,
            option=None,
            responder=TIMEOUT_POLICY_RESPONDER,
            at=at,
            values=values if approved else None,
        )
    )
    result["allResponses"] = [*votes, *result["allResponses"]]
    result["timeoutPolicy"] = {"requested": policy, "applied": policy}
    return result


def result_timeout_refused(
    *, responder: str, ttl_seconds: int | None, requested: str, reason: str
) -> dict[str, Any]:
    """onTimeout asked for an approval that a rule forbids: expired instead, saying why."""
    result = result_timed_out(responder=responder, ttl_seconds=ttl_seconds)
    result["feedback"] += f" onTimeout: {requested} was not applied: {reason}."
    result["timeoutPolicy"] = {"requested": requested, "applied": "expire", "reason": reason}
    return result


def result_sealed(
    result: dict[str, Any],
    *,
    breakpoint_id: str,
    agent_id: str,
    run_id: str | None,
    status: str,
    via: str,
    at: datetime,
    payload_digest: str | None,
    proposal: dict[str, Any] | None = None,
    grant: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A final result with what binds it: payloadDigest (what the reviewer was shown),
    values (the approved answer to its form, null otherwise), edited (they differ from the
    `proposal`), valuesDigest, and receipt, the service's signed statement of the decision
    (core.receipts; a collect-all or quorum decision's also names its approvers, a grant's
    approval the grant: `grant` {grantId, grantedBy})."""
    values = result.get("values") if result["approved"] else None
    digest = values_digest(values)
    claims = {
        "breakpointId": breakpoint_id,
        "agentId": agent_id,
        "runId": run_id,
        "status": status,
        "approved": result["approved"],
        "option": result.get("option"),
        "respondedBy": result.get("respondedBy"),
        "via": via,
        "decidedAt": timestamp(at),
        "payloadDigest": payload_digest,
        "valuesDigest": digest,
    }
    if "approvers" in result:  # a multi-seat decision: each approving seat, signed too
        claims["approvers"] = result["approvers"]
    if grant is not None:  # approved by a grant: which one, and who gave it, signed too
        claims.update(grantId=grant["grantId"], grantedBy=grant["grantedBy"])
    receipt = receipts.sign(claims, receipt_keys.signing_key())
    return {
        **result,
        "values": values,
        "edited": edited(values, proposal),
        "payloadDigest": payload_digest,
        "valuesDigest": digest,
        "receipt": receipt,
    }
