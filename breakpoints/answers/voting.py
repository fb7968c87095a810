"""How the votes of a routed breakpoint's seats decide it (collect-all and quorum), and
which values their approvals agree on."""

from typing import Any

from core.choices import Strategy
from core.digests import values_digest

VOTING_STRATEGIES = frozenset({Strategy.COLLECT_ALL, Strategy.QUORUM})
_MISSING = object()


def majority(seat_count: int) -> int:
    """Approvals a quorum needs: more than half of the seats."""
    return seat_count // 2 + 1


def votes_outcome(strategy: str, seat_count: int, approvals: list[bool]) -> bool | None:
    """The decision the votes so far make (True/False), or None while it is still open.

    collect-all: every seat votes; approved only if all approved. quorum: approved once
    more than half the seats approved, rejected once such a majority is out of reach.
    Other strategies: the latest response decides.
    """
    approved = sum(1 for vote in approvals if vote)
    if strategy == Strategy.COLLECT_ALL:
        return approved == seat_count if len(approvals) >= seat_count else None
    if strategy == Strategy.QUORUM:
        needed = majority(seat_count)
        if approved >= needed:
            return True
        if approved + (seat_count - len(approvals)) < needed:
            return False
        return None
    return approvals[-1] if approvals else None


def approval_disagreeing(
    votes: list[dict[str, Any]], values: Any
) -> tuple[dict[str, Any], list[str]] | None:
    """The first approving vote among `votes` whose values differ from `values`, with the
    JSON pointers of the fields that differ; None when every approving vote approved these
    values (compared as JSON, as the digest compares them: 1 and 1.0 alike)."""
    for earlier in votes:
        if not earlier["approved"] or "values" not in earlier:
            continue
        if values_digest(earlier["values"]) != values_digest(values):
            return earlier, differing_fields(earlier["values"], values)
    return None


def differing_fields(values: Any, other: Any, at: str = "") -> list[str]:
    """The JSON pointers at which two answers differ (a field one of them lacks included)."""
    if isinstance(values, dict) and isinstance(other, dict):
        return [
            path
            for key in sorted(values.keys() | other.keys())
            for path in differing_fields(
                values.get(key, _MISSING), other.get(key, _MISSING), f"{at}/{_escaped(key)}"
            )
        ]
    if values is _MISSING or other is _MISSING:
        return [at]
    return [at] if values_digest(values) != values_digest(other) else []


def _escaped(key: str) -> str:
    """A key as a JSON pointer's reference token (RFC 6901)."""
    return key.replace("~", "~0").replace("/", "~1")


def approvers(votes: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Each approving vote's seat and who answered for it, in the order they voted."""
    return [
        {"seat": vote["seat"], "respondedBy": vote["respondedBy"]}
        for vote in votes
        if vote["approved"] and vote.get("seat")
    ]
