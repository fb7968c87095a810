"""The core of every write: lock a row, move it along an allowed transition, record it.

A transition moves the status with a conditional UPDATE (so two concurrent releases
cannot both win, on any database) and records the audit event, with the webhook outbox
rows, in the caller's transaction. Within `recorded_together()` (a decision's feedback
and release) the UPDATE, the events and the outbox rows of the block are written together
when it ends, in one statement on PostgreSQL (infra.db.together).
"""

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import partial
from typing import Any, NoReturn

from django.utils import timezone

from audit.models import Event
from audit.services import event_new, events_write
from breakpoints.answers.results import VIA_SYSTEM, result_sealed
from breakpoints.models import Breakpoint, Feedback
from breakpoints.representation.contract import breakpoint_json
from breakpoints.wakeups import announce
from core.actors import Actor, is_system
from core.choices import ALLOWED_TRANSITIONS, Status, Via
from core.exceptions import InvalidState, NotFound
from infra.db.prepared import Prepared
from infra.db.together import insert_and_read, inserts_held, update_held
from notifications.models import WebhookEventType
from notifications.services import deliveries_enqueue, deliveries_enqueue_many
from policies import configuration

_TIMESTAMP_FIELD = {
    Status.RELEASED: "released_at",
    Status.EXPIRED: "expired_at",
    Status.CANCELLED: "cancelled_at",
}


# (breakpoint, the outbox body's data, event type) per record() within recorded_together().
_Recorded = tuple[Breakpoint, dict[str, Any], str]
# What record() keeps within recorded_together(): the events, the outbox rows.
_Kept = tuple[list[Event], list[_Recorded]]
_together: ContextVar[_Kept | None] = ContextVar("recorded_together", default=None)


def record(bp: Breakpoint, *, type: str, actor: Actor, metadata: dict[str, Any]) -> None:
    """The audit event, and the outbox rows for it, in the caller's transaction (within
    recorded_together(), both at the end of the block, each outbox body showing the
    breakpoint as it was when recorded)."""
    event = event_new(
        breakpoint_id=bp.pk, type=type, actor=actor.name, metadata={**actor.context, **metadata}
    )
    together = _together.get()
    if together is None:
        events_write([event])
    else:
        together[0].append(event)
    if type not in WebhookEventType.values:
        return
    if together is not None:
        together[1].append((bp, breakpoint_json(bp), type))
    else:
        deliveries_enqueue(breakpoint=bp, data=breakpoint_json(bp), event_type=type)


@contextmanager
def recorded_together() -> Iterator[None]:
    """record() within the block keeps its events and outbox rows and writes them, in
    order, when the block ends without an error (in the caller's transaction: nothing is
    written when it raises), in one statement on PostgreSQL (infra.db.together.inserts_held),
    with a move()'s UPDATE, which goes first.
    For writes whose records depend on none of the block's (a decision's feedback and
    release: nothing reads their events meanwhile, neither announces,
    notifications.fanout)."""
    events: list[Event] = []
    kept: list[_Recorded] = []
    with inserts_held():  # and a move()'s UPDATE, held there (infra.db.together.update_held)
        token = _together.set((events, kept))
        try:
            yield
        finally:
            _together.reset(token)
        if events:
            events_write(events)
        deliveries_enqueue_many(kept)


# A breakpoint's feedback, oldest first (Feedback's order), as a write reads it.
_FEEDBACK_OF = Prepared(lambda pk: Feedback.objects.filter(breakpoint_id=pk), parameters=1)


def feedback_cached(bp: Breakpoint, feedback: list[Feedback] | None) -> None:
    """Have breakpoint_json(bp) read `feedback` as its feedback, no query (Django's prefetch
    cache, as prefetch_related fills it), while a write records it; None drops it again, so
    the instance a service returns reads its feedback afresh, as before."""
    cache = bp.__dict__.setdefault("_prefetched_objects_cache", {})
    if feedback is None:
        cache.pop("feedback", None)
        return
    queryset = Feedback.objects.all()  # not run: its rows are these
    queryset._result_cache = feedback
    queryset._prefetch_done = True  # type: ignore[attr-defined]  # as prefetch_related sets
    cache["feedback"] = queryset


def feedback_write_and_read(bp: Breakpoint, feedback: Feedback) -> Feedback:
    """Write bp's new `feedback` and read bp's feedback, this one included, into its cache
    (feedback_cached), in one statement (infra.db.together.insert_and_read): once for the
    outbox bodies of a write that adds to it."""
    feedback_cached(bp, insert_and_read([feedback], _FEEDBACK_OF, bp.pk))
    return feedback


# The row locked for a write, compiled once (infra.db.prepared): any breakpoint, or an agent's own.
_LOCKED = Prepared(lambda pk: Breakpoint.objects.select_for_update().filter(pk=pk), parameters=1)
_LOCKED_OF_AGENT = Prepared(
    lambda pk, agent_id: Breakpoint.objects.select_for_update().filter(pk=pk, agent_id=agent_id),
    parameters=2,
)


def lock(
    breakpoint_id: str, *, actor: Actor | None = None, and_configuration: bool = False
) -> Breakpoint:
    """Lock the row for this transaction; another agent's breakpoint is not found.
    `and_configuration`: the configuration is read in the same statement (a decision, whose
    outbox rows read the webhooks: policies.configuration.read_with)."""
    read: Prepared[Breakpoint] = _LOCKED
    values: tuple[Any, ...] = (breakpoint_id,)
    if actor is not None and actor.is_agent:
        read, values = _LOCKED_OF_AGENT, (breakpoint_id, actor.agent_id)
    if and_configuration:
        found = configuration.read_with(read, *values)
    else:
        found = read.instances(*values)
    if not found:
        raise NotFound("Breakpoint not found.")
    return found[0]


def _moved_meanwhile(breakpoint_id: str) -> NoReturn:
    current = Breakpoint.objects.values_list("status", flat=True).get(pk=breakpoint_id)
    raise InvalidState(f"Breakpoint is already {current}.", current_status=current)


def move(
    bp: Breakpoint,
    *,
    to: Status,
    actor: Actor,
    result: dict[str, Any],
    event_type: str,
    metadata: dict[str, Any] | None = None,
    also: dict[str, Any] | None = None,
    via: str | None = None,
    grant: dict[str, str] | None = None,
) -> Breakpoint:
    """Apply one allowed transition to a locked row and record it (`also`: more columns).

    The result is sealed (results.result_sealed): it carries the payloadDigest, the
    values approved (and whether they differ from the proposal) and a receipt naming
    `via`, where the decision came from (unset: the API, or `system`), and `grant`
    ({grantId, grantedBy}) when a grant approved it.
    """
    if to not in ALLOWED_TRANSITIONS[bp.status]:
        raise InvalidState(
            f"Breakpoint is already {bp.status}; it cannot become {to}.",
            current_status=bp.status,
        )
    now = timezone.now()
    result = result_sealed(
        result,
        breakpoint_id=bp.pk,
        agent_id=bp.agent_id,
        run_id=bp.run_id,
        status=to,
        via=via or (VIA_SYSTEM if is_system(actor) else Via.API),
        at=now,
        payload_digest=bp.payload_digest,
        proposal=(bp.payload or {}).get("proposal"),
        grant=grant,
    )
    changes = {"status": to, "result": result, "updated_at": now, _TIMESTAMP_FIELD[to]: now}
    changes.update(also or {})
    # Conditional UPDATE: correct even where SELECT ... FOR UPDATE is a no-op (SQLite).
    # Its statement built once per set of columns (infra.db.prepared); within
    # recorded_together(), sent with the block's events and outbox rows (a row locked
    # FOR UPDATE cannot have moved meanwhile, and if it had, the block would raise).
    update_held(
        Breakpoint,
        changes,
        where={"id": bp.pk, "status": bp.status},
        missed=partial(_moved_meanwhile, bp.pk),
    )
    announce([bp.pk])  # after the commit (breakpoints.wakeups)
    previous = bp.status
    for field, value in changes.items():
        setattr(bp, field, value)
    record(
        bp,
        type=event_type,
        actor=actor,
        metadata={"statusFrom": previous, "statusTo": to, **(metadata or {})},
    )
    return bp
