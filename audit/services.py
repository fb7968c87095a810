"""Audit writes. Call inside the transaction of the change being recorded."""

from collections.abc import Mapping
from typing import Any

from audit.models import Event


def event_record(
    *, breakpoint_id: str, type: str, actor: str, metadata: dict[str, Any] | None = None
) -> Event:
    return Event.objects.create(
        breakpoint_id=breakpoint_id, type=type, actor=actor, metadata=metadata or {}
    )


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
