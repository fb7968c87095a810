"""accounts.people.person_groups_follow: a person's groups as an identity provider says,
role groups and mirrored expert groups added and removed, nothing else touched."""

from django.contrib.auth.models import Group, Permission

from accounts.people import Role, person_groups_follow
from tests.support.factories import UserFactory


def names(user) -> set[str]:
    return set(user.groups.values_list("name", flat=True))


def test_roles_are_set_exactly_and_console_access_follows(db):
    user = UserFactory(is_staff=False)

    admin = person_groups_follow(user=user, role=Role.ADMIN, expert_groups=[], mirrored=None)
    assert names(user) == {"reviewers", "admins"} and user.is_staff
    assert admin.added == ("admins", "reviewers") and admin.removed == ()

    down = person_groups_follow(user=user, role=Role.REVIEWER, expert_groups=[], mirrored=None)
    assert names(user) == {"reviewers"} and down.removed == ("admins",)

    gone = person_groups_follow(user=user, role=Role.NONE, expert_groups=[], mirrored=None)
    assert names(user) == set() and not user.is_staff and gone.removed == ("reviewers",)
    assert not person_groups_follow(user=user, role=Role.NONE, expert_groups=[], mirrored=None)


def test_only_mirrored_expert_groups_are_added_and_removed(db):
    """Groups given in the console and not mirrored stay; mirrored ones follow the claim."""
    user = UserFactory(groups=["tech-lead", "dba"])
    changes = person_groups_follow(
        user=user,
        role=Role.REVIEWER,
        expert_groups=["sre", "sales"],
        mirrored=frozenset({"dba", "sre"}),
    )
    assert names(user) == {"reviewers", "tech-lead", "sre"}
    assert changes.added == ("reviewers", "sre") and changes.removed == ("dba",)
    assert not Group.objects.filter(name="sales").exists()


def test_mirroring_all_groups_makes_the_provider_the_source_of_every_expert_group(db):
    user = UserFactory(groups=["tech-lead"])
    person_groups_follow(user=user, role=Role.REVIEWER, expert_groups=["sre"], mirrored=None)
    assert names(user) == {"reviewers", "sre"}


def test_a_provider_group_never_grants_a_role_or_a_permission_by_its_name(db):
    """A group called "admins" or one carrying permissions is never mirrored."""
    privileged = Group.objects.create(name="auditors")
    privileged.permissions.add(Permission.objects.get(codename="view_event"))
    user = UserFactory(is_staff=False)
    person_groups_follow(
        user=user,
        role=Role.REVIEWER,
        expert_groups=["admins", "auditors", "x" * 151, "dba"],
        mirrored=None,
    )
    assert names(user) == {"reviewers", "dba"}


def test_a_person_given_a_privileged_group_in_the_console_keeps_it(db):
    privileged = Group.objects.create(name="auditors")
    privileged.permissions.add(Permission.objects.get(codename="view_event"))
    user = UserFactory(groups=["auditors"])
    person_groups_follow(user=user, role=Role.REVIEWER, expert_groups=[], mirrored=None)
    assert names(user) == {"reviewers", "auditors"}
