"""Decisions in batches: many waiting breakpoints decided at once, each as a single one.

Every item goes through feedback_add (release=True), in a transaction of its own: one
refused item never blocks the others, and each refusal is recorded once, by feedback_add,
exactly as a single decision's is. The console asks batch_refusals first, to show what
will be decided and what refused (and why) before anything is.
"""

from dataclasses import dataclass
from typing import Any

from accounts import experts as routing
from accounts.people import person_namer
from breakpoints.models import Breakpoint
from breakpoints.services.decisions import feedback_add, release_refusal
from breakpoints.services.refusals import refusal_recorded
from core.actors import Actor, require_reviewer
from core.choices import Via
from core.exceptions import DomainError, Forbidden, InvalidInput, NotFound
from core.limits import BREAKPOINT_ID_LENGTH, MAX_BATCH_DECISIONS
from core.storable import storable_text

NOT_FOUND = "Breakpoint not found."


@dataclass(frozen=True)
class BatchItem:
    """One decision asked for in a batch: what a single decision takes."""

    breakpoint_id: str
    approved: bool
    comment: str = ""
    option: str | None = None
    values: Any = None


@dataclass(frozen=True)
class BatchOutcome:
    """What became of one item: the breakpoint as decided, or the refusal (never both)."""

    breakpoint_id: str
    breakpoint: Breakpoint | None = None
    error: DomainError | None = None


def decisions_batch(
    *, actor: Actor, items: list[BatchItem], via: str = Via.API
) -> list[BatchOutcome]:
    """Decide each item (1 to MAX_BATCH_DECISIONS) in order, through feedback_add with
    release=True: the same checks (reviewer, four eyes, seats, still waiting, option,
    values), the same records. The outcomes come in the items' order; a breakpoint named
    twice is decided once (the second is refused as a decided one is). Too many or no
    items: InvalidInput; someone who is not a reviewer: Forbidden (recorded on each
    breakpoint named); either way nothing is decided."""
    batch_size_check(len(items))
    _require_reviewer(actor, items, via)
    outcomes = []
    for item in items:
        if not _possible_id(item.breakpoint_id):  # no breakpoint is named so: not queried
            outcomes.append(BatchOutcome(item.breakpoint_id, error=NotFound(NOT_FOUND)))
            continue
        try:
            _, bp = feedback_add(
                breakpoint_id=item.breakpoint_id,
                actor=actor,
                comment=item.comment,
                release=True,
                approved=item.approved,
                option=item.option,
                values=item.values,
                via=via,
            )
        except DomainError as exc:  # recorded by feedback_add when it is a refusal
            outcomes.append(BatchOutcome(item.breakpoint_id, error=exc))
        else:
            outcomes.append(BatchOutcome(item.breakpoint_id, breakpoint=bp))
    return outcomes


def _require_reviewer(actor: Actor, items: list[BatchItem], via: str) -> None:
    """Refuse the whole batch (Forbidden) to someone who is not a reviewer or an admin,
    recording the refusal on each breakpoint named, once, as a single decision would."""
    try:
        require_reviewer(actor)
    except Forbidden as exc:
        named = [item.breakpoint_id for item in items if _possible_id(item.breakpoint_id)]
        for breakpoint_id in dict.fromkeys(named):
            refusal_recorded(breakpoint_id=breakpoint_id, actor=actor, via=via, exc=exc)
        raise


def _possible_id(value: str) -> bool:
    return 0 < len(value) <= BREAKPOINT_ID_LENGTH and storable_text(value)


def batch_size_check(count: int) -> None:
    """Refuse (InvalidInput) a batch of no item or of more than MAX_BATCH_DECISIONS."""
    if not 1 <= count <= MAX_BATCH_DECISIONS:
        raise InvalidInput(
            f"A batch decides 1 to {MAX_BATCH_DECISIONS} breakpoints; this one has {count}.",
            {"items": [f"Send 1 to {MAX_BATCH_DECISIONS} items, not {count}."]},
        )


def batch_refusals(*, actor: Actor, breakpoints: list[Breakpoint]) -> list[str | None]:
    """Why this person may not release each of these breakpoints now (release_refusal:
    four eyes, no open seat, no longer waiting), or None where they may: the question every
    channel asks, for a whole batch. Nothing is written. The routed ones' seats are
    resolved in one query for all of them, the person's accounts read once; only a
    breakpoint with votes already reads them (its voters)."""
    names = {name for bp in breakpoints for name in bp.experts or [] if isinstance(name, str)}
    resolved = routing.resolve(names)
    named = person_namer(actor.user)  # four eyes: the person's accounts read once
    return [release_refusal(bp, actor, resolved, named) for bp in breakpoints]
