"""Reads of grants: the pairs every create consults, a create's candidates, the lists."""

from datetime import datetime
from typing import Any

from django.db.models import Q, QuerySet
from django.utils import timezone

from core.actors import Actor, is_admin, require_reviewer
from core.exceptions import Forbidden, NotFound
from grants.models import Grant, GrantStatus
from infra.db.prepared import Prepared
from policies.configuration import Copied

# The (agent_id, key) of every grant that has not ended, as each create reads them: a
# process's copy, read again only after the configuration's generation moved (a grant
# created, revoked or ended moves it: grants' migrations, policies.configuration). A
# create whose pair is not in it costs no query for grants.
_LIVE_PAIRS: Copied[frozenset[tuple[str, str]]] = Copied(
    Prepared(lambda: Grant.objects.filter(ended_at=None).order_by().values_list("agent_id", "key")),
    frozenset,
)


def live_pair(agent_id: str, key: str) -> bool:
    """Whether a grant that has not ended exists for this agent and key."""
    return (agent_id, key) in _LIVE_PAIRS.get()


def grant_candidates(*, agent_id: str, key: str, now: datetime) -> list[Grant]:
    """The grants that may cover a breakpoint of this agent and key now, oldest first,
    with their granters (grant_live_pair)."""
    return list(
        Grant.objects.filter(agent_id=agent_id, key=key, ended_at=None)
        .filter(Q(expires_at=None) | Q(expires_at__gt=now))
        .filter(Q(uses_left=None) | Q(uses_left__gt=0))
        .select_related("granted_by_user")
        .order_by("created_at", "id")
    )


def is_granter(grant: Grant, user: Any) -> bool:
    return (
        user is not None
        and grant.granted_by_user_id is not None
        and (grant.granted_by_user_id == getattr(user, "pk", None))
    )


def live(now: datetime | None = None) -> Q:
    """A grant that still applies: not ended, uses left, before its expiry."""
    now = now or timezone.now()
    return (
        Q(ended_at=None)
        & (Q(uses_left=None) | Q(uses_left__gt=0))
        & (Q(expires_at=None) | Q(expires_at__gt=now))
    )


def grant_list(*, actor: Actor, status: str | None = None) -> QuerySet[Grant]:
    """The grants a person may read, newest first: a reviewer's own, every one for admins.
    `status`: live (still applying) or ended (revoked, used up or expired)."""
    require_reviewer(actor)
    grants = Grant.objects.all()
    if not is_admin(actor.user):
        grants = grants.filter(granted_by_user=actor.user)
    if status == GrantStatus.LIVE:
        grants = grants.filter(live())
    elif status == "ended":
        grants = grants.exclude(live())
    return grants.order_by("-created_at", "-id")


def grant_get(*, actor: Actor, grant_id: str) -> Grant:
    """One grant: its granter's or, for admins, any (another's: 403; unknown: 404)."""
    require_reviewer(actor)
    grant = Grant.objects.filter(pk=grant_id).first()
    if grant is None:
        raise NotFound(f"No grant {grant_id}.")
    if not is_granter(grant, actor.user) and not is_admin(actor.user):
        raise Forbidden("Only the reviewer who granted it, or an admin, may read it.")
    return grant
