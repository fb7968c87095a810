"""One person, one account (issue 47): a first sign-in through the identity provider is
linked to the existing account of its verified email, or refused with how an admin links
them (sso_link); never a second account (`alice-2`) that four eyes would take for someone
else."""

from django.contrib.auth import get_user_model

from accounts.tokens import token_create_for_agent
from audit.models import AccessEvent
from breakpoints.models import Breakpoint
from sso.models import Identity
from tests.conftest import bearer_client
from tests.support.console import action_url
from tests.support.factories import ReviewerFactory, UserFactory
from tests.support.sso import user_of

SELF_REVIEW = (
    "You requested this breakpoint (alice): another reviewer must decide it "
    "(self-review is not allowed here)."
)


def usernames() -> list[str]:
    return sorted(get_user_model().objects.values_list("username", flat=True))


def test_alice_signing_in_through_sso_is_alice_and_may_not_approve_her_own_breakpoint(
    sso_on, new_browser, settings
):
    """The issue's reproduction: alice (a local reviewer, owner of the agent's token)
    signs in through the provider with her verified email, under four eyes."""
    settings.BPM_PREVENT_SELF_REVIEW = True
    alice = ReviewerFactory(username="alice", email="alice@example.com")
    _, raw = token_create_for_agent(agent_id="deployer", owner="alice")
    created = bearer_client(raw).post(
        "/api/breakpoints",
        {"agentId": "deployer", "runId": "r-1", "payload": {"question": "Deploy?"}},
        format="json",
    )
    assert created.status_code == 201, created.content
    breakpoint_id = created.json()["breakpointId"]
    sso_on.person(
        "a-sub",
        groups=["bpm-reviewers"],
        preferred_username="alice.smith",
        email="Alice@Example.com",
        email_verified=True,
    )
    browser = new_browser()

    assert browser.sign_in("a-sub").status_code == 302

    assert user_of(browser).pk == alice.pk  # linked, not a second account
    assert usernames() == ["alice"]
    assert Identity.objects.get().user_id == alice.pk
    linked = AccessEvent.objects.get(type="linked")
    assert (linked.actor, linked.subject, linked.metadata["linked_by"]) == (
        "alice",
        "a-sub",
        "verified_email",
    )
    asked = browser.client.post(
        action_url("release", breakpoint_id), {"decision": "approve"}, follow=True
    )
    assert SELF_REVIEW in asked.content.decode()
    done = browser.client.post(
        action_url("release", breakpoint_id),
        {"decision": "approve", "comment": "", "confirm": "yes"},
        follow=True,
    )
    assert SELF_REVIEW in done.content.decode()
    assert Breakpoint.objects.get(pk=breakpoint_id).status == "waiting"


def refused_page(answer) -> str:
    assert answer.status_code == 403
    page = answer.content.decode()
    assert "never given a second one" in page and "sso_link" in page
    return page


def test_an_unverified_email_of_an_existing_account_is_refused_with_how_to_link(
    sso_on, new_browser
):
    ReviewerFactory(username="alice", email="alice@example.com")
    sso_on.person(
        "a-sub", groups=["bpm-reviewers"], email="alice@example.com", email_verified=False
    )
    browser = new_browser()

    page = refused_page(browser.sign_in("a-sub"))

    assert "does not say that this address is verified" in page and "a-sub" in page
    assert browser.signed_in_user_id() is None
    assert usernames() == ["alice"] and not Identity.objects.exists()
    refusal = AccessEvent.objects.get(type="refused")
    assert (refusal.actor, refusal.metadata["reason"], refusal.metadata["accounts"]) == (
        "sub:a-sub",
        "unlinked",
        ["alice"],
    )


def test_an_email_two_accounts_share_is_refused(sso_on, new_browser):
    ReviewerFactory(username="alice", email="alice@example.com")
    ReviewerFactory(username="alice-old", email="ALICE@example.com")
    sso_on.person("a-sub", groups=["bpm-reviewers"], email="alice@example.com")
    browser = new_browser()

    assert "More than one account" in refused_page(browser.sign_in("a-sub"))
    assert usernames() == ["alice", "alice-old"] and not Identity.objects.exists()


def test_a_username_taken_without_case_is_refused_not_suffixed(sso_on, new_browser):
    """No `alice-2`: an account named alice (another address, or none) may be hers."""
    UserFactory(username="alice", email="")
    sso_on.person(
        "a-sub", groups=["bpm-reviewers"], preferred_username="Alice", email="a@corp.example"
    )
    browser = new_browser()

    page = refused_page(browser.sign_in("a-sub"))

    assert "An account named &#x27;Alice&#x27; exists" in page
    assert usernames() == ["alice"] and not Identity.objects.exists()


def test_after_an_admin_links_them_the_person_signs_in_to_their_account(sso_on, new_browser):
    from io import StringIO

    from django.core.management import call_command

    alice = ReviewerFactory(username="alice", email="alice@example.com")
    sso_on.person(
        "a-sub", groups=["bpm-reviewers"], email="alice@example.com", email_verified=False
    )
    refused_page(new_browser().sign_in("a-sub"))
    call_command("sso_link", "alice", "a-sub", stdout=StringIO())
    browser = new_browser()

    assert browser.sign_in("a-sub").status_code == 302
    assert user_of(browser).pk == alice.pk and usernames() == ["alice"]
    assert AccessEvent.objects.get(type="linked").metadata["linked_by"] == "sso_link"


def test_an_account_linked_to_another_subject_is_not_taken_by_its_email(sso_on, new_browser):
    sso_on.person("s-1", groups=["bpm-reviewers"], preferred_username="sam", email="s@x.example")
    sso_on.person("s-2", groups=["bpm-reviewers"], preferred_username="sam2", email="s@x.example")
    first = new_browser()
    assert first.sign_in("s-1").status_code == 302

    page = refused_page(new_browser().sign_in("s-2"))

    assert "signs in as another person" in page
    assert usernames() == ["sam"] and Identity.objects.get().subject == "s-1"
