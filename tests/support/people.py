"""The people the tests act as, each defined once: a reviewer and an admin with an API
client (a personal bearer token), the console's reviewer and admin with a browser (a
session), a user without a role, and members of expert groups.

Registered for the whole suite by tests/conftest.py (`pytest_plugins`); a test or a
conftest that needs other people (their own names, settings or passwords) defines them
itself. Agents and `client_for` (an API client for any user) are in tests/conftest.py.
"""

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from rest_framework.test import APIClient

from core.actors import Actor
from tests.support.console import session_client
from tests.support.factories import AdminFactory, ReviewerFactory, UserFactory

# --- through the API ----------------------------------------------------------------------


@pytest.fixture
def reviewer(db):
    return ReviewerFactory(username="alice")


@pytest.fixture
def reviewer_client(reviewer, client_for) -> APIClient:
    return client_for(reviewer)


@pytest.fixture
def admin_user(db):
    return AdminFactory(username="root-admin")


@pytest.fixture
def admin_client(admin_user, client_for) -> APIClient:
    return client_for(admin_user)


@pytest.fixture
def admin(admin_user) -> Actor:
    """The admin as the services take her (actor=...)."""
    return Actor.for_user(admin_user)


@pytest.fixture
def nobody_client(client_for) -> APIClient:
    """A user with a personal token but no reviewer/admin role."""
    return client_for(UserFactory(username="nobody"))


@pytest.fixture
def expert_member(db):
    """A reviewer who is a member of the named expert groups: expert_member("tina", "tech-lead")."""

    def make(username: str, *groups: str):
        user = ReviewerFactory(username=username)
        for name in groups:
            user.groups.add(Group.objects.get_or_create(name=name)[0])
        return user

    return make


@pytest.fixture
def three_experts(expert_member) -> dict:
    """Groups tech-lead, ops-lead and security-lead, one reviewer member each."""
    return {
        "tech-lead": expert_member("tina", "tech-lead"),
        "ops-lead": expert_member("oscar", "ops-lead"),
        "security-lead": expert_member("sam", "security-lead"),
    }


# --- in the console -----------------------------------------------------------------------


@pytest.fixture
def console_reviewer(db):
    return ReviewerFactory(username="rita")


@pytest.fixture
def console_admin(db):
    return AdminFactory(username="adam")


@pytest.fixture
def reviewer_browser(console_reviewer) -> Client:
    """A logged-in reviewer (group reviewers, is_staff)."""
    return session_client(console_reviewer)


@pytest.fixture
def admin_browser(console_admin) -> Client:
    """A logged-in admin (groups reviewers and admins, is_staff)."""
    return session_client(console_admin)
