"""Audit writes. Call inside the transaction of the change being recorded."""

from typing import Any

from audit.models import Event


def event_record(
    *, breakpoint_id: str, type: str, actor: str, metadata: dict[str, Any] | None = None
) -> Event:
    return Event.objects.create(
        breakpoint_id=breakpoint_id, type=type, actor=actor, metadata=metadata or {}
    )
