"""People in the console: admins give product roles; only superusers grant power."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from accounts.people import person_set_role
from core.actors import Actor
from core.exceptions import Forbidden
from tests.support.console import session_client
from tests.support.factories import AdminFactory, ReviewerFactory, UserFactory

User = get_user_model()


def change_url(user) -> str:
    return reverse("admin:auth_user_change", args=[user.pk])


def password_url(user) -> str:
    return reverse("admin:auth_user_password_change", args=[user.pk])


def group_names(user) -> set[str]:
    return set(User.objects.get(pk=user.pk).groups.values_list("name", flat=True))


def stock_form_post(user, **overrides) -> dict:
    """What the stock user change form posts for `user`, plus the person form's fields.

    Complete for both forms, so a refused grant is refused for what it is, not because
    the form was invalid.
    """
    data = {
        "username": user.username,
        "first_name": user.first_name,
        "last_name": user.last_name,
        "email": user.email,
        "is_active": "on",
        "date_joined_0": user.date_joined.strftime("%Y-%m-%d"),
        "date_joined_1": user.date_joined.strftime("%H:%M:%S"),
        "role": "reviewer",
        "groups": [str(pk) for pk in user.groups.values_list("pk", flat=True)],
    }
    if user.is_staff:
        data["is_staff"] = "on"
    data.update(overrides)
    return data


def admins_group() -> Group:
    return Group.objects.get(name="admins")


def reviewers_group() -> Group:
    return Group.objects.get(name="reviewers")


def grants(kind: str) -> dict:
    """Crafted fields that would raise a person above reviewer on the stock form."""
    if kind == "superuser":
        return {"is_superuser": "on"}
    if kind == "admins group":
        return {
            "is_staff": "on",
            "groups": [str(reviewers_group().pk), str(admins_group().pk)],
            "expert_groups": [str(admins_group().pk)],
        }
    permission = Permission.objects.get(codename="delete_session")
    return {"user_permissions": [str(permission.pk)]}


def assert_no_more_than_a_reviewer(user) -> None:
    user = User.objects.get(pk=user.pk)
    assert not user.is_superuser
    assert "admins" not in group_names(user)
    assert not user.user_permissions.exists()
    assert not user.has_perm("sessions.delete_session")
    assert not user.has_perm("accounts.add_apitoken")


@pytest.mark.parametrize("kind", ["superuser", "admins group", "permission"])
def test_admin_cannot_raise_a_reviewer_by_a_crafted_post(admin_browser, kind):
    """is_superuser, the admins group or a raw permission posted by an admin never lands."""
    rita = ReviewerFactory(username="rita-r")
    response = admin_browser.post(change_url(rita), stock_form_post(rita, **grants(kind)))
    assert response.status_code in (200, 302, 403, 404)
    assert_no_more_than_a_reviewer(rita)
    assert group_names(rita) == {"reviewers"}


@pytest.mark.parametrize("kind", ["superuser", "permission"])
def test_admin_cannot_raise_themself_by_a_crafted_post(admin_browser, console_admin, kind):
    response = admin_browser.post(
        change_url(console_admin), stock_form_post(console_admin, **grants(kind))
    )
    assert response.status_code == 404
    adam = User.objects.get(pk=console_admin.pk)
    assert not adam.is_superuser
    assert not adam.user_permissions.exists()


@pytest.mark.parametrize("who", ["superuser", "other admin", "self"])
def test_admin_cannot_open_or_edit_a_superuser_or_an_admin(admin_browser, console_admin, who):
    target = {
        "superuser": lambda: UserFactory(username="root", is_superuser=True),
        "other admin": lambda: AdminFactory(username="ada"),
        "self": lambda: console_admin,
    }[who]()
    before = set(group_names(target))
    assert admin_browser.get(change_url(target)).status_code == 404
    assert admin_browser.get(password_url(target)).status_code == 404
    response = admin_browser.post(
        change_url(target), stock_form_post(target, is_active="", role="none", groups=[])
    )
    assert response.status_code == 404
    response = admin_browser.post(
        password_url(target),
        {
            "password1": "Hijacked-pass-123",
            "password2": "Hijacked-pass-123",
            "usable_password": "true",
        },
    )
    assert response.status_code == 404
    target = User.objects.get(pk=target.pk)
    assert target.is_active
    assert group_names(target) == before
    assert not target.check_password("Hijacked-pass-123")
    listing = admin_browser.get("/admin/auth/user/").content.decode()
    assert change_url(target) not in listing


def test_admin_cannot_edit_someone_a_superuser_gave_permissions(admin_browser):
    """Permissions granted by hand make a person the superusers' to manage."""
    special = ReviewerFactory(username="special")
    special.user_permissions.add(Permission.objects.get(codename="delete_session"))
    assert admin_browser.get(change_url(special)).status_code == 404
    admin_browser.post(change_url(special), stock_form_post(special, role="none"))
    assert group_names(special) == {"reviewers"}


def test_admin_form_offers_roles_not_flags_groups_or_permissions(admin_browser):
    rita = ReviewerFactory(username="rita-r")
    Group.objects.create(name="tech-lead")
    html = admin_browser.get(change_url(rita)).content.decode()
    for field in ("is_superuser", "is_staff", "user_permissions"):
        assert f'name="{field}"' not in html, field
    assert 'name="groups"' not in html
    assert 'name="role"' in html
    assert 'value="reviewer"' in html
    assert 'value="admin"' not in html
    assert "tech-lead" in html
    assert f'value="{admins_group().pk}"' not in html
    assert "../password/" in html  # the password reset link


def test_admin_makes_a_user_a_reviewer_with_an_expert_group(admin_browser):
    newbie = UserFactory(username="newbie", is_staff=False)
    tech_lead = Group.objects.create(name="tech-lead")
    response = admin_browser.post(
        change_url(newbie),
        stock_form_post(
            newbie, role="reviewer", expert_groups=[str(tech_lead.pk)], new_expert_groups="ops"
        ),
    )
    assert response.status_code == 302
    newbie = User.objects.get(pk=newbie.pk)
    assert newbie.is_staff
    assert group_names(newbie) == {"reviewers", "tech-lead", "ops"}
    assert not Group.objects.get(name="ops").permissions.exists()
    assert_no_more_than_a_reviewer(newbie)


def test_admin_cannot_join_someone_to_a_group_with_permissions(admin_browser):
    rita = ReviewerFactory(username="rita-r")
    powerful = Group.objects.create(name="powerful")
    powerful.permissions.add(Permission.objects.get(codename="delete_session"))
    response = admin_browser.post(
        change_url(rita),
        stock_form_post(
            rita,
            groups=[str(reviewers_group().pk), str(powerful.pk)],
            expert_groups=[str(powerful.pk)],
            new_expert_groups="powerful",
        ),
    )
    assert response.status_code in (200, 302, 403)
    assert group_names(rita) == {"reviewers"}


def test_admin_removes_the_role_and_deactivates(admin_browser):
    rita = ReviewerFactory(username="rita-r", groups=["tech-lead"])
    response = admin_browser.post(
        change_url(rita), stock_form_post(rita, role="none", is_active="", groups=[])
    )
    assert response.status_code == 302
    rita = User.objects.get(pk=rita.pk)
    assert not rita.is_active
    assert not rita.is_staff
    assert group_names(rita) == set()


def test_admin_edits_name_and_email_and_resets_a_password(admin_browser):
    rita = ReviewerFactory(username="rita-r")
    response = admin_browser.post(
        change_url(rita), stock_form_post(rita, first_name="Rita", email="rita@example.org")
    )
    assert response.status_code == 302
    response = admin_browser.post(
        password_url(rita),
        {"password1": "A-new-passphrase-42", "password2": "A-new-passphrase-42"},
    )
    assert response.status_code == 302
    rita = User.objects.get(pk=rita.pk)
    assert (rita.first_name, rita.email) == ("Rita", "rita@example.org")
    assert rita.check_password("A-new-passphrase-42")
    assert group_names(rita) == {"reviewers"}


def test_admin_cannot_delete_people(admin_browser):
    rita = ReviewerFactory(username="rita-r")
    response = admin_browser.post(
        reverse("admin:auth_user_delete", args=[rita.pk]), {"post": "yes"}
    )
    assert response.status_code == 403
    assert User.objects.filter(pk=rita.pk).exists()


def test_admin_cannot_change_a_groups_permissions(admin_browser):
    """Editing the admins group's permissions would be granting permissions."""
    group = admins_group()
    permission = Permission.objects.get(codename="delete_session")
    response = admin_browser.post(
        reverse("admin:auth_group_change", args=[group.pk]),
        {"name": "admins", "permissions": [str(permission.pk)]},
    )
    assert response.status_code == 403
    assert not group.permissions.filter(pk=permission.pk).exists()
    assert admin_browser.get(reverse("admin:auth_group_add")).status_code == 403


def test_admin_adds_a_person_who_starts_without_power(admin_browser):
    response = admin_browser.post(
        reverse("admin:auth_user_add"),
        {
            "username": "fresh",
            "usable_password": "true",
            "password1": "A-new-passphrase-42",
            "password2": "A-new-passphrase-42",
            "is_superuser": "on",
            "is_staff": "on",
            "groups": [str(admins_group().pk)],
        },
    )
    assert response.status_code == 302
    fresh = User.objects.get(username="fresh")
    assert not fresh.is_superuser
    assert not fresh.is_staff
    assert group_names(fresh) == set()


def test_the_add_form_refuses_a_username_another_account_has_without_case(admin_browser):
    ReviewerFactory(username="alice")
    response = admin_browser.post(
        reverse("admin:auth_user_add"),
        {
            "username": "ALICE",
            "usable_password": "true",
            "password1": "A-new-passphrase-42",
            "password2": "A-new-passphrase-42",
        },
    )
    assert response.status_code == 200  # the form again, with the error
    assert "already exists" in response.content.decode()
    assert not User.objects.filter(username="ALICE").exists()


@pytest.mark.parametrize("by", ["admin", "superuser"])
def test_the_change_forms_refuse_another_accounts_email_or_username(admin_browser, db, by):
    """One person, one account (issue 47): the person form (admins) and the stock form
    (superusers) refuse an address or a name another account has, without case."""
    ReviewerFactory(username="alice", email="alice@example.com")
    bob = ReviewerFactory(username="bob", email="bob@example.com")
    browser = (
        admin_browser
        if by == "admin"
        else session_client(UserFactory(username="root", is_superuser=True))
    )

    response = browser.post(change_url(bob), stock_form_post(bob, email="ALICE@example.com"))

    assert response.status_code == 200
    assert "has this email address already" in response.content.decode()
    assert User.objects.get(pk=bob.pk).email == "bob@example.com"
    if by == "superuser":  # only the stock form changes usernames
        response = browser.post(change_url(bob), stock_form_post(bob, username="Alice"))
        assert "An account named" in response.content.decode()
        assert User.objects.get(pk=bob.pk).username == "bob"


def test_legacy_twins_may_still_be_edited(admin_browser):
    """Two accounts sharing an address already: deactivating one is not refused for it."""
    ReviewerFactory(username="alice", email="alice@example.com")
    twin = ReviewerFactory(username="alice-2", email="alice@example.com")
    response = admin_browser.post(
        change_url(twin), stock_form_post(twin, role="none", is_active="")
    )
    assert response.status_code == 302
    assert not User.objects.get(pk=twin.pk).is_active


def test_superuser_still_grants_admin_on_the_stock_form(db):
    root = UserFactory(username="root", is_superuser=True)
    rita = ReviewerFactory(username="rita-r")
    client = session_client(root)
    assert 'name="is_superuser"' in client.get(change_url(rita)).content.decode()
    response = client.post(
        change_url(rita),
        stock_form_post(rita, groups=[str(reviewers_group().pk), str(admins_group().pk)]),
    )
    assert response.status_code == 302
    assert group_names(rita) == {"reviewers", "admins"}
    assert User.objects.get(pk=rita.pk).is_staff


def test_only_a_superuser_makes_an_admin_through_the_service(db):
    admin = AdminFactory(username="adam")
    root = UserFactory(username="root", is_superuser=True)
    rita = ReviewerFactory(username="rita-r")
    with pytest.raises(Forbidden):
        person_set_role(actor=Actor.for_user(admin), user=rita, role="admin")
    assert group_names(rita) == {"reviewers"}
    person_set_role(actor=Actor.for_user(root), user=rita, role="admin")
    assert group_names(rita) == {"reviewers", "admins"}
    with pytest.raises(Forbidden):
        person_set_role(actor=Actor.for_user(admin), user=rita, role="none")
    assert group_names(rita) == {"reviewers", "admins"}


def test_admin_people_list_costs_the_same_queries_for_more_people(admin_browser):
    ReviewerFactory.create_batch(2)
    with CaptureQueriesContext(connection) as few:
        assert admin_browser.get("/admin/auth/user/").status_code == 200
    ReviewerFactory.create_batch(10, groups=["tech-lead"])
    with CaptureQueriesContext(connection) as many:
        response = admin_browser.get("/admin/auth/user/")
    assert response.content.decode().count("/change/") >= 12
    assert len(many.captured_queries) == len(few.captured_queries)
