"""Password checks in the console cost the server only within bounds (issue 32): an address
gets BPM_LOGIN_ATTEMPT_RATE attempts whatever the usernames, refused before any hashing,
and a process checks at most BPM_LOGIN_CONCURRENCY passwords at once."""

import pytest
from axes.models import AccessAttempt
from django.contrib.auth.hashers import MD5PasswordHasher
from django.test import Client

from console.signin import password_checks
from tests.support.factories import ReviewerFactory

LOGIN = "/admin/login/"
PASSWORD_CHANGE = "/admin/password_change/"
PASSWORD = "a-long-passphrase-42"
ATTACKER = "10.0.0.5"


class CountingHasher(MD5PasswordHasher):
    """MD5 (fast), counting every hash it computes: checking a password, and the dummy hash
    Django computes for an unknown username, both call encode()."""

    calls = 0

    def encode(self, password: str, salt: str) -> str:
        CountingHasher.calls += 1
        return super().encode(password, salt)


@pytest.fixture
def hashes(settings):
    """The number of password hashes computed since the test started: call it."""
    settings.PASSWORD_HASHERS = [f"{__name__}.CountingHasher"]
    CountingHasher.calls = 0
    return lambda: CountingHasher.calls


@pytest.fixture
def alice(db, settings):
    settings.BPM_LOGIN_ATTEMPT_RATE = "3/min"
    settings.AXES_FAILURE_LIMIT = 10
    user = ReviewerFactory(username="alice")
    user.set_password(PASSWORD)
    user.save()
    return user


def log_in(client: Client, username: str, password: str, address: str = ATTACKER, **extra):
    return client.post(
        LOGIN, {"username": username, "password": password}, REMOTE_ADDR=address, **extra
    )


def test_an_address_rotating_usernames_is_refused_past_its_attempts_before_any_hashing(
    alice, hashes
):
    client = Client()
    answers = [log_in(client, f"nobody-{n}", "guess") for n in range(6)]

    assert [a.status_code for a in answers] == [200, 200, 200, 429, 429, 429]
    assert hashes() == 3  # one per admitted attempt; the refused ones hashed nothing
    refused = answers[-1]
    # At most the rest of this minute and one attempt's share of the next (infra.ratelimits).
    assert 1 <= int(refused["Retry-After"]) <= 60 + 60 // 3
    assert "Too many sign-in attempts from your address" in refused.content.decode()
    # A refusal is not a failed login: the lockout saw only the admitted three.
    assert sorted(AccessAttempt.objects.values_list("username", flat=True)) == [
        "nobody-0",
        "nobody-1",
        "nobody-2",
    ]


def test_the_right_password_is_refused_too_once_the_address_is_past_its_attempts(alice, hashes):
    client = Client()
    for n in range(3):
        log_in(client, f"nobody-{n}", "guess")

    answer = log_in(client, "alice", PASSWORD)

    assert answer.status_code == 429
    assert "_auth_user_id" not in client.session
    assert hashes() == 3


def test_another_address_still_signs_in_while_one_is_refused(alice, hashes):
    for n in range(4):
        log_in(Client(), f"nobody-{n}", "guess")

    elsewhere = Client()
    answer = log_in(elsewhere, "alice", PASSWORD, address="10.0.0.9")

    assert answer.status_code == 302
    assert "_auth_user_id" in elsewhere.session


def test_rotating_x_forwarded_for_without_a_trusted_proxy_escapes_nothing(alice, hashes, settings):
    """The address is the lockout's (infra.ratelimits.client_address, BPM_NUM_PROXIES=0)."""
    settings.BPM_NUM_PROXIES = 0
    client = Client()
    answers = [
        log_in(client, f"nobody-{n}", "guess", HTTP_X_FORWARDED_FOR=f"203.0.113.{n}").status_code
        for n in range(5)
    ]

    assert answers == [200, 200, 200, 429, 429]


def test_showing_the_form_is_not_an_attempt(alice, hashes):
    client = Client()
    for _ in range(5):
        assert client.get(LOGIN, REMOTE_ADDR=ATTACKER).status_code == 200

    assert log_in(client, "alice", PASSWORD).status_code == 302


def test_a_sign_in_answers_503_with_retry_after_while_every_password_check_is_taken(
    alice, hashes, settings
):
    settings.BPM_LOGIN_CONCURRENCY = 1
    bound = password_checks()
    assert bound.acquire(blocking=False)  # a password check in progress in this process
    try:
        client = Client()
        busy = log_in(client, "alice", PASSWORD)
    finally:
        bound.release()

    assert busy.status_code == 503
    assert busy["Retry-After"] == "2"
    assert "Your password was not checked" in busy.content.decode()
    assert hashes() == 0
    assert "_auth_user_id" not in client.session
    # Once the check in progress is done, the permit is free for the next one.
    assert log_in(client, "alice", PASSWORD).status_code == 302


def test_the_password_change_form_is_bounded_the_same_way(alice, hashes):
    client = Client()
    client.force_login(alice)
    change = {"old_password": "guess", "new_password1": "x", "new_password2": "x"}
    answers = [client.post(PASSWORD_CHANGE, change, REMOTE_ADDR=ATTACKER) for _ in range(4)]

    assert [a.status_code for a in answers] == [200, 200, 200, 429]
    assert hashes() == 3
