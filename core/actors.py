"""Who acts: a person, an agent or the system. Services take an Actor, never a request."""

import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

from core.exceptions import Forbidden, SelfReview

REVIEWERS_GROUP = "reviewers"
ADMINS_GROUP = "admins"


@dataclass(frozen=True)
class Actor:
    """Who acts. `context` goes into the metadata of every audit event the actor causes
    (e.g. the external event a trigger rule acted on). `owner`: for an agent whose token
    has one, the person it acts for (the requester of every breakpoint it creates)."""

    name: str
    user: Any = None
    agent_id: str | None = None
    owner: str | None = None
    context: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)
    # How the channel that brought the actor knows them (a Slack user id, a JIRA email, a
    # trigger rule's name; None: `name`) and what it knows of the request (Slack's action,
    # an email link's userId, a JIRA issue): a refused decision is recorded with both.
    handle: str | None = None
    refusal_details: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @classmethod
    def for_user(cls, user: AbstractBaseUser | AnonymousUser) -> "Actor":
        return cls(name=user.get_username(), user=user)

    @classmethod
    def for_agent(cls, agent_id: str, owner: str | None = None) -> "Actor":
        return cls(name=f"agent:{agent_id}", agent_id=agent_id, owner=owner)

    @classmethod
    def system(cls, what: str) -> "Actor":
        return cls(name=f"system:{what}")

    @property
    def is_agent(self) -> bool:
        return self.agent_id is not None

    def known_as(self, handle: str | None = None, **refusal_details: Any) -> "Actor":
        """The same actor, as a channel knows them: its handle and details for a refusal."""
        return replace(self, handle=handle, refusal_details=refusal_details)


class AgentPrincipal(AnonymousUser):
    """request.user for a request made with an agent token (`owner`: the token's owner,
    the person its breakpoints are requested by unless they name another)."""

    def __init__(self, agent_id: str, owner: str | None = None):
        super().__init__()
        self.agent_id = agent_id
        self.owner = owner
        # The stub pins AnonymousUser.username to ""; a principal names its agent.
        self.username = f"agent:{agent_id}"  # type: ignore[assignment]

    @property
    def is_authenticated(self) -> bool:  # type: ignore[override]
        return True

    @property
    def is_anonymous(self) -> bool:  # type: ignore[override]
        return False

    def __str__(self) -> str:
        return self.username


def _group_names(user: Any) -> set[str]:
    cached = getattr(user, "_bpm_group_names", None)
    if cached is None:
        cached = set(user.groups.values_list("name", flat=True))
        user._bpm_group_names = cached
    return cached


def group_names(user: Any) -> set[str]:
    """The names of a person's groups (cached on the user object)."""
    return _group_names(user)


def forget_group_names(user: Any) -> None:
    """Drop the cached group names of `user` (after their groups changed)."""
    user.__dict__.pop("_bpm_group_names", None)


def is_superuser(user: Any) -> bool:
    """A signed-in person with Django's superuser flag (never an agent or anonymous)."""
    if user is None or isinstance(user, AgentPrincipal) or not user.is_authenticated:
        return False
    return bool(user.is_superuser)


def is_admin(user: Any) -> bool:
    if user is None or isinstance(user, AgentPrincipal) or not user.is_authenticated:
        return False
    return bool(user.is_superuser or ADMINS_GROUP in _group_names(user))


def is_reviewer(user: Any) -> bool:
    """Reviewers and admins may read every breakpoint, comment and release."""
    if user is None or isinstance(user, AgentPrincipal) or not user.is_authenticated:
        return False
    return is_admin(user) or REVIEWERS_GROUP in _group_names(user)


def actor_for_request_user(user: Any) -> Actor:
    if isinstance(user, AgentPrincipal):
        return Actor.for_agent(user.agent_id, owner=user.owner)
    return Actor.for_user(user)


def is_system(actor: Actor) -> bool:
    """The system itself (a sweep, a management command): neither a person nor an agent."""
    return actor.user is None and not actor.is_agent


def require_admin(actor: Actor, refusal: str, *, or_system: bool = False) -> None:
    """The one admin check: raise Forbidden(refusal) unless the actor is a person with the
    admin role or, with `or_system`, the system itself (sweeps, management commands).
    `refusal` names the action: "Only admins can delete breakpoints."."""
    if or_system and is_system(actor):
        return
    if not is_admin(actor.user):
        raise Forbidden(refusal)


FEEDBACK_REFUSAL = "Only reviewers and admins can give feedback."


def require_reviewer(actor: Actor) -> None:
    """Only reviewers and admins give feedback: every channel's decision passes here."""
    if not is_reviewer(actor.user):
        raise Forbidden(FEEDBACK_REFUSAL)


SELF_REVIEW_REFUSAL = (
    "You requested this breakpoint ({requester}): another reviewer must decide it "
    "(self-review is not allowed here)."
)


def name_key(name: str) -> str:
    """How a person's name (a username or an email) is compared: NFKC-normalised (a
    full-width "ａｌｉｃｅ" is "alice"), stripped and case-folded."""
    return unicodedata.normalize("NFKC", name).strip().casefold()


def is_requester(user: Any, requested_by: str | None) -> bool:
    """Whether the person `user` is the one a breakpoint names in requestedBy: by username
    or email, compared by name_key. Nobody is the requester of a breakpoint naming none."""
    wanted = name_key(requested_by or "")
    if not wanted or user is None or isinstance(user, AgentPrincipal):
        return False
    if not getattr(user, "is_authenticated", False):
        return False
    names = {user.get_username(), getattr(user, "email", "") or ""}
    return wanted in {name_key(name) for name in names if name}


def require_not_requester(
    actor: Actor,
    requested_by: str | None,
    *,
    prevent: bool,
    names_person: Callable[[Any, str | None], bool] = is_requester,
) -> None:
    """Four eyes: with `prevent` (the breakpoint's or the service's preventSelfReview), the
    person it was requested by may not decide it, whatever their role (admins included:
    there is no silent bypass). Raises SelfReview. `names_person(user, requested_by)`: whether
    the name is the person's; the breakpoint services pass accounts.people.is_person_named
    (every account of the person, not only this one: a person is not an account)."""
    if prevent and names_person(actor.user, requested_by):
        raise SelfReview(
            SELF_REVIEW_REFUSAL.format(requester=requested_by),
            {"requestedBy": requested_by, "rule": "preventSelfReview"},
        )
