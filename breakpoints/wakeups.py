"""Wake-ups: a committed change to a breakpoint announces its id to the agents waiting on it.

`announce()` is called inside the transaction of the change, next to the audit event and
the outbox rows. On PostgreSQL it issues `NOTIFY` in that same transaction, so every
web process's listener hears of it exactly when it commits, and never on a rollback. On
every database it also wakes this process's own waiters after the commit (the embedded
SQLite default has no NOTIFY; other processes' waiters there rely on their re-check).

The notification is only a hint to look again: the database row stays the truth.
"""

from collections.abc import Callable, Iterable
from functools import partial

from django.db import connection, transaction

CHANNEL = "bpm_breakpoints"

LocalListener = Callable[[list[str]], None]
_local_listeners: list[LocalListener] = []


def announce(breakpoint_ids: Iterable[str]) -> None:
    """Announce changed breakpoints when the current transaction commits."""
    ids = list(dict.fromkeys(breakpoint_ids))
    if not ids:
        return
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_notify(%s, changed) FROM unnest(%s::text[]) AS changed", [CHANNEL, ids]
            )
    elif _local_listeners:
        transaction.on_commit(partial(_wake_local, ids))


def update_channel() -> str | None:
    """The channel on which a transition's conditional UPDATE announces the row it moved,
    in the same statement (core.prepared.update_where(notify=...)): on PostgreSQL; None
    elsewhere, where the caller announces() instead."""
    return CHANNEL if connection.vendor == "postgresql" else None


def _wake_local(ids: list[str]) -> None:
    for listener in list(_local_listeners):
        listener(ids)


def add_local_listener(listener: LocalListener) -> None:
    """Hear this process's own announcements after commit (the waiting hub, without NOTIFY)."""
    if listener not in _local_listeners:
        _local_listeners.append(listener)


def remove_local_listener(listener: LocalListener) -> None:
    if listener in _local_listeners:
        _local_listeners.remove(listener)
