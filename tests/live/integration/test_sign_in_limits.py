"""Through the production web server (gunicorn, uvicorn worker, Redis-backed counters): an
address that rotates usernames is refused past BPM_LOGIN_ATTEMPT_RATE before its passwords
are checked, and another address still signs in (issue 32)."""

import re

import httpx
from axes.models import AccessAttempt
from django.contrib.auth.hashers import PBKDF2PasswordHasher

from tests.support.factories import ReviewerFactory

ATTEMPTS = 3
PASSWORD = "a-long-passphrase-42"


def sign_in(client: httpx.Client, username: str, password: str) -> httpx.Response:
    page = client.get("/admin/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    return client.post(
        "/admin/login/?next=/admin/",
        data={"username": username, "password": password, "csrfmiddlewaretoken": token},
        headers={"Referer": f"{client.base_url}/admin/login/"},
    )


def test_an_address_rotating_usernames_is_refused_before_its_passwords_are_checked(
    make_system, transactional_db
):
    alice = ReviewerFactory(username="alice")
    # Hashed the way the web process checks it (the suite's own hasher is a fast one).
    hasher = PBKDF2PasswordHasher()
    alice.password = hasher.encode(PASSWORD, hasher.salt())
    alice.save()
    system = make_system(
        beat=False,
        env={
            "BPM_LOGIN_ATTEMPT_RATE": f"{ATTEMPTS}/min",
            # Plain HTTP here: the session and CSRF cookies may travel without TLS.
            "SESSION_COOKIE_SECURE": "0",
            "CSRF_COOKIE_SECURE": "0",
        },
    )

    with httpx.Client(base_url=system.base_url, timeout=30) as attacker:
        answers = [sign_in(attacker, f"nobody-{n}", "guess") for n in range(ATTEMPTS + 2)]
    # Another address (loopback): its own attempts, unaffected by the first one's.
    other = httpx.HTTPTransport(local_address="127.0.0.2")
    with httpx.Client(base_url=system.base_url, timeout=30, transport=other) as reviewer:
        signed_in = sign_in(reviewer, "alice", PASSWORD)

    assert [a.status_code for a in answers] == [200] * ATTEMPTS + [429] * 2, system.logs()
    assert int(answers[-1].headers["Retry-After"]) >= 1
    assert "Your password was not checked" in answers[-1].text
    # Only the admitted attempts reached authentication (each failure is recorded).
    assert AccessAttempt.objects.count() == ATTEMPTS
    assert signed_in.status_code == 302, signed_in.text
    assert signed_in.headers["Location"] == "/admin/"
