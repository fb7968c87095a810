"""Sessions of people signed in through the provider: re-checked with it every
BPM_OIDC_RECHECK_SECONDS (a person removed from the reviewer group loses the console
within it), ended when the provider cannot say, and signed out at both ends."""

import time
from urllib.parse import parse_qs, urljoin, urlsplit

from django.contrib.auth import get_user_model

from audit.models import AccessEvent

QUEUE = "/admin/breakpoints/breakpoint/?status__exact=waiting"
RECHECK_SECONDS = 1


def past_the_recheck() -> None:
    time.sleep(RECHECK_SECONDS + 0.2)


def test_removed_from_the_reviewer_group_the_session_ends_within_the_recheck(
    sso_on, new_browser, settings
):
    settings.BPM_OIDC_RECHECK_SECONDS = RECHECK_SECONDS
    sso_on.person("rita", groups=["bpm-reviewers", "dba"])
    person = new_browser()
    person.sign_in("rita")
    assert person.client.get(QUEUE).status_code == 200

    sso_on.person("rita", groups=["bpm-alumni"])
    assert person.client.get(QUEUE).status_code == 200  # not re-checked yet
    past_the_recheck()
    answer = person.client.get(QUEUE)

    assert answer.status_code == 403
    assert b"You have no access to Breakpoint Manager" in answer.content
    assert person.signed_in_user_id() is None
    assert person.client.get(QUEUE).status_code == 302  # signed out: to the sign-in page
    rita = get_user_model().objects.get(username="rita")
    assert not rita.groups.exists() and not rita.is_staff
    ended = AccessEvent.objects.get(type="session_ended")
    assert (ended.actor, ended.metadata["reason"], ended.groups) == (
        "rita",
        "no_role",
        ["bpm-alumni"],
    )
    change = AccessEvent.objects.get(type="role_changed", metadata__role="none")
    assert change.metadata["removed"] == ["dba", "reviewers"]


def test_a_recheck_that_keeps_the_role_applies_new_groups_and_goes_on(
    sso_on, new_browser, settings
):
    settings.BPM_OIDC_RECHECK_SECONDS = RECHECK_SECONDS
    sso_on.person("rita", groups=["bpm-reviewers"])
    person = new_browser()
    person.sign_in("rita")

    sso_on.person("rita", groups=["bpm-reviewers", "bpm-admins", "sre"])
    past_the_recheck()

    assert person.client.get("/admin/accounts/apitoken/").status_code == 200
    rita = get_user_model().objects.get(username="rita")
    assert set(rita.groups.values_list("name", flat=True)) == {"reviewers", "admins", "sre"}
    assert not AccessEvent.objects.filter(type="session_ended").exists()


def test_a_session_the_provider_cannot_vouch_for_ends_and_a_page_signs_in_again(
    sso_on, new_browser, settings
):
    """The access token no longer works at userinfo (here: the provider forgot it, as
    after its expiry): the session ends; a page opened goes through the provider, which
    signs the person in again at once while its own session lasts."""
    settings.BPM_OIDC_RECHECK_SECONDS = RECHECK_SECONDS
    sso_on.person("rita", groups=["bpm-reviewers"])
    person = new_browser()
    person.sign_in("rita")
    session = person.client.session
    session["sso"] = {**session["sso"], "access_token": "not-a-token-the-provider-knows"}
    session.save()
    past_the_recheck()

    answer = person.client.get(QUEUE, HTTP_ACCEPT="text/html")

    assert answer.status_code == 302
    assert answer["Location"].startswith("/oidc/authenticate/?next=")
    assert person.signed_in_user_id() is None
    ended = AccessEvent.objects.get(type="session_ended")
    assert ended.metadata["reason"] == "recheck_impossible"
    provider_url = person.client.get(answer["Location"])["Location"]
    back = person.callback(person.at_provider(provider_url, login=None))  # no login asked
    assert back.status_code == 302 and back["Location"] == QUEUE
    assert person.client.get(QUEUE).status_code == 200


def test_the_api_through_a_session_is_rechecked_too(sso_on, new_browser, settings):
    settings.BPM_OIDC_RECHECK_SECONDS = RECHECK_SECONDS
    sso_on.person("rita", groups=["bpm-reviewers"])
    person = new_browser()
    person.sign_in("rita")
    assert person.client.get("/api/breakpoints").status_code == 200

    sso_on.person("rita", groups=[])
    past_the_recheck()

    assert person.client.get("/api/breakpoints").status_code == 403
    assert person.signed_in_user_id() is None


def test_sign_out_ends_the_session_here_and_at_the_provider(sso_on, new_browser):
    sso_on.person("rita", groups=["bpm-reviewers"])
    person = new_browser()
    person.sign_in("rita")

    leaving = person.client.post("/admin/logout/")

    assert leaving.status_code == 200
    assert person.signed_in_user_id() is None
    page = leaving.content.decode()
    destination = page.split('id="bpm-sso-sign-out" href="')[1].split('"')[0].replace("&amp;", "&")
    assert destination.startswith(f"{sso_on.issuer}/session/end?")
    query = parse_qs(urlsplit(destination).query)
    assert query["post_logout_redirect_uri"] == ["http://testserver/admin/login/"]
    assert query["id_token_hint"][0].count(".") == 2
    assert person.end_provider_session(destination) == "http://testserver/admin/login/"
    assert AccessEvent.objects.filter(type="signed_out", actor="rita").exists()
    # The provider's session is over too: signing in again asks for a login.
    url = person.start()
    provider_page = person.idp.get(url)
    while provider_page.is_redirect:
        url = urljoin(url, provider_page.headers["location"])
        provider_page = person.idp.get(url)
    assert 'name="login"' in provider_page.text


def test_a_password_session_signs_out_as_before(sso_on, db):
    from django.test import Client

    from tests.support.factories import ReviewerFactory

    client = Client()
    client.force_login(ReviewerFactory(username="pat"))
    answer = client.post("/admin/logout/")
    assert answer.status_code == 200 and b"Logged out" in answer.content
    assert "_auth_user_id" not in client.session
    assert not AccessEvent.objects.exists()


def test_the_sign_out_path_takes_a_post_only(sso_on, new_browser):
    sso_on.person("rita", groups=["bpm-reviewers"])
    person = new_browser()
    person.sign_in("rita")

    assert person.client.get("/oidc/logout/").status_code == 405
    assert person.signed_in_user_id() is not None
    leaving = person.client.post("/oidc/logout/")

    assert leaving.status_code == 200 and b"bpm-sso-sign-out" in leaving.content
    assert person.signed_in_user_id() is None
