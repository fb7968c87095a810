"""Reviewer and admin accounts: the groups that carry the roles."""

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser, Group
from django.db import transaction

from breakpoints.actors import ADMINS_GROUP, REVIEWERS_GROUP
from config.errors import InvalidInput


def reviewer_create(
    *, username: str, password: str, email: str = "", admin: bool = False
) -> AbstractBaseUser:
    """A staff user (so the console lets them in) in group `reviewers`, or `admins` too."""
    User = get_user_model()
    username = username.strip()
    if not username:
        raise InvalidInput("username must not be empty.")
    if User.objects.filter(username=username).exists():
        raise InvalidInput(f"A user named {username!r} already exists.")
    with transaction.atomic():
        user = User.objects.create_user(
            username=username, email=email, password=password, is_staff=True
        )
        groups = [REVIEWERS_GROUP, ADMINS_GROUP] if admin else [REVIEWERS_GROUP]
        for name in groups:
            group, _ = Group.objects.get_or_create(name=name)
            user.groups.add(group)
    return user
