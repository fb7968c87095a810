"""Signing in with OpenID Connect against a real provider: roles and expert groups from the
provider's groups, recomputed at every sign-in; a person in no mapped group refused with a
page that says whom to ask; accounts matched on the provider's subject."""

from django.contrib.admin.utils import quote
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.urls import reverse

from accounts.tokens import token_create_for_user
from audit.models import AccessEvent
from breakpoints.models import Breakpoint
from sso.models import Identity
from tests.conftest import bearer_client
from tests.support.console import action_url
from tests.support.sso import user_of

QUEUE = "/admin/breakpoints/breakpoint/?status__exact=waiting"


def review_url(breakpoint_id: str) -> str:
    return reverse("admin:breakpoints_breakpoint_change", args=[quote(breakpoint_id)])


def groups_of(user) -> set[str]:
    return set(user.groups.values_list("name", flat=True))


def test_a_reviewer_signs_in_and_sees_the_queue(sso_on, new_browser):
    sso_on.person("rita", groups=["bpm-reviewers"], email="rita@example.com", name="Rita Hayworth")
    person = new_browser()

    answer = person.sign_in("rita")

    assert answer.status_code == 302, answer.content[:300]
    queue = person.client.get(answer["Location"], follow=True)
    assert queue.status_code == 200
    assert queue.redirect_chain[-1][0] == QUEUE
    user = user_of(person)
    assert (user.username, user.email, user.first_name, user.last_name) == (
        "rita",
        "rita@example.com",
        "Rita",
        "Hayworth",
    )
    assert groups_of(user) == {"reviewers"} and user.is_staff and not user.has_usable_password()
    assert Identity.objects.get(user=user).subject == "rita"
    event = AccessEvent.objects.get(type="signed_in", actor="rita")
    assert (event.via, event.subject, event.groups) == ("oidc", "rita", ["bpm-reviewers"])
    assert person.client.get("/admin/accounts/apitoken/").status_code == 403  # not an admin


def test_the_sign_in_returns_to_the_page_asked_for(sso_on, new_browser, make_breakpoint):
    sso_on.person("rita", groups=["bpm-reviewers"])
    bp = make_breakpoint()
    person = new_browser()

    answer = person.sign_in("rita", next_path=review_url(bp.pk))

    assert answer["Location"] == review_url(bp.pk)
    assert person.client.get(answer["Location"]).status_code == 200


def test_an_admin_gets_the_admin_pages(sso_on, new_browser):
    sso_on.person("adam", groups=["bpm-admins"])
    person = new_browser()

    assert person.sign_in("adam").status_code == 302
    assert groups_of(user_of(person)) == {"reviewers", "admins"}
    assert person.client.get("/admin/accounts/apitoken/").status_code == 200
    assert person.client.get("/admin/audit/accessevent/").status_code == 200


def test_a_person_in_no_mapped_group_is_refused_with_a_page_and_nothing_is_created(
    sso_on, new_browser, settings
):
    settings.BPM_OIDC_ACCESS_CONTACT = "#platform-access on Slack"
    sso_on.person("mallory", groups=["marketing"], email="mallory@example.com")
    person = new_browser()

    answer = person.sign_in("mallory")

    assert answer.status_code == 403
    page = answer.content.decode()
    assert "You have no access to Breakpoint Manager" in page
    assert "mallory@example.com" in page and "bpm-reviewers" in page and "bpm-admins" in page
    assert "#platform-access on Slack" in page
    assert person.signed_in_user_id() is None
    assert person.client.get(QUEUE).status_code == 302  # to the sign-in page
    assert not get_user_model().objects.exists() and not Identity.objects.exists()
    refusal = AccessEvent.objects.get(type="refused")
    assert (refusal.actor, refusal.groups, refusal.metadata["reason"]) == (
        "sub:mallory",
        ["marketing"],
        "no_role",
    )


def test_roles_follow_the_provider_at_every_sign_in_and_tokens_stop_with_them(
    sso_on, new_browser, settings
):
    """Promoted, then removed from every mapped group: the console and the personal token
    go with the role, and each change is in the access trail."""
    settings.BPM_TOKEN_CACHE_SECONDS = 0
    sso_on.person("rita", groups=["bpm-reviewers"])
    first = new_browser()
    first.sign_in("rita")
    rita = user_of(first)
    _, raw = token_create_for_user(user=rita)
    api = bearer_client(raw)
    assert api.get("/api/breakpoints").status_code == 200

    sso_on.person("rita", groups=["bpm-reviewers", "bpm-admins"])
    assert new_browser().sign_in("rita").status_code == 302
    assert groups_of(rita) == {"reviewers", "admins"}

    sso_on.person("rita", groups=["bpm-alumni"])
    again = new_browser()
    answer = again.sign_in("rita")

    assert answer.status_code == 403 and again.signed_in_user_id() is None
    rita.refresh_from_db()
    assert groups_of(rita) == set() and not rita.is_staff
    assert api.get("/api/breakpoints").status_code == 403
    changes = AccessEvent.objects.filter(type="role_changed").order_by("timestamp", "id")
    assert [(c.metadata["role"], c.metadata["added"], c.metadata["removed"]) for c in changes] == [
        ("reviewer", ["reviewers"], []),
        ("admin", ["admins"], []),
        ("none", [], ["admins", "reviewers"]),
    ]


def test_an_expert_group_from_the_provider_receives_a_breakpoint_routed_to_it(
    sso_on, new_browser, make_breakpoint
):
    sso_on.person("dora", groups=["bpm-reviewers", "dba", "sales"])
    sso_on.person("rita", groups=["bpm-reviewers"])
    bp = make_breakpoint(payload={"question": "Drop the column?", "expert": "dba"})
    dora, rita = new_browser(), new_browser()
    dora.sign_in("dora")
    rita.sign_in("rita")

    # "sales" is not mirrored (BPM_OIDC_EXPERT_GROUPS=dba,sre): no such group here.
    assert groups_of(user_of(dora)) == {"reviewers", "dba"}
    assert not Group.objects.filter(name="sales").exists()
    refused = rita.client.post(action_url("release", bp.pk), {"decision": "approve"}, follow=True)
    assert b"Only members of dba" in refused.content
    data = {"decision": "approve"}
    assert dora.client.post(action_url("release", bp.pk), data).status_code == 200
    done = dora.client.post(action_url("release", bp.pk), {**data, "confirm": "yes"})
    assert done.status_code == 302
    bp = Breakpoint.objects.get(pk=bp.pk)
    assert bp.status == "released"
    assert bp.feedback.get(releases=True).author == "dora"

    sso_on.person("dora", groups=["bpm-reviewers"])
    new_browser().sign_in("dora")
    assert groups_of(user_of(dora)) == {"reviewers"}  # left dba at the provider: gone here


def test_people_are_matched_on_the_subject_and_a_new_address_replaces_the_old(sso_on, new_browser):
    """A subject's new address and name replace the old ones; its username stays. (Its
    first sign-in: a new account, no account having its email or username; issue 47's
    linking and refusals are in test_one_person.)"""
    get_user_model().objects.create_user("sam", email="old@example.com")
    sso_on.person(
        "s-1", groups=["bpm-reviewers"], preferred_username="samuel", email="sam@example.com"
    )
    one = new_browser()
    one.sign_in("s-1")
    assert user_of(one).username == "samuel"

    sso_on.person(
        "s-1",
        groups=["bpm-reviewers"],
        preferred_username="x",
        email="s@example.org",
        name="Sam Vimes",
    )
    again = new_browser()
    again.sign_in("s-1")
    user = user_of(again)
    assert user.pk == user_of(one).pk
    assert (user.username, user.email, user.get_full_name()) == (
        "samuel",
        "s@example.org",
        "Sam Vimes",
    )

    sso_on.person("s-1", groups=["bpm-reviewers"], email="OLD@example.com")  # sam's address
    new_browser().sign_in("s-1")
    user.refresh_from_db()
    assert user.email == "s@example.org"  # kept: one address, one person


def test_an_unverified_email_is_not_taken(sso_on, new_browser):
    sso_on.person("eve", groups=["bpm-reviewers"], email="ceo@example.com", email_verified=False)
    person = new_browser()
    person.sign_in("eve")
    assert user_of(person).email == ""


def test_a_deactivated_account_stays_out(sso_on, new_browser):
    sso_on.person("rita", groups=["bpm-reviewers"])
    first = new_browser()
    first.sign_in("rita")
    get_user_model().objects.filter(pk=user_of(first).pk).update(is_active=False)

    again = new_browser()
    answer = again.sign_in("rita")

    assert answer.status_code == 403 and again.signed_in_user_id() is None
    assert b"deactivated" in answer.content


def test_create_user_token_works_for_a_person_who_signs_in_with_sso(sso_on, new_browser):
    from io import StringIO

    from django.core.management import call_command

    sso_on.person("rita", groups=["bpm-reviewers"])
    new_browser().sign_in("rita")
    out = StringIO()
    call_command("create_user_token", "rita", stdout=out, stderr=StringIO())
    raw = out.getvalue().strip().splitlines()[-1]
    assert bearer_client(raw).get("/api/breakpoints").status_code == 200


def test_an_account_linked_to_its_subject_keeps_its_history(sso_on, new_browser):
    from io import StringIO

    from django.core.management import call_command

    from tests.support.factories import UserFactory

    alice = UserFactory(username="alice", is_staff=False)
    call_command("sso_link", "alice", "a-17", stdout=StringIO())
    sso_on.person("a-17", groups=["bpm-reviewers"], preferred_username="alice.smith")
    person = new_browser()

    assert person.sign_in("a-17").status_code == 302
    assert user_of(person).pk == alice.pk and user_of(person).username == "alice"
    assert get_user_model().objects.count() == 1


def test_starting_sign_ins_is_bounded_per_address(sso_on, new_browser, settings):
    settings.BPM_THROTTLE_ANON_RATE = "2/min"
    person = new_browser()
    person.start()
    person.start()

    answer = person.client.get("/oidc/authenticate/")

    assert answer.status_code == 429
    assert int(answer["Retry-After"]) > 0


def test_a_next_page_elsewhere_is_not_followed(sso_on, new_browser):
    sso_on.person("rita", groups=["bpm-reviewers"])
    answer = new_browser().sign_in("rita", next_path="https://evil.example/admin/")
    assert answer.status_code == 302 and answer["Location"] == "/"
