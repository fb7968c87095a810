"""Reviewer and admin accounts: the groups that carry the roles, and their permissions.

Reviewers may view breakpoints, feedback and audit events (the console's queue and
review screens) and change nothing directly. Admins get every permission on the
project's models and on users and groups. The console's ModelAdmins check the roles
themselves; these grants keep Django's own checks (user.has_perm, stock User/Group
admin) in agreement.
"""

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser, Group, Permission
from django.db import transaction

from breakpoints.actors import ADMINS_GROUP, REVIEWERS_GROUP
from config.errors import InvalidInput


def reviewer_create(
    *,
    username: str,
    password: str,
    email: str = "",
    admin: bool = False,
    groups: list[str] | None = None,
) -> AbstractBaseUser:
    """A staff user (so the console lets them in) in group `reviewers`, or `admins` too.

    `groups` adds expert groups (created if missing) that payload.expert can route to.
    """
    User = get_user_model()
    username = username.strip()
    if not username:
        raise InvalidInput("username must not be empty.")
    expert_groups = [name.strip() for name in groups or [] if name.strip()]
    if any(len(name) > 150 for name in expert_groups):
        raise InvalidInput("A group name has at most 150 characters.")
    if {REVIEWERS_GROUP, ADMINS_GROUP} & set(expert_groups):
        raise InvalidInput("Roles are not expert groups: use --admin to make an admin.")
    if User.objects.filter(username=username).exists():
        raise InvalidInput(f"A user named {username!r} already exists.")
    with transaction.atomic():
        user = User.objects.create_user(
            username=username, email=email, password=password, is_staff=True
        )
        roles = [REVIEWERS_GROUP, ADMINS_GROUP] if admin else [REVIEWERS_GROUP]
        for name in [*roles, *expert_groups]:
            group, _ = Group.objects.get_or_create(name=name)
            user.groups.add(group)
    return user


REVIEWER_PERMISSIONS = (
    ("breakpoints", "view_breakpoint"),
    ("reviews", "view_feedback"),
    ("audit", "view_event"),
)
ADMIN_APPS = ("breakpoints", "reviews", "audit")
ADMIN_AUTH_MODELS = ("user", "group")


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
    admins.permissions.add(
        *Permission.objects.filter(content_type__app_label__in=ADMIN_APPS),
        *Permission.objects.filter(
            content_type__app_label="auth", content_type__model__in=ADMIN_AUTH_MODELS
        ),
    )
