"""Refused decisions on the record: one REFUSED event, written by the service that refused.

A decision service (feedback_add, breakpoint_always_approve, breakpoint_cancel,
breakpoint_expire, and release_check, asked before a release) runs in `refusals_recorded`:
a permission refusal (not a reviewer, not an admin, no seat, self-review) or a state
refusal (no longer waiting, a seat that voted) is recorded after the refused transaction
rolled back, in its own transaction, the same whichever channel asked, for a person (or a
trigger rule acting for one). Refused input (a validation error) is the caller's to
correct and is not recorded; nor is a refusal of an agent or the system, nor one on a
breakpoint that does not exist.
"""

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import transaction

from audit.models import Event, EventType
from audit.services import refusal_record
from breakpoints.answers.results import VIA_SYSTEM
from breakpoints.models import Breakpoint
from core.actors import Actor, is_system
from core.choices import Via
from core.exceptions import DomainError, Forbidden, InvalidState

RECORDED = (Forbidden, InvalidState)


def _decides(actor: Actor) -> bool:
    """Whether the actor is someone whose refused decisions are recorded: a person, or a
    trigger rule acting for one. An agent's refusal (another's breakpoint, its own already
    decided) is the API's answer to it; the system's is its caller's."""
    return not actor.is_agent and (not is_system(actor) or actor.handle is not None)


@contextmanager
def refusals_recorded(*, breakpoint_id: str, actor: Actor, via: str | None) -> Iterator[None]:
    """Record a permission or state refusal raised inside (then re-raise it).

    Enter it outside the service's transaction: the event is written once that
    transaction has rolled back. A refusal an inner service recorded already (one service
    calling another) is not recorded twice: only when its event was rolled back with an
    enclosing transaction is it written again here.
    """
    try:
        yield
    except RECORDED as exc:
        refusal_recorded(breakpoint_id=breakpoint_id, actor=actor, via=via, exc=exc)
        raise


def refusal_recorded(
    *, breakpoint_id: str, actor: Actor, via: str | None, exc: DomainError
) -> None:
    """The REFUSED event of a refusal, in its own transaction, unless it is on the record
    already or the breakpoint does not exist (any more)."""
    if not isinstance(exc, RECORDED) or not _decides(actor):
        return
    recorded = exc.refusal_event_id
    with transaction.atomic():
        if (
            recorded is not None
            and Event.objects.filter(
                pk=recorded, breakpoint_id=breakpoint_id, type=EventType.REFUSED
            ).exists()
        ):
            return
        if not Breakpoint.objects.filter(pk=breakpoint_id).exists():
            return
        event = refusal_record(
            breakpoint_id=breakpoint_id,
            via=via or (VIA_SYSTEM if is_system(actor) else Via.API),
            who=actor.handle or actor.name,
            reason=exc.code,
            message=exc.message,
            **{**actor.context, **actor.refusal_details},
        )
    exc.refusal_event_id = event.pk
