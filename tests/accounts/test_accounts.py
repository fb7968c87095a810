"""Role groups and their permissions, kept in step after every migrate."""

import io
from pathlib import Path

import pytest
from django.apps import apps
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.core.management import CommandError, call_command

from accounts.experts import resolve
from accounts.people import ADMIN_APPS, NoSinglePerson, person_with_email, role_groups_sync
from tests.support.factories import AdminFactory, UserFactory


def test_after_migrate_reviewers_may_only_view(db):
    call_command("migrate", verbosity=0)
    codenames = set(
        Group.objects.get(name="reviewers").permissions.values_list("codename", flat=True)
    )
    assert codenames == {"view_breakpoint", "view_feedback", "view_event"}


def test_admins_get_every_project_permission_including_later_models(db):
    admin = AdminFactory()
    for perm in (
        "breakpoints.change_breakpoint",
        "notifications.add_webhook",
        "notifications.view_delivery",
        "policies.delete_autoapprovalrule",
        "audit.view_event",
        "triggers.add_triggerrule",
        "triggers.change_eventsource",
        "triggers.view_externalevent",
        "auth.change_user",
    ):
        assert admin.has_perm(perm), perm
    assert not admin.has_perm("sessions.delete_session")


def test_admin_apps_are_exactly_the_projects_apps_with_models():
    """A project app (a package at the top of this repository) that has models is one whose
    permissions admins hold; third-party and Django's own apps are not."""
    root = Path(settings.BASE_DIR).resolve()
    project = {
        config.label
        for config in apps.get_app_configs()
        if Path(config.path).resolve().parent == root and list(config.get_models())
    }

    assert set(ADMIN_APPS) == project


def test_sync_restores_grants_that_were_lost(db):
    reviewers = Group.objects.get(name="reviewers")
    reviewers.permissions.clear()
    Group.objects.filter(name="admins").delete()

    role_groups_sync()

    assert reviewers.permissions.filter(codename="view_breakpoint").exists()
    assert Group.objects.get(name="admins").permissions.filter(codename="add_webhook").exists()


def test_sync_takes_back_group_and_permission_grants_from_admins(db):
    """Admins manage users; changing groups or permissions would be granting them."""
    admins = Group.objects.get(name="admins")
    admins.permissions.add(*Permission.objects.filter(content_type__app_label="auth"))

    role_groups_sync()

    auth_codenames = set(
        admins.permissions.filter(content_type__app_label="auth").values_list("codename", flat=True)
    )
    assert auth_codenames == {"view_user", "add_user", "change_user", "view_group"}


def test_create_reviewer_joins_expert_groups_that_route_breakpoints(db, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("a-long-passphrase-42\n"))
    out = io.StringIO()
    call_command("create_reviewer", "tina", "--group", "tech-lead", "--group", "ops", stdout=out)

    tina = get_user_model().objects.get(username="tina")
    assert set(tina.groups.values_list("name", flat=True)) == {"reviewers", "tech-lead", "ops"}
    assert resolve(["tech-lead"])["tech-lead"].resolved
    assert "in tech-lead, ops" in out.getvalue()


def test_create_reviewer_refuses_a_role_as_expert_group(db, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("a-long-passphrase-42\n"))
    with pytest.raises(CommandError, match="use --admin"):
        call_command("create_reviewer", "mallory", "--group", "admins")
    assert not get_user_model().objects.filter(username="mallory").exists()


# --- the person behind a Slack or JIRA user: one active account with that email -------------


def test_the_person_with_an_email_is_the_one_active_account_with_it(db):
    alice = UserFactory(username="alice", email="Alice@Example.com")
    UserFactory(username="gone", email="gone@example.com", is_active=False)
    UserFactory(username="twin1", email="twin@example.com")
    UserFactory(username="twin2", email="TWIN@example.com")

    assert person_with_email("  alice@example.COM ") == alice  # case and spaces aside
    for email, why in [
        ("gone@example.com", "no active user has this email address"),
        ("nobody@example.com", "no active user has this email address"),
        ("twin@example.com", "more than one active user has this email address"),
        ("", "no usable email address"),
        ("alice", "no usable email address"),
        ("a@" + "b" * 253, "no usable email address"),
    ]:
        with pytest.raises(NoSinglePerson, match=why):
            person_with_email(email)
