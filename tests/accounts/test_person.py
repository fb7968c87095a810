"""A person is not an account: accounts.people.person_usernames and is_person_named find
every account of one person (the same account, a username differing only in case, a shared
email), and nobody else's (issue 47)."""

import pytest

from accounts.people import is_person_named, person_usernames, same_person
from core.actors import AgentPrincipal
from tests.support.factories import ReviewerFactory, UserFactory

pytestmark = pytest.mark.django_db


def test_an_account_alone_is_its_own_person():
    alice = ReviewerFactory(username="alice", email="alice@example.com")
    ReviewerFactory(username="bob", email="bob@example.com")
    assert person_usernames(alice) == {"alice"}


def test_two_accounts_sharing_an_email_without_case_are_one_person():
    """The SSO twin of issue 47: alice and alice-2, both alice@example.com."""
    alice = ReviewerFactory(username="alice", email="alice@example.com")
    twin = ReviewerFactory(username="alice-2", email="Alice@Example.COM")
    ReviewerFactory(username="bob", email="bob@example.com")
    assert person_usernames(alice) == {"alice", "alice-2"}
    assert person_usernames(twin) == {"alice", "alice-2"}
    assert same_person(twin, alice)


def test_usernames_differing_only_in_case_are_one_person():
    alice = ReviewerFactory(username="alice", email="")
    ReviewerFactory(username="ALICE", email="")
    assert person_usernames(alice) == {"alice", "ALICE"}


def test_shared_names_are_followed_from_account_to_account():
    """alice ~ ALICE (username), ALICE ~ al (email): al is alice too."""
    alice = ReviewerFactory(username="alice", email="alice@example.com")
    ReviewerFactory(username="ALICE", email="a.l@example.com")
    ReviewerFactory(username="al", email="a.l@example.com")
    assert person_usernames(alice) == {"alice", "ALICE", "al"}


def test_accounts_without_an_email_are_not_joined_by_it():
    alice = ReviewerFactory(username="alice", email="")
    ReviewerFactory(username="bob", email="")
    assert person_usernames(alice) == {"alice"}
    assert not is_person_named(alice, "bob")


def test_a_requester_named_by_any_account_of_the_person_names_them():
    twin = ReviewerFactory(username="alice-2", email="alice@example.com")
    ReviewerFactory(username="alice", email="ALICE@example.com")
    assert is_person_named(twin, "alice")
    assert is_person_named(twin, "Alice")
    assert is_person_named(twin, "alice@example.com")
    assert not is_person_named(twin, "bob")
    assert not is_person_named(twin, "")
    assert not is_person_named(twin, None)


def test_agents_and_nobody_are_no_person():
    UserFactory(username="agent:a")
    assert person_usernames(AgentPrincipal("a")) == set()
    assert person_usernames(None) == set()
    assert not is_person_named(AgentPrincipal("a"), "agent:a")


def test_an_owner_bound_token_still_creates_beside_a_legacy_case_twin(db):
    """`create_reviewer ALICE` beside alice (before it was refused) made every create with
    alice's owner-bound token a 400 "names more than one person": the exact name wins."""
    from accounts.requesters import requester_bind

    ReviewerFactory(username="alice", email="alice@example.com")
    ReviewerFactory(username="ALICE", email="")
    assert requester_bind(owner="alice", requested=None) == "alice"
    assert requester_bind(owner="alice", requested="alice@example.com") == "alice"
