"""How the client secret reaches the token endpoint (BPM_OIDC_TOKEN_AUTH_METHOD): in the
request body (client_secret_post, the default) or in an Authorization: Basic header
(client_secret_basic, what Okta's apps are registered with). The provider here takes the
secret only the way its client is registered, as Okta does."""

import logging

import pytest

from audit.models import AccessEvent
from tests.live.sso.idp import Browser, running_provider

METHODS = ["client_secret_basic", "client_secret_post"]


@pytest.fixture(scope="module", params=METHODS)
def idp(request, tmp_path_factory):
    """A provider whose one client is registered with the method of the parameter."""
    workdir = tmp_path_factory.mktemp("idp-token-auth")
    options = {"token_auth_method": request.param}
    with running_provider(workdir, [Browser.SERVICE], **options) as provider:
        yield provider


def test_a_reviewer_signs_in_with_the_method_the_client_is_registered_with(
    sso_on, new_browser, settings
):
    settings.BPM_OIDC_TOKEN_AUTH_METHOD = sso_on.token_auth_method
    sso_on.person("rita", groups=["bpm-reviewers"])
    person = new_browser()

    answer = person.sign_in("rita")

    assert answer.status_code == 302, answer.content[:300]
    assert person.signed_in_user_id() is not None
    assert AccessEvent.objects.filter(type="signed_in", actor="rita", via="oidc").exists()


def test_the_other_method_is_refused_and_the_log_names_the_setting(
    sso_on, new_browser, settings, caplog
):
    [other] = [method for method in METHODS if method != sso_on.token_auth_method]
    settings.BPM_OIDC_TOKEN_AUTH_METHOD = other
    sso_on.person("rita", groups=["bpm-reviewers"])
    person = new_browser()

    with caplog.at_level(logging.WARNING, logger="sso"):
        answer = person.sign_in("rita")

    assert answer.status_code == 400
    assert person.signed_in_user_id() is None
    assert not AccessEvent.objects.filter(type="signed_in").exists()
    [refused] = [r.getMessage() for r in caplog.records if "token endpoint" in r.getMessage()]
    assert "invalid_client" in refused
    assert f"BPM_OIDC_TOKEN_AUTH_METHOD (now {other})" in refused
