"""The synchronous steps of a status request, run on the bridge threads.

The same token verification, permission and scoping as the DRF views: an agent sees its
own breakpoints, reviewers and admins all, anyone else is refused.
"""

from typing import Any

from accounts.authentication import principal_for_token, verify_bearer
from breakpoints import services
from breakpoints.waiting.query import StatusQuery, is_possible_id, parse_status_query
from core.actors import AgentPrincipal, is_reviewer
from core.exceptions import Forbidden
from web.api.permissions import IsAgentOrReviewer

Rows = dict[str, dict[str, Any]]


def authenticate(raw_token: str, address: str) -> Any:
    """The caller of a Bearer token, if it may poll; raises 401/403/429 otherwise."""
    principal = principal_for_token(verify_bearer(raw_token, address))
    if not isinstance(principal, AgentPrincipal) and not is_reviewer(principal):
        raise Forbidden(IsAgentOrReviewer.message)
    return principal


def statuses(principal: Any, ids: tuple[str, ...]) -> Rows:
    """The visible ones among `ids`; impossible ids are not queried at all."""
    possible = [value for value in ids if is_possible_id(value)]
    return services.breakpoint_statuses_read(principal, possible) if possible else {}


def begin(
    raw_token: str, *, address: str, ids: list[str], wait: list[str], many: bool
) -> tuple[Any, StatusQuery, Rows | None]:
    """Authenticate, validate, and (for an answer without waiting) read: one thread hop.

    A request that will wait reads only after it has subscribed to wake-ups, so that no
    change can fall between its read and its wait.
    """
    principal = authenticate(raw_token, address)
    query = parse_status_query(ids=ids, wait=wait, many=many)
    rows = None if query.wait else statuses(principal, query.ids)
    return principal, query, rows
