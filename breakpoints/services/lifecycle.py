"""The other ends of a breakpoint: cancelled by its agent or an admin, purged by retention.

Expiry (by hand, on read, by the TTL sweep) lives in services/expiry.py.
"""

import json
import logging
from datetime import timedelta
from functools import partial

from django.db import transaction
from django.utils import timezone

from audit.models import EventType
from breakpoints.answers.results import result_cancelled
from breakpoints.models import Breakpoint
from breakpoints.services.expiry import breakpoint_expire_if_due
from breakpoints.services.refusals import refusals_recorded
from breakpoints.services.transitions import lock, move
from breakpoints.wakeups import announce
from core.actors import Actor, require_admin
from core.choices import Status
from core.exceptions import InvalidInput
from core.timestamps import timestamp


def breakpoint_cancel(
    *, breakpoint_id: str, actor: Actor, reason: str = "", via: str | None = None
) -> Breakpoint:
    """Cancel a waiting breakpoint (its agent, or an admin). Cancelling twice is a no-op.
    `via`: where it was asked (its receipt names it; unset: the API). A refusal (not its
    agent nor an admin, already released or expired) is recorded (services.refusals)."""
    with refusals_recorded(breakpoint_id=breakpoint_id, actor=actor, via=via):
        if not actor.is_agent:
            require_admin(actor, "Only the breakpoint's agent or an admin can cancel it.")
        breakpoint_expire_if_due(breakpoint_id)  # past expiresAt: too late, even before the sweep
        with transaction.atomic():
            bp = lock(breakpoint_id, actor=actor)
            if bp.status == Status.CANCELLED:
                return bp
            return move(
                bp,
                to=Status.CANCELLED,
                actor=actor,
                result=result_cancelled(responder=actor.name, reason=reason),
                event_type=EventType.CANCELLED,
                metadata={"reason": reason},
                via=via,
            )


# --- retention -----------------------------------------------------------------

PURGE_BATCH_SIZE = 1000


def breakpoints_purge(*, older_than_days: int) -> int:
    """Delete finished breakpoints (with feedback, events, deliveries) older than the cutoff.

    Waiting breakpoints are never purged. Deletes in batches to keep transactions short.
    """
    if older_than_days < 0:
        raise InvalidInput("older_than_days must be 0 or more.")
    cutoff = timezone.now() - timedelta(days=older_than_days)
    finished = Breakpoint.objects.exclude(status=Status.WAITING).filter(updated_at__lt=cutoff)
    purged = 0
    while True:
        ids = list(finished.values_list("pk", flat=True)[:PURGE_BATCH_SIZE])
        if not ids:
            return purged
        with transaction.atomic():
            Breakpoint.objects.filter(pk__in=ids).delete()
        purged += len(ids)


# --- deletion by hand ------------------------------------------------------------------

# Where a deletion is recorded: the breakpoint's own audit events go with it.
audit_log = logging.getLogger("breakpoints.audit")


def breakpoint_delete(*, breakpoint_id: str, actor: Actor, reason: str = "") -> dict[str, int]:
    """Delete one breakpoint, with its feedback, events and deliveries: admins only.

    Its audit events cascade away with it, so the deletion is recorded where it survives:
    one WARNING line on the `breakpoints.audit` logger (a JSON line in production), once
    the deletion commits: which breakpoint (key, agent, run, status, created), who deleted
    it and why, and how many rows of each kind went with it. Returns those counts.
    """
    require_admin(actor, "Only admins can delete breakpoints.")
    with transaction.atomic():
        bp = lock(breakpoint_id)
        _, per_model = Breakpoint.objects.filter(pk=bp.pk).delete()
        announce([bp.pk])  # an agent waiting on it looks again, and finds it gone
        deleted = {label: count for label, count in per_model.items() if count}
        record = {
            "id": bp.pk,
            "key": bp.key,
            "agentId": bp.agent_id,
            "runId": bp.run_id,
            "status": bp.status,
            "createdAt": timestamp(bp.created_at),
            "deletedBy": actor.name,
            "reason": reason,
            "deleted": deleted,
        }
        transaction.on_commit(
            partial(
                audit_log.warning,
                "Breakpoint deleted: %s",
                json.dumps(record, ensure_ascii=False, sort_keys=True),
                extra={"breakpoint_id": bp.pk},
            )
        )
    return deleted
