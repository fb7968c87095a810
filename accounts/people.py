"""Reviewer and admin accounts: the groups that carry the roles, their permissions, people.

Reviewers may view breakpoints, feedback and audit events (the console's queue and
review screens) and change nothing directly. Admins get every permission on the
project's models, and may view, add and change users, but not groups or raw
permissions: only superusers grant superuser, staff, group membership or permissions.
The console's ModelAdmins check the roles themselves; these grants keep Django's own
checks (user.has_perm, stock User/Group admin) in agreement.

People: an admin gives people a product role (reviewer or none) and expert groups, and
manages only people who hold no more than a reviewer does (never a superuser, another
admin, or someone with permissions granted by hand). The rule lives here, in
`people_manageable_by`; the console's people screen (accounts/admin/people.py) and
the services below both apply it.

An identity provider's groups set the roles and expert groups of the people who sign in
through it (`person_groups_follow`, called by sso/ at each sign-in and re-check).
"""

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser, Group, Permission
from django.db import models, transaction
from django.db.models import Q, QuerySet

from core.actors import (
    ADMINS_GROUP,
    REVIEWERS_GROUP,
    Actor,
    forget_group_names,
    is_admin,
    is_superuser,
    name_key,
)
from core.exceptions import Forbidden, InvalidInput
from core.limits import MAX_EMAIL_LENGTH, MAX_GROUP_NAME_LENGTH

ROLE_GROUPS = (REVIEWERS_GROUP, ADMINS_GROUP)


# Legacy data: new accounts may not share an address (account_names_problem), older ones may.
TWINS_REFUSAL = (
    "more than one active user has this email address (one person, several accounts: an "
    "admin deactivates all but one of them, or gives each its own address)"
)


class NoSinglePerson(Exception):
    """No one active person has this email address; the message says why."""


def person_with_email(email: str) -> Any:
    """The one active person whose email is `email` (compared without case, surrounding
    spaces ignored): the person behind a Slack or JIRA user. Raises NoSinglePerson saying
    why not: no usable address, nobody, or more than one (an email is no identity then)."""
    email = email.strip()
    if not email or len(email) > MAX_EMAIL_LENGTH or "@" not in email:
        raise NoSinglePerson("no usable email address")
    users = list(get_user_model().objects.filter(email__iexact=email, is_active=True)[:2])
    if not users:
        raise NoSinglePerson("no active user has this email address")
    if len(users) > 1:
        raise NoSinglePerson(TWINS_REFUSAL)
    return users[0]


def accounts_named(username: str) -> QuerySet:
    """The accounts whose username is `username` without case (as core.actors.name_key
    compares people: `ALICE` is alice). A new account may not take such a name."""
    key = name_key(username)
    if not key:
        return get_user_model()._default_manager.none()
    query = Q(username__iexact=username.strip()) | Q(username__iexact=key)
    return get_user_model()._default_manager.filter(query)


def accounts_with_email(email: str) -> QuerySet:
    """The accounts (active or not) whose email is `email` without case. A new account may
    not take an address another account has: Slack and JIRA find a person by it."""
    key = name_key(email)
    if not key:
        return get_user_model()._default_manager.none()
    query = Q(email__iexact=email.strip()) | Q(email__iexact=key)
    return get_user_model()._default_manager.filter(query)


def account_names_problem(*, username: str, email: str, exclude_pk: Any = None) -> dict[str, str]:
    """Why an account may not be made (or changed) with this username and email: another
    account has the username or the email without case ({"username": why, "email": why};
    empty when neither). One person, one account: a case twin or a second account of an
    address would be another account of the same person, from which they could approve
    their own breakpoint where self-review is refused."""
    problems: dict[str, str] = {}
    named = accounts_named(username).exclude(pk=exclude_pk).values_list("username", flat=True)
    if other := named.first():
        problems["username"] = (
            f"An account named {other!r} exists already (usernames are compared without case)."
        )
    if email.strip():
        shared = (
            accounts_with_email(email).exclude(pk=exclude_pk).values_list("username", flat=True)
        )
        if other := shared.first():
            problems["email"] = (
                f"The account {other!r} has this email address already (compared without "
                "case): one person, one account."
            )
    return problems


# How many rounds `person_accounts` follows shared names: each round adds the accounts that
# share a username or an email with those found; real data settles in one or two.
_PERSON_ROUNDS = 8


def _names_query(usernames: set[str], emails: set[str]) -> Q:
    """Accounts whose username is one of `usernames` or whose email is one of `emails`,
    without case (each name as given and as core.actors.name_key spells it)."""
    query = Q(pk__in=[])
    for name in usernames:
        query |= Q(username__iexact=name) | Q(username__iexact=name_key(name))
    for email in emails:
        query |= Q(email__iexact=email) | Q(email__iexact=name_key(email))
    return query


def _person_rows(usernames: set[str], emails: set[str]) -> list[tuple[str, str]]:
    """(username, email) of every account that is the same person as an account named by
    `usernames` or `emails`: shared names followed until no new account joins."""
    User = get_user_model()
    usernames = {name for name in usernames if name_key(name)}
    emails = {email for email in emails if name_key(email)}
    rows: set[tuple[str, str]] = set()
    for _ in range(_PERSON_ROUNDS):
        found = set(
            User.objects.filter(_names_query(usernames, emails)).values_list("username", "email")
        )
        if found <= rows:
            break
        rows |= found
        usernames |= {username for username, _ in found}
        emails |= {email for _, email in found if email and name_key(email)}
    return sorted(rows)


def _accounts_of(user: Any) -> list[tuple[str, str]]:
    """(username, email) of every account of the person `user` is (none for an agent,
    anonymous or None: an account is a saved user)."""
    if (
        user is None
        or not getattr(user, "is_authenticated", False)
        or not getattr(user, "pk", None)
    ):
        return []
    email = getattr(user, "email", "") or ""
    return _person_rows({user.get_username()}, {email} if email else set())


def person_usernames(user: Any) -> set[str]:
    """The usernames of every account that is the same person as `user` (a person with an
    account; an agent, anonymous or None: the empty set): the account itself, and any
    account that shares a username or an email with it, compared by core.actors.name_key
    (`ALICE` beside `alice`, two accounts of alice@example.com), followed from account to
    account. An account's email is one an admin gave it or the identity provider did (never
    one it calls unverified: sso/ does not take it). An SSO subject is one account
    (sso.Identity: one per account and per issuer and subject), so the subject adds none.
    Four eyes asks it (`is_person_named`); a seat is filled once per person."""
    rows = _accounts_of(user)
    return {username for username, _ in rows} | ({user.get_username()} if rows else set())


def same_person(user: Any, other: Any) -> bool:
    """Whether the accounts `user` and `other` are one person (see person_usernames)."""
    if user is None or other is None or not getattr(other, "pk", None):
        return False
    return other.get_username() in person_usernames(user)


def person_namer(user: Any) -> Callable[[Any, str | None], bool]:
    """is_person_named for `user`, asked of many names (a batch's breakpoints): the
    person's accounts read once, when the first name needs them. Another user is asked
    as is_person_named asks."""
    rows: list[tuple[str, str]] | None = None

    def named(asked: Any, name: str | None) -> bool:
        nonlocal rows
        if asked is not user:
            return is_person_named(asked, name)
        wanted = name_key(name or "")
        if not wanted:
            return False
        if rows is None:
            rows = _accounts_of(user)
        return any(wanted in (name_key(username), name_key(mail or "")) for username, mail in rows)

    return named


def is_person_named(user: Any, name: str | None) -> bool:
    """Whether `name` (a breakpoint's requestedBy: a username or an email) names the person
    `user` is: the username or email of any account of theirs (person_usernames), or of
    any account that is the same person. Nobody is named by an empty name."""
    wanted = name_key(name or "")
    if not wanted:
        return False
    rows = _accounts_of(user)
    return any(wanted in (name_key(username), name_key(mail or "")) for username, mail in rows)


class Role(models.TextChoices):
    """A person's product role: which role groups they are in."""

    NONE = "none", "No role (no console access)"
    REVIEWER = "reviewer", "Reviewer"
    ADMIN = "admin", "Admin"


def reviewer_create(
    *,
    username: str,
    password: str,
    email: str = "",
    admin: bool = False,
    groups: list[str] | None = None,
    update: bool = False,
) -> AbstractBaseUser:
    """A staff user (so the console lets them in) in group `reviewers`, or `admins` too.

    `groups` adds expert groups (created if missing) that payload.expert can route to.
    With `update`, an existing user of that name is brought up to date instead of refused:
    the password, the email when one is given, the groups added (an admin stays an admin).
    A superuser's account is not touched this way (Django's own commands manage it).
    """
    User = get_user_model()
    username = username.strip()
    if not username:
        raise InvalidInput("username must not be empty.")
    expert_groups = [name.strip() for name in groups or [] if name.strip()]
    if any(len(name) > MAX_GROUP_NAME_LENGTH for name in expert_groups):
        raise InvalidInput(f"A group name has at most {MAX_GROUP_NAME_LENGTH} characters.")
    if {REVIEWERS_GROUP, ADMINS_GROUP} & set(expert_groups):
        raise InvalidInput("Roles are not expert groups: use --admin to make an admin.")
    existing = User.objects.filter(username=username).first()
    if existing is not None and not update:
        raise InvalidInput(f"A user named {username!r} already exists.")
    _require_names_free(existing, username=username, email=email)
    with transaction.atomic():
        if existing is None:
            user = User.objects.create_user(
                username=username, email=email, password=password, is_staff=True
            )
        else:
            user = _reviewer_refresh(existing, email=email, password=password)
        roles = [REVIEWERS_GROUP, ADMINS_GROUP] if admin else [REVIEWERS_GROUP]
        for name in [*roles, *expert_groups]:
            group, _ = Group.objects.get_or_create(name=name)
            user.groups.add(group)
    return user


def _require_names_free(existing: Any, *, username: str, email: str) -> None:
    """A new account's username and email, or an updated account's new email, must be no
    other account's (without case): InvalidInput naming the other account."""
    if existing is None:
        problems = account_names_problem(username=username, email=email)
    elif email and name_key(email) != name_key(existing.email or ""):
        problems = account_names_problem(username="", email=email, exclude_pk=existing.pk)
    else:
        return
    if problems:
        raise InvalidInput(" ".join(problems.values()), {k: [v] for k, v in problems.items()})


def _reviewer_refresh(user: Any, *, email: str, password: str) -> Any:
    if user.is_superuser:
        raise InvalidInput(f"{user.get_username()!r} is a superuser: not updated.")
    user.set_password(password)
    user.email = email or user.email
    user.is_staff = True
    user.save(update_fields=["password", "email", "is_staff"])
    return user


REVIEWER_PERMISSIONS = (
    ("breakpoints", "view_breakpoint"),
    ("breakpoints", "view_feedback"),
    ("audit", "view_event"),
)
# The project's apps with models: admins hold every permission on them (a new app joins here;
# tests/accounts/test_accounts.py fails until it does).
ADMIN_APPS = (
    "accounts",
    "audit",
    "policies",
    "notifications",
    "breakpoints",
    "channels",
    "triggers",
    "sso",
    "grants",
)
# Users, not groups or permissions: changing a group's permissions would be granting
# permissions. Deleting people is for superusers too (admins deactivate instead).
ADMIN_AUTH_PERMISSIONS = ("view_user", "add_user", "change_user", "view_group")


def role_groups_sync(**kwargs) -> None:
    """Create the role groups and grant their permissions; idempotent.

    Runs after every migrate (post_migrate), so a fresh database, a new model or a
    flushed test database all end up with the same grants.
    """
    reviewers, _ = Group.objects.get_or_create(name=REVIEWERS_GROUP)
    admins, _ = Group.objects.get_or_create(name=ADMINS_GROUP)
    for app_label, codename in REVIEWER_PERMISSIONS:
        reviewers.permissions.add(
            *Permission.objects.filter(content_type__app_label=app_label, codename=codename)
        )
    auth_permissions = Permission.objects.filter(content_type__app_label="auth")
    admins.permissions.add(
        *Permission.objects.filter(content_type__app_label__in=ADMIN_APPS),
        *auth_permissions.filter(codename__in=ADMIN_AUTH_PERMISSIONS),
    )
    # Earlier versions granted every user and group permission; take the rest back.
    admins.permissions.remove(*auth_permissions.exclude(codename__in=ADMIN_AUTH_PERMISSIONS))


def people_manageable_by(*, actor: Actor, queryset: QuerySet | None = None) -> QuerySet:
    """The people `actor` may edit: everyone for a superuser; for an admin, the people who
    hold no more than a reviewer (no superuser, no admin, no permission of their own or
    through a group other than `reviewers`); nobody for anyone else."""
    qs = get_user_model()._default_manager.all() if queryset is None else queryset
    user = actor.user
    if user is None or not is_admin(user):
        return qs.none()
    if is_superuser(user):
        return qs
    privileged_groups = Group.objects.filter(permissions__isnull=False).exclude(
        name=REVIEWERS_GROUP
    )
    return (
        qs.filter(is_superuser=False)
        .exclude(groups__name=ADMINS_GROUP)
        .exclude(groups__in=privileged_groups)
        .exclude(user_permissions__isnull=False)
    )


def expert_groups_assignable() -> QuerySet[Group]:
    """Groups an admin may put people in: not the role groups, and carrying no permission."""
    return Group.objects.exclude(name__in=ROLE_GROUPS).filter(permissions__isnull=True)


def person_role(user: Any) -> Role:
    names = set(user.groups.filter(name__in=ROLE_GROUPS).values_list("name", flat=True))
    if ADMINS_GROUP in names:
        return Role.ADMIN
    return Role.REVIEWER if REVIEWERS_GROUP in names else Role.NONE


def _check_may_manage(actor: Actor, user: Any) -> None:
    if not people_manageable_by(actor=actor).filter(pk=user.pk).exists():
        raise Forbidden("You may not change this person.")


def person_set_role(*, actor: Actor, user: Any, role: str) -> None:
    """Put `user` in exactly the role groups of `role`; staff (console access) with a role.

    Only a superuser makes an admin; admins manage reviewers and people without a role.
    """
    if role not in Role.values:
        raise InvalidInput(f"Unknown role {role!r}.", {"role": [f"Choose one of {Role.values}."]})
    _check_may_manage(actor, user)
    if role == Role.ADMIN and not is_superuser(actor.user):
        raise Forbidden("Only a superuser may make an admin.")
    with transaction.atomic():
        groups = {name: Group.objects.get_or_create(name=name)[0] for name in ROLE_GROUPS}
        user.groups.remove(*groups.values())
        if role in (Role.REVIEWER, Role.ADMIN):
            user.groups.add(groups[REVIEWERS_GROUP])
        if role == Role.ADMIN:
            user.groups.add(groups[ADMINS_GROUP])
        user.is_staff = role != Role.NONE or user.is_superuser
        user.save(update_fields=["is_staff"])
    forget_group_names(user)


def person_set_expert_groups(
    *, actor: Actor, user: Any, groups: Iterable[Group] = (), new_names: Iterable[str] = ()
) -> None:
    """Make `groups` (plus new groups named `new_names`) the expert groups of `user`.

    Expert groups are what payload.expert routes to; role groups and groups that carry
    permissions are not expert groups (an admin would be granting permissions).
    """
    _check_may_manage(actor, user)
    wanted = list(groups)
    names = [name.strip() for name in new_names if name.strip()]
    if any(len(name) > MAX_GROUP_NAME_LENGTH for name in names):
        raise InvalidInput(f"A group name has at most {MAX_GROUP_NAME_LENGTH} characters.")
    if set(ROLE_GROUPS) & set(names):
        raise InvalidInput("Roles are not expert groups: choose the role instead.")
    with transaction.atomic():
        wanted += [Group.objects.get_or_create(name=name)[0] for name in names]
        allowed = Group.objects.exclude(name__in=ROLE_GROUPS)
        if not is_superuser(actor.user):
            allowed = expert_groups_assignable()
        assignable = set(
            allowed.filter(pk__in=[group.pk for group in wanted]).values_list("pk", flat=True)
        )
        if any(group.pk not in assignable for group in wanted):
            raise Forbidden(
                "Only a superuser may add people to a role or a group with permissions."
            )
        user.groups.remove(*user.groups.exclude(name__in=ROLE_GROUPS))
        user.groups.add(*wanted)
    forget_group_names(user)


@dataclass(frozen=True)
class GroupChanges:
    """The groups a person joined and left (role groups and expert groups alike)."""

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.added or self.removed)


def role_group_names(role: str) -> set[str]:
    """The role groups a person of `role` is in."""
    if role == Role.ADMIN:
        return {REVIEWERS_GROUP, ADMINS_GROUP}
    return {REVIEWERS_GROUP} if role == Role.REVIEWER else set()


def person_groups_follow(
    *, user: Any, role: str, expert_groups: Iterable[str], mirrored: frozenset[str] | None
) -> GroupChanges:
    """Make `user`'s groups what an identity provider says: exactly the role groups of
    `role` (console access with a role, none without), and, among the mirrored expert
    groups (`mirrored`: those names; None: every expert group), exactly `expert_groups`
    (created if missing). No actor: the identity provider is the authority here.

    Expert groups are never role groups nor groups carrying permissions (mirroring such a
    name would grant permissions), nor names over the group name limit: those are
    ignored. Groups outside `mirrored` (given in the console) are left as they are.
    """
    if role not in Role.values:
        raise InvalidInput(f"Unknown role {role!r}.")
    names = {name for name in expert_groups if name and len(name) <= MAX_GROUP_NAME_LENGTH}
    names = {name for name in names if mirrored is None or name in mirrored} - set(ROLE_GROUPS)
    privileged = set(Group.objects.filter(permissions__isnull=False).values_list("name", flat=True))
    with transaction.atomic():
        current = set(user.groups.values_list("name", flat=True))
        managed = {
            name
            for name in current - set(ROLE_GROUPS) - privileged
            if mirrored is None or name in mirrored
        }
        wanted = role_group_names(role) | (names - privileged)
        added = sorted(wanted - current)
        removed = sorted(((current & set(ROLE_GROUPS)) | managed) - wanted)
        if added:
            user.groups.add(*[Group.objects.get_or_create(name=name)[0] for name in added])
        if removed:
            user.groups.remove(*Group.objects.filter(name__in=removed))
        is_staff = role != Role.NONE or user.is_superuser
        if user.is_staff != is_staff:
            user.is_staff = is_staff
            user.save(update_fields=["is_staff"])
    forget_group_names(user)
    return GroupChanges(added=tuple(added), removed=tuple(removed))
