"""Wake-ups: a committed change to a breakpoint announces its id to the agents waiting on it.

`announce()` is called inside the transaction of the change, next to the audit event and
the outbox rows. On PostgreSQL, once that transaction has committed (never on a rollback),
it issues `NOTIFY` in a statement of its own, which every web process's listener hears,
this one's included. Not inside the transaction: PostgreSQL takes one lock for the whole
database while a transaction that notified commits, so those commits would wait for one
another's write to disk, one at a time (releases stalled behind each other's commits:
docs/benchmarks.md, the write paths); a statement that only notifies writes nothing to disk and
holds that lock for a moment. On the embedded SQLite default, which has no NOTIFY, it
wakes this process's own waiters after the commit; other processes' waiters there rely
on their re-check.

In a web process, whose listener holds a LISTEN connection on its event loop, the NOTIFY
goes out on that connection, from the loop (`sender_set`, breakpoints.waiting.listener):
the committing request answers without that round trip, and the NOTIFYs of commits made
while one is in flight go out together, in one statement. Elsewhere (a worker, a command,
a web process whose listener is reconnecting), the committing thread sends it.

The notification is only a hint to look again: the database row stays the truth. One
lost (the process ends between the commit and the NOTIFY, or the database is gone for
that moment) costs latency, never an answer: waiters re-check every
BPM_WAIT_RECHECK_SECONDS.
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
        transaction.on_commit(partial(_notify, ids), robust=True)
    elif _local_listeners:
        transaction.on_commit(partial(_wake_local, ids))


# Sends the NOTIFY of ids on another connection (this process's listener's); False when it
# cannot (then the committing thread sends it).
Sender = Callable[[list[str]], bool]
_sender: Sender | None = None


def sender_set(sender: Sender) -> None:
    """The listener offers to send this process's NOTIFYs (until sender_clear)."""
    global _sender
    _sender = sender


def sender_clear(sender: Sender) -> None:
    """The listener withdraws `sender` (if it is still the one set)."""
    global _sender
    if _sender == sender:  # a bound method: equal, not the same object, each time
        _sender = None


def _notify(ids: list[str]) -> None:
    """After the commit: have the listener send the NOTIFY, or send it here."""
    sender = _sender
    if sender is not None and sender(ids):
        return
    notify_now(ids)


def notify_now(ids: list[str]) -> None:
    """NOTIFY each id, in a statement of its own (its own implicit transaction). After a
    commit, a failure is logged (on_commit's robust) and the waiters' re-check covers it: the
    change itself has committed and is answered as such."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_notify(%s, changed) FROM unnest(%s::text[]) AS changed", [CHANNEL, ids]
        )


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
