"""How a finished breakpoint ended, in the words every channel shows it with (email, Slack,
JIRA, the console): the verdict, who decided, the option chosen and the feedback, read from
its status and result here once; each channel only sets them in its own markup.
"""

from dataclasses import dataclass
from typing import Any

from core.choices import Status


@dataclass(frozen=True)
class Outcome:
    status: str
    approved: bool  # the result says approved (a rejection, an expiry, a cancellation: not)
    responders: tuple[str, ...]  # respondedBy: the one person, or each seat's voter in order
    option: str  # the option chosen, "" when none
    feedback: str  # as given, "" when none

    @property
    def released(self) -> bool:
        return self.status == Status.RELEASED

    @property
    def verdict(self) -> str:
        """ "Approved" or "Rejected" for a decision; else the status's label ("Expired")."""
        if self.released:
            return "Approved" if self.approved else "Rejected"
        return (
            Status(self.status).label if self.status in Status.values else self.status.capitalize()
        )

    @property
    def by(self) -> str:
        """Who decided, one name or several ("alice, bob"); "" when nobody is named."""
        return ", ".join(self.responders)


def _responders(responded_by: Any) -> tuple[str, ...]:
    if isinstance(responded_by, list):
        return tuple(str(name) for name in responded_by)
    return (str(responded_by),) if responded_by else ()


def outcome_of(status: Any, result: Any) -> Outcome:
    """The outcome of a breakpoint in `status` with `result` (its JSON, as stored or sent)."""
    result = result if isinstance(result, dict) else {}
    option = result.get("option")
    return Outcome(
        status=str(status or ""),
        approved=result.get("approved") is True,
        responders=_responders(result.get("respondedBy")),
        option=option if isinstance(option, str) else "",
        feedback=str(result.get("feedback") or ""),
    )
