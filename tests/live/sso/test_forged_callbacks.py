"""A callback that is forged, replayed or malformed signs nobody in and answers a page (4xx),
never a 500: a wrong state, an ID token whose nonce is not the one this browser sent, a
code used twice, an ID token signed by a key that is not the issuer's, garbage."""

import pytest
from axes.models import AccessAttempt
from django.contrib.auth import get_user_model

from tests.live.sso.idp import Browser

pytestmark = pytest.mark.usefixtures("sso_on")


def replace_param(url: str, name: str, value: str) -> str:
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    query[name] = value
    return urlunsplit(parts._replace(query=urlencode(query)))


def assert_refused(answer, person: Browser, caplog=None, because: str = "") -> None:
    """A 400 page, nobody signed in, no account made; `because`: the check that refused
    it, as the log says."""
    assert answer.status_code == 400, answer.content[:300]
    assert person.signed_in_user_id() is None
    assert not get_user_model().objects.exists()
    if because:
        refusals = [r.getMessage() for r in caplog.records if "callback refused" in r.getMessage()]
        assert any(because in message for message in refusals), refusals


def test_a_wrong_state_signs_nobody_in(sso_on, new_browser, caplog):
    sso_on.person("rita", groups=["bpm-reviewers"])
    person = new_browser()
    callback = person.at_provider(person.start(), "rita")

    answer = person.callback(replace_param(callback, "state", "forged-state"))

    assert_refused(answer, person, caplog, because="state not found")
    assert b"Sign-in not completed" in answer.content


def test_an_id_token_with_another_nonce_signs_nobody_in(sso_on, new_browser, caplog):
    """The nonce this browser's sign-in stored is not the one the ID token carries (an
    ID token obtained for another sign-in, injected here)."""
    sso_on.person("rita", groups=["bpm-reviewers"])
    person = new_browser()
    callback = person.at_provider(person.start(), "rita")
    session = person.client.session
    for entry in session["oidc_states"].values():
        entry["nonce"] = "not-the-nonce-the-provider-was-sent"
    session.save()

    assert_refused(person.callback(callback), person, caplog, because="Nonce verification failed")


def test_a_code_used_twice_signs_nobody_in_the_second_time(sso_on, new_browser, caplog):
    """The second use carries the right state, nonce and PKCE verifier (a copy of the
    first browser's session): only the provider's refusal of a used code stops it."""
    sso_on.person("rita", groups=["bpm-reviewers"])
    first, thief = new_browser(), new_browser()
    callback = first.at_provider(first.start(), "rita")
    stolen = thief.client.session
    stolen["oidc_states"] = first.client.session["oidc_states"]
    stolen.save()
    thief.client.cookies["sessionid"] = stolen.session_key

    assert first.callback(callback).status_code == 302
    answer = thief.callback(callback)

    assert answer.status_code == 400
    assert thief.signed_in_user_id() is None
    assert "invalid_grant" in caplog.text


def test_a_callback_replayed_after_its_sign_in_signs_nobody_in(sso_on, new_browser):
    sso_on.person("rita", groups=["bpm-reviewers"])
    person = new_browser()
    callback = person.at_provider(person.start(), "rita")
    assert person.callback(callback).status_code == 302
    person.client.logout()

    answer = person.callback(callback)

    assert answer.status_code in (400, 403) and person.signed_in_user_id() is None


@pytest.mark.parametrize("grant_twice", [False, True], ids=["first-sign-in", "known-person"])
def test_an_id_token_signed_by_another_key_signs_nobody_in(
    sso_on, new_browser, grant_twice, caplog
):
    sso_on.person("rita", groups=["bpm-reviewers"])
    if grant_twice:
        new_browser().sign_in("rita")
        get_user_model().objects.all().delete()
    sso_on.publish_other_key()
    person = new_browser()

    answer = person.sign_in("rita")

    assert_refused(answer, person, caplog, because="Signature verification failed")


@pytest.mark.parametrize(
    "query",
    [
        "",
        "code=abc",
        "state=abc",
        "code=abc&state=def",
        "error=access_denied&error_description=nope",
        "code=" + "x" * 5000 + "&state=" + "y" * 5000,
        "code=%00&state=%ff",
        "code=abc&state=def&iss=http://evil.example",
    ],
    ids=["empty", "code-only", "state-only", "unknown-state", "error", "huge", "bytes", "iss"],
)
def test_malformed_callbacks_answer_a_page_not_a_500(new_browser, query):
    person = new_browser()
    person.start()  # this browser has a sign-in under way (states in its session)

    answer = person.client.get(f"/oidc/callback/?{query}")

    assert answer.status_code == 400, answer.content[:300]
    assert answer["Content-Type"].startswith("text/html")
    assert person.signed_in_user_id() is None


def test_an_answer_naming_another_issuer_signs_nobody_in(sso_on, new_browser, caplog):
    """RFC 9207: the provider names itself in its answer; another name is a mix-up."""
    sso_on.person("rita", groups=["bpm-reviewers"])
    person = new_browser()
    callback = person.at_provider(person.start(), "rita")

    answer = person.callback(replace_param(callback, "iss", "http://127.0.0.1:1"))
    assert_refused(answer, person, caplog, because="names the issuer")


def test_refused_sign_ins_do_not_lock_the_address_out(sso_on, new_browser):
    """Refusals for want of a role are not failed passwords: django-axes counts none."""
    sso_on.person("mallory", groups=["marketing"])
    sso_on.person("rita", groups=["bpm-reviewers"])
    for _ in range(7):
        assert new_browser().sign_in("mallory").status_code == 403

    person = new_browser()
    assert person.sign_in("rita").status_code == 302
    assert not AccessAttempt.objects.exists()
