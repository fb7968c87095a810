"""BPM_OIDC_ONLY (passwords for the break-glass superuser alone), single sign-on off (nothing
changes), and a provider that does not answer (a 503 page, never a 500)."""

from django.test import Client

from audit.models import AccessEvent
from sso.discovery import forget_metadata
from tests.support.factories import PASSWORD, ReviewerFactory, UserFactory
from tests.support.net import free_port

LOGIN = "/admin/login/"
QUEUE = "/admin/breakpoints/breakpoint/?status__exact=waiting"


def password_sign_in(client: Client, username: str):
    return client.post(LOGIN, {"username": username, "password": PASSWORD, "next": "/admin/"})


def test_with_sso_only_a_password_signs_in_the_superuser_alone(sso_on, settings, db):
    settings.BPM_OIDC_ONLY = True
    ReviewerFactory(username="pat")
    UserFactory(username="root", is_superuser=True)
    reviewer, root = Client(), Client()

    refused = password_sign_in(reviewer, "pat")
    allowed = password_sign_in(root, "root")

    assert refused.status_code == 200 and "_auth_user_id" not in reviewer.session
    assert b"Password sign-in is kept for the break-glass superuser" in refused.content
    assert allowed.status_code == 302 and "_auth_user_id" in root.session
    event = AccessEvent.objects.get(type="refused")
    assert (event.actor, event.via, event.metadata["reason"]) == ("pat", "password", "sso_only")


def test_with_sso_only_a_reviewers_password_session_ends(sso_on, settings, db):
    client = Client()
    client.force_login(ReviewerFactory(username="pat"))
    assert client.get(QUEUE).status_code == 200

    settings.BPM_OIDC_ONLY = True

    assert client.get(QUEUE).status_code == 302
    assert "_auth_user_id" not in client.session
    assert AccessEvent.objects.filter(type="session_ended", actor="pat", via="password").exists()


def test_the_sign_in_page_offers_the_provider_by_its_name(sso_on, settings, db):
    settings.BPM_OIDC_NAME = "Okta"
    page = Client().get(f"{LOGIN}?next=/admin/audit/event/").content.decode()
    assert "Sign in with Okta" in page
    assert 'href="/oidc/authenticate/?next=/admin/audit/event/"' in page
    assert 'id="login-form"' in page  # passwords still work (BPM_OIDC_ONLY is off)


def test_with_sso_off_nothing_changes(settings, db):
    settings.BPM_OIDC_ISSUER = ""
    client = Client()
    assert client.get("/oidc/authenticate/").status_code == 404
    assert client.get("/oidc/callback/?code=a&state=b").status_code == 404
    assert b"Sign in with" not in client.get(LOGIN).content
    ReviewerFactory(username="pat")
    assert password_sign_in(client, "pat").status_code == 302


def test_a_provider_that_does_not_answer_gets_a_503_page(sso_on, settings, db):
    settings.BPM_OIDC_ISSUER = f"http://127.0.0.1:{free_port()}"
    forget_metadata()
    client = Client()

    for path in ("/oidc/authenticate/", "/oidc/callback/?code=a&state=b"):
        answer = client.get(path)
        assert answer.status_code == 503, path
        assert answer["Retry-After"] == "30"
        assert b"does not answer" in answer.content
