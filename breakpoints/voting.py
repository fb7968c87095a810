"""How the votes of a routed breakpoint's seats decide it (collect-all and quorum)."""

from core.choices import Strategy

VOTING_STRATEGIES = frozenset({Strategy.COLLECT_ALL, Strategy.QUORUM})


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
