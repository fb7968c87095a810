"""Audit writes. Call inside the transaction of the change being recorded."""

from collections.abc import Iterable, Mapping
from typing import Any

from audit.models import AccessEvent, Event, EventType, GrantEvent, RuleEvent
from infra.db.prepared import insert


def event_record(
    *, breakpoint_id: str, type: str, actor: str, metadata: dict[str, Any] | None = None
) -> Event:
    event = event_new(breakpoint_id=breakpoint_id, type=type, actor=actor, metadata=metadata)
    return events_write([event])[0]


def event_new(
    *, breakpoint_id: str, type: str, actor: str, metadata: dict[str, Any] | None = None
) -> Event:
    """An event not written yet: events_write writes several in one INSERT."""
    return Event(breakpoint_id=breakpoint_id, type=type, actor=actor, metadata=metadata or {})


def events_write(events: list[Event]) -> list[Event]:
    """Write new events, in order, in one INSERT (every write records one or two: the
    statement is built once, infra.db.prepared)."""
    return list(insert(events))


def event_record_bulk(
    *, type: str, actor: str, metadata_by_breakpoint: Mapping[str, dict[str, Any]]
) -> list[Event]:
    """The same events as event_record, one per breakpoint, in one INSERT (batched writes)."""
    return Event.objects.bulk_create(
        [
            Event(breakpoint_id=breakpoint_id, type=type, actor=actor, metadata=metadata)
            for breakpoint_id, metadata in metadata_by_breakpoint.items()
        ]
    )


def refusal_record(
    *, breakpoint_id: str, via: str, who: str, reason: str, message: str, **details: Any
) -> Event:
    """A decision from a channel that was refused: one REFUSED event, one shape for every
    channel. Actor `<via>:<who>`; metadata {"via", "reason": a code (the domain error's
    code, e.g. permission_denied, or the channel's own: used, expired, user_not_matched),
    "message": what the person was told, **details (the channel's own context)}."""
    return event_record(
        breakpoint_id=breakpoint_id,
        type=EventType.REFUSED,
        actor=f"{via}:{who}",
        metadata={"via": via, "reason": reason, "message": message, **details},
    )


def access_event_record(
    *,
    type: str,
    actor: str,
    via: str,
    subject: str = "",
    groups: Iterable[str] = (),
    **metadata: Any,
) -> AccessEvent:
    """A sign-in, a refusal, a role change or a session's end (AccessEventType): `actor` the
    username (or `sub:<subject>`), `via` "oidc" or "password", `groups` the identity
    provider's groups, `metadata` the rest (reason, message, role, added, removed)."""
    return AccessEvent.objects.create(
        type=type,
        actor=actor[:200],
        via=via,
        subject=subject[:255],
        groups=list(groups),
        metadata=metadata,
    )


def rule_event_record(
    *, type: str, rule_id: str, pattern: str, actor: str, **metadata: Any
) -> RuleEvent:
    """A change to an auto-approval rule (RuleEventType): the rule's id and pattern as they
    were, `actor` the admin's name (or `system:<what>`), `metadata` the rest (e.g. the mode
    before and after)."""
    return RuleEvent.objects.create(
        type=type, rule_id=rule_id, pattern=pattern, actor=actor[:200], metadata=metadata
    )


def grant_event_record(
    *,
    type: str,
    grant_id: str,
    agent_id: str,
    key: str,
    actor: str,
    breakpoint_id: str = "",
    **metadata: Any,
) -> GrantEvent:
    """A grant's event (GrantEventType): the grant's id, agent and key as they were,
    `actor` who caused it (the granter, the revoker, `system:<what>`), `breakpoint_id` the
    breakpoint it was granted on or approved, `metadata` the rest."""
    return GrantEvent.objects.create(
        type=type,
        grant_id=grant_id,
        agent_id=agent_id,
        key=key,
        breakpoint_id=breakpoint_id,
        actor=actor[:200],
        metadata=metadata,
    )
