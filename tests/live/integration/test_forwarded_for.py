"""The production web server takes the peer as the client's address: X-Forwarded-For is read
by the app alone, per BPM_NUM_PROXIES, so rotating it from the host escapes no lockout."""

import re

import httpx

from tests.support.factories import ReviewerFactory

FAILURE_LIMIT = 3


def failed_login(client: httpx.Client, forwarded_for: str) -> int:
    page = client.get("/admin/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    response = client.post(
        "/admin/login/?next=/admin/",
        data={"username": "alice", "password": "wrong", "csrfmiddlewaretoken": token},
        headers={"X-Forwarded-For": forwarded_for, "Referer": f"{client.base_url}/admin/login/"},
    )
    return response.status_code


def test_rotating_x_forwarded_for_from_the_host_does_not_escape_the_login_lockout(
    make_system, transactional_db
):
    ReviewerFactory(username="alice")
    # Plain HTTP here: the session and CSRF cookies may travel without TLS.
    insecure_cookies = {"SESSION_COOKIE_SECURE": "0", "CSRF_COOKIE_SECURE": "0"}
    system = make_system(
        beat=False, env={"BPM_LOGIN_FAILURE_LIMIT": str(FAILURE_LIMIT), **insecure_cookies}
    )

    with httpx.Client(base_url=system.base_url, timeout=20) as client:
        statuses = [failed_login(client, f"203.0.113.{n}") for n in range(FAILURE_LIMIT + 2)]

    # The form again with its error, then the lock (the failure that reaches the limit is
    # answered with it), whatever X-Forwarded-For said.
    assert statuses == [200] * (FAILURE_LIMIT - 1) + [429] * 3, statuses
