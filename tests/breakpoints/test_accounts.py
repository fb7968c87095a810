"""Role groups and their permissions, kept in step after every migrate."""

from django.contrib.auth.models import Group
from django.core.management import call_command

from breakpoints.accounts import role_groups_sync
from tests.factories import AdminFactory


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
        "breakpoints.add_webhook",
        "breakpoints.view_webhookdelivery",
        "breakpoints.delete_autoapprovalrule",
        "audit.view_event",
        "auth.change_user",
    ):
        assert admin.has_perm(perm), perm
    assert not admin.has_perm("sessions.delete_session")


def test_sync_restores_grants_that_were_lost(db):
    reviewers = Group.objects.get(name="reviewers")
    reviewers.permissions.clear()
    Group.objects.filter(name="admins").delete()

    role_groups_sync()

    assert reviewers.permissions.filter(codename="view_breakpoint").exists()
    assert Group.objects.get(name="admins").permissions.filter(codename="add_webhook").exists()
