"""The process's open-file limit, and how many waiters it leaves room for.

Every waiting agent holds one socket. Past the open-file limit a web process cannot
accept a connection at all (EMFILE: every client is locked out, not only the one holding
the sockets), so the waiter caps are lowered to fit it: the limit less HEADROOM (the
database pool, the listener, Redis, log files and ordinary requests), and a token at most
half of what is left. A web process raises its soft limit to the hard one at start, and
says so in a warning when the limit still caps the waiters below BPM_MAX_WAITERS (in an
info line under DEBUG: a laptop's limit says nothing about production).
"""

import logging

try:
    import resource
except ImportError:  # not on POSIX: no limit to read
    resource = None  # type: ignore[assignment]

logger = logging.getLogger(__name__)

HEADROOM = 256
UNLIMITED = 1 << 30


def open_file_limit() -> int:
    """This process's soft limit on open files (UNLIMITED when there is none)."""
    if resource is None:
        return UNLIMITED
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return UNLIMITED if soft == resource.RLIM_INFINITY else soft


def waiter_caps(max_waiters: int, max_per_token: int, limit: int | None = None) -> tuple[int, int]:
    """(waiters per process, per token): the settings' caps, lowered to fit `limit` (this
    process's open-file limit unless given)."""
    room = max(1, (open_file_limit() if limit is None else limit) - HEADROOM)
    process = min(max_waiters, room)
    return process, min(max_per_token, max(1, process // 2))


def raise_open_file_limit(max_waiters: int, *, development: bool = False) -> int:
    """Raise the soft open-file limit to the hard one; warn when the limit still caps the
    waiters below `max_waiters` (only an info line in `development`). Returns the limit
    now in force."""
    if resource is not None:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard == resource.RLIM_INFINITY or soft < hard:
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            except (ValueError, OSError):  # a hard limit the kernel refuses as soft
                pass
    limit = open_file_limit()
    capped, _ = waiter_caps(max_waiters, max_waiters, limit)
    if capped < max_waiters:
        logger.log(
            logging.INFO if development else logging.WARNING,
            "The open-file limit (%d) leaves room for %d waiting agents in this process "
            "(BPM_MAX_WAITERS is %d); more are answered 503. Raise it: ulimit -n 65536, "
            "LimitNOFILE=65536 in a systemd unit, or BPM_NOFILE=65536 in compose's .env "
            "(where the host allows it).",
            limit,
            capped,
            max_waiters,
        )
    return limit
