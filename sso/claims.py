"""What an identity provider says about a person, from the ID token's claims and userinfo,
and what follows from it here: the role its groups give, the expert groups they mirror,
the username a new account gets."""

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from accounts.people import Role
from core.limits import MAX_EMAIL_LENGTH
from sso.config import OidcConfig

USERNAME_LENGTH = 150  # Django's User.username
NAME_LENGTH = 150  # first_name, last_name
SUBJECT_LENGTH = 255
MAX_GROUPS = 1000  # more than any person belongs to: the rest is ignored
NOT_IN_USERNAMES = re.compile(r"[^\w.@+-]")


class ClaimsRefused(Exception):
    """The claims cannot identify a person (no subject); the message says why."""


@dataclass(frozen=True)
class IdpPerson:
    """A person as the identity provider describes them. `groups` is None when neither the
    ID token nor userinfo carried the groups claim (nothing known, not "no groups").
    `email`: the address kept on their account ("" when the provider says it is not
    verified); `email_claimed`: the address as claimed, verified or not;
    `email_verified`: whether the provider says it is (email_verified: true), the one way a
    first sign-in is linked to an existing account of that address (sso.services)."""

    subject: str
    preferred_username: str
    email: str
    first_name: str
    last_name: str
    groups: tuple[str, ...] | None
    email_claimed: str = ""
    email_verified: bool = False

    @property
    def group_list(self) -> list[str]:
        return list(self.groups or ())

    def handle(self) -> str:
        """How the audit trail names someone who has no account here."""
        return f"sub:{self.subject}"


def claim(claims: Mapping[str, Any], name: str) -> Any:
    """A claim by name, or by a dotted path into nested claims (Keycloak's
    realm_access.roles) when no claim has the whole name (Auth0's namespaced URLs)."""
    if name in claims:
        return claims[name]
    value: Any = claims
    for part in name.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def groups_in(value: Any) -> tuple[str, ...] | None:
    """A groups claim as names: a list of strings, or one string; None when absent."""
    if value is None:
        return None
    items = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    names = dict.fromkeys(item.strip() for item in items if isinstance(item, str) and item.strip())
    return tuple(list(names)[:MAX_GROUPS])


def person_from_claims(
    id_token: Mapping[str, Any], userinfo: Mapping[str, Any], groups_claim: str
) -> IdpPerson:
    """The person: the ID token's claims, completed by userinfo's (only when userinfo
    speaks of the same subject, as OpenID Connect Core 5.3.2 requires). Groups come from
    the ID token when it carries the claim, else from userinfo."""
    subject = id_token.get("sub")
    if not isinstance(subject, str) or not subject or len(subject) > SUBJECT_LENGTH:
        raise ClaimsRefused("the ID token names no usable subject (sub)")
    if userinfo.get("sub") != subject:
        userinfo = {}
    merged = {**userinfo, **id_token}
    groups = groups_in(claim(id_token, groups_claim))
    if groups is None:
        groups = groups_in(claim(userinfo, groups_claim))
    first, last = _names(merged)
    return IdpPerson(
        subject=subject,
        preferred_username=_text(merged.get("preferred_username"), USERNAME_LENGTH * 2),
        email=_email(merged),
        first_name=first,
        last_name=last,
        groups=groups,
        email_claimed=_claimed_email(merged),
        email_verified=merged.get("email_verified") is True and bool(_email(merged)),
    )


def _text(value: Any, limit: int) -> str:
    return value.strip()[:limit] if isinstance(value, str) else ""


def _claimed_email(claims: Mapping[str, Any]) -> str:
    """The email address claimed, verified or not ("" when it is no usable address)."""
    email = _text(claims.get("email"), MAX_EMAIL_LENGTH + 1)
    return email if "@" in email and len(email) <= MAX_EMAIL_LENGTH else ""


def _email(claims: Mapping[str, Any]) -> str:
    """The email address, unless the provider says it is not verified (Slack and JIRA find
    people by it: an unverified address could point them at the wrong person)."""
    return "" if claims.get("email_verified") is False else _claimed_email(claims)


def _names(claims: Mapping[str, Any]) -> tuple[str, str]:
    first = _text(claims.get("given_name"), NAME_LENGTH)
    last = _text(claims.get("family_name"), NAME_LENGTH)
    if first or last:
        return first, last
    full = _text(claims.get("name"), NAME_LENGTH * 2)
    given, _, family = full.rpartition(" ") if " " in full else (full, "", "")
    return given[:NAME_LENGTH], family[:NAME_LENGTH]


def role_for_groups(groups: tuple[str, ...] | None, config: OidcConfig) -> Role:
    """Admin when in an admin group, reviewer when in a reviewer group, else none."""
    names = set(groups or ())
    if names & config.admin_groups:
        return Role.ADMIN
    if names & config.reviewer_groups:
        return Role.REVIEWER
    return Role.NONE


def expert_groups_for(groups: tuple[str, ...] | None, config: OidcConfig) -> set[str]:
    """The person's groups that are mirrored as expert groups (BPM_OIDC_EXPERT_GROUPS)."""
    names = set(groups or ())
    return names if config.expert_groups is None else names & config.expert_groups


def username_base(person: IdpPerson) -> str:
    """preferred_username, else the email's local part, in the characters Django allows in
    a username (others become "-"); "user" when nothing is left."""
    wanted = person.preferred_username or person.email.partition("@")[0]
    cleaned = NOT_IN_USERNAMES.sub("-", wanted).strip("-.")
    return cleaned[: USERNAME_LENGTH - 8] or "user"
