"""The review screen's routing panel: each expert seat, who holds it, its vote, what is missing.

Presentation only: the seats come from accounts.experts.seat_summary and the rules
for deciding stay in the services; this module only says them in words.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from accounts import experts as routing
from breakpoints.answers.voting import majority
from breakpoints.models import Breakpoint
from core.choices import Strategy

STRATEGY_HELP: dict[str, str] = {
    Strategy.SINGLE: "one response decides",
    Strategy.FIRST_RESPONSE_WINS: "the first response from any seat decides",
    Strategy.COLLECT_ALL: "every seat votes; approved only if all approve",
    Strategy.QUORUM: "approved once a majority of seats approve",
}
KIND_LABEL = {
    routing.SeatKind.GROUP: "group",
    routing.SeatKind.USER: "user",
    routing.SeatKind.OWNER: "project owner",
}


@dataclass(frozen=True)
class SeatRow:
    name: str
    resolved: bool
    kind_label: str
    vote: Mapping[str, Any] | None

    @property
    def decision(self) -> str:
        """approved / rejected (for the badge), or "" while the seat has not voted."""
        if self.vote is None:
            return ""
        return "approved" if self.vote.get("approved") else "rejected"


@dataclass(frozen=True)
class SeatsPanel:
    strategy: str
    strategy_help: str
    seats: list[SeatRow]
    missing: str  # empty once nothing is missing (or the breakpoint is no longer waiting)

    @property
    def unresolved(self) -> list[str]:
        return [seat.name for seat in self.seats if not seat.resolved]


def _missing(strategy: str, seats: list[SeatRow]) -> str:
    """What the breakpoint still waits for, in words."""
    open_names = ", ".join(seat.name for seat in seats if seat.vote is None)
    if not open_names:
        return ""
    if strategy == Strategy.QUORUM:
        needed_total = majority(len(seats))
        approvals = sum(1 for seat in seats if seat.decision == "approved")
        needed = max(needed_total - approvals, 0)
        return (
            f"{needed} more approval(s) needed for a majority ({needed_total} of {len(seats)} "
            f"seats); not yet voted: {open_names}."
        )
    if strategy == Strategy.COLLECT_ALL:
        return f"Every seat must vote; not yet voted: {open_names}."
    return f"A response from any of: {open_names}."


def seats_panel(bp: Breakpoint, resolved: Mapping[str, routing.Seat]) -> SeatsPanel | None:
    """The panel for a routed breakpoint (None when it names no expert)."""
    if not bp.experts:
        return None
    rows = [
        SeatRow(
            name=seat["name"],
            resolved=seat["resolved"],
            kind_label=KIND_LABEL.get(seat["kind"], ""),
            vote=seat["vote"],
        )
        for seat in routing.seat_summary(bp.experts, bp.votes, resolved)
    ]
    return SeatsPanel(
        strategy=bp.strategy,
        strategy_help=STRATEGY_HELP.get(bp.strategy, ""),
        seats=rows,
        missing=_missing(bp.strategy, rows) if bp.is_waiting else "",
    )
