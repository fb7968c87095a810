"""sso_link: an existing account is linked to a subject at the provider by an admin, once."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from sso.models import Identity
from tests.support.factories import UserFactory
from tests.support.net import free_port


def link(*args: str) -> str:
    out = StringIO()
    call_command("sso_link", *args, stdout=out)
    return out.getvalue()


def test_an_account_is_linked_to_the_issuer_as_the_provider_names_it(sso_on, db):
    UserFactory(username="alice")
    assert "'alice' signs in as 's-1'" in link("alice", "s-1")
    assert Identity.objects.get().issuer == sso_on.issuer


@pytest.mark.parametrize(
    ("username", "subject", "message"),
    [
        ("nobody", "s-9", "No user named"),
        ("root", "s-9", "superuser"),
        ("alice", "s-9", "linked to a subject already"),
        ("bob", "s-1", "linked to another account"),
        ("bob", " ", "1 to 255"),
    ],
)
def test_a_link_that_would_take_over_or_double_an_account_is_refused(
    sso_on, db, username, subject, message
):
    UserFactory(username="alice")
    UserFactory(username="bob")
    UserFactory(username="root", is_superuser=True)
    link("alice", "s-1")
    with pytest.raises(CommandError, match=message):
        link(username, subject)


def test_linking_needs_single_sign_on_and_a_provider_that_answers(sso_on, settings, db):
    UserFactory(username="alice")
    settings.BPM_OIDC_ISSUER = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(CommandError, match="does not answer"):
        link("alice", "s-1")
    settings.BPM_OIDC_ISSUER = ""
    with pytest.raises(CommandError, match="Single sign-on is off"):
        link("alice", "s-1")
    assert not Identity.objects.exists()
