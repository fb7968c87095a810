"""What the provider's claims say about a person: subject, groups (ID token first, else
userinfo), email only when verified, names; the role and expert groups they give here;
the username a new account gets."""

import pytest

from accounts.people import Role
from sso.claims import (
    ClaimsRefused,
    IdpPerson,
    expert_groups_for,
    person_from_claims,
    role_for_groups,
    username_base,
)
from sso.config import oidc_config


def test_groups_come_from_the_id_token_when_it_carries_them():
    person = person_from_claims(
        {"sub": "s1", "groups": ["from-token"]},
        {"sub": "s1", "groups": ["from-userinfo"]},
        "groups",
    )
    assert person.groups == ("from-token",)


def test_groups_come_from_userinfo_when_the_id_token_has_none():
    person = person_from_claims({"sub": "s1"}, {"sub": "s1", "groups": ["a", "b", "a"]}, "groups")
    assert person.groups == ("a", "b")


def test_userinfo_about_another_subject_is_ignored():
    """OpenID Connect Core 5.3.2: its sub must be the ID token's."""
    person = person_from_claims(
        {"sub": "s1"}, {"sub": "s2", "groups": ["admins-of-s2"], "email": "s2@x.io"}, "groups"
    )
    assert person.groups is None and person.email == ""


@pytest.mark.parametrize(
    ("value", "groups"),
    [("one", ("one",)), ([" a ", "", 7, None, "b"], ("a", "b")), ({"a": 1}, ()), (None, None)],
)
def test_a_groups_claim_in_any_shape_gives_names(value, groups):
    assert person_from_claims({"sub": "s", "groups": value}, {}, "groups").groups == groups


def test_a_nested_groups_claim_is_found_by_its_dotted_path():
    """Keycloak's realm roles; a claim whose own name has dots (Auth0) wins."""
    nested = {"sub": "s", "realm_access": {"roles": ["bpm-reviewers"]}}
    assert person_from_claims(nested, {}, "realm_access.roles").groups == ("bpm-reviewers",)
    namespaced = {"sub": "s", "https://example.com/groups": ["x"]}
    assert person_from_claims(namespaced, {}, "https://example.com/groups").groups == ("x",)


@pytest.mark.parametrize("sub", [None, "", 42, "s" * 256])
def test_claims_without_a_usable_subject_are_refused(sub):
    with pytest.raises(ClaimsRefused):
        person_from_claims({"sub": sub}, {}, "groups")


def test_an_email_the_provider_has_not_verified_is_not_kept():
    verified = person_from_claims({"sub": "s", "email": "a@x.io", "email_verified": True}, {}, "g")
    unsaid = person_from_claims({"sub": "s", "email": "a@x.io"}, {}, "g")
    unverified = person_from_claims(
        {"sub": "s", "email": "a@x.io", "email_verified": False}, {}, "g"
    )
    assert (verified.email, unsaid.email, unverified.email) == ("a@x.io", "a@x.io", "")
    # What was claimed is known (a first sign-in is not linked by it), verified or not.
    assert (verified.email_claimed, unsaid.email_claimed, unverified.email_claimed) == (
        "a@x.io",
        "a@x.io",
        "a@x.io",
    )
    assert (verified.email_verified, unsaid.email_verified, unverified.email_verified) == (
        True,
        False,
        False,
    )


def test_names_come_from_given_and_family_name_else_from_name():
    given = person_from_claims(
        {"sub": "s", "given_name": "Ada", "family_name": "Lovelace"}, {}, "g"
    )
    full = person_from_claims({"sub": "s", "name": "Grace Brewster Hopper"}, {}, "g")
    single = person_from_claims({"sub": "s", "name": "Cher"}, {}, "g")
    assert (given.first_name, given.last_name) == ("Ada", "Lovelace")
    assert (full.first_name, full.last_name) == ("Grace Brewster", "Hopper")
    assert (single.first_name, single.last_name) == ("Cher", "")


@pytest.fixture
def mapping(settings):
    settings.BPM_OIDC_REVIEWER_GROUPS = ["bpm-reviewers"]
    settings.BPM_OIDC_ADMIN_GROUPS = ["bpm-admins"]
    settings.BPM_OIDC_EXPERT_GROUPS = ["dba"]
    return settings


@pytest.mark.parametrize(
    ("groups", "role"),
    [
        (("bpm-reviewers",), Role.REVIEWER),
        (("bpm-admins",), Role.ADMIN),
        (("bpm-reviewers", "bpm-admins"), Role.ADMIN),
        (("reviewers", "admins", "dba"), Role.NONE),  # the names here are not the provider's
        ((), Role.NONE),
        (None, Role.NONE),
    ],
)
def test_the_role_is_the_highest_one_the_groups_give(mapping, groups, role):
    assert role_for_groups(groups, oidc_config()) == role


def test_expert_groups_are_the_mirrored_ones_or_all_with_a_star(mapping):
    assert expert_groups_for(("dba", "sre", "bpm-reviewers"), oidc_config()) == {"dba"}
    mapping.BPM_OIDC_EXPERT_GROUPS = ["*"]
    assert expert_groups_for(("dba", "sre"), oidc_config()) == {"dba", "sre"}
    mapping.BPM_OIDC_EXPERT_GROUPS = []
    assert expert_groups_for(("dba",), oidc_config()) == set()


@pytest.mark.parametrize(
    ("preferred", "email", "username"),
    [
        ("rita", "", "rita"),
        ("rita@corp.example", "", "rita@corp.example"),
        ("", "rita.h@corp.example", "rita.h"),
        ("Rita Hayworth (ops)", "", "Rita-Hayworth--ops"),
        ("", "", "user"),
        ("../../", "", "user"),
    ],
)
def test_a_username_is_the_preferred_username_or_the_emails_local_part(preferred, email, username):
    person = IdpPerson("s", preferred, email, "", "", ())
    assert username_base(person) == username
