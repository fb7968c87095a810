"""Grants in tests: a reviewer's approval that gives one, and the payloads later
breakpoints send (a key of their own, a proposal to constrain)."""

from typing import Any

from breakpoints.models import Breakpoint
from breakpoints.services import breakpoint_create, feedback_add_granting
from core.actors import Actor
from grants.models import Grant

KEY = "deploy.api"


def payload(key: str = KEY, **more: Any) -> dict[str, Any]:
    return {"question": "Deploy?", "breakpointId": key, **more}


def proposing(key: str = KEY, **proposal: Any) -> dict[str, Any]:
    """A payload with a form and a proposal (what an MCP gateway's tool call sends)."""
    properties = {name: {} for name in proposal}
    return payload(key, form={"type": "object", "properties": properties}, proposal=proposal)


def create(agent_id: str = "agent-a", **fields: Any) -> Breakpoint:
    fields.setdefault("payload", payload())
    bp, _ = breakpoint_create(actor=Actor.for_agent(agent_id), **fields)
    return bp


def granted(user: Any, bp: Breakpoint, **grant: Any) -> Grant:
    """`user` approves `bp` with this grant (scope key unless told); the grant."""
    grant.setdefault("scope", "key")
    _, _, given = feedback_add_granting(
        breakpoint_id=bp.pk, actor=Actor.for_user(user), comment="Go", release=True, grant=grant
    )
    assert given is not None
    return given
