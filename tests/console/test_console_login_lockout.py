"""Console logins are throttled (django-axes): repeated failures lock one username from one address."""

import pytest
from axes.models import AccessAttempt
from django.test import Client

from tests.support.factories import ReviewerFactory

LOGIN = "/admin/login/"
PASSWORD = "a-long-passphrase-42"


@pytest.fixture
def alice(db, settings):
    settings.AXES_FAILURE_LIMIT = 3
    user = ReviewerFactory(username="alice")
    user.set_password(PASSWORD)
    user.save()
    return user


def log_in(client: Client, password: str, username: str = "alice", address: str = "10.0.0.5"):
    return client.post(LOGIN, {"username": username, "password": password}, REMOTE_ADDR=address)


def logged_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


def test_failures_past_the_limit_lock_out_even_the_right_password(alice):
    client = Client()
    answers = [log_in(client, "wrong").status_code for _ in range(3)]

    locked = log_in(client, PASSWORD)

    assert answers == [200, 200, 429]  # the form again with its error, then the lock

    assert locked.status_code == 429
    assert "Too many failed logins" in locked.content.decode()
    assert not logged_in(client)


def test_the_lock_says_when_to_come_back(alice, settings):
    settings.AXES_COOLOFF_TIME = 0.25  # hours
    client = Client()
    for _ in range(3):
        log_in(client, "wrong")

    locked = log_in(client, PASSWORD)

    assert locked.status_code == 429
    assert locked["Retry-After"] == "900"
    assert "0:15:00" in locked.content.decode()


def test_the_lock_is_per_username_and_address(alice):
    ReviewerFactory(username="bob").set_password(PASSWORD)
    for _ in range(3):
        log_in(Client(), "wrong")

    elsewhere = Client()
    log_in(elsewhere, PASSWORD, address="10.0.0.9")

    assert logged_in(elsewhere)
    assert AccessAttempt.objects.filter(username="alice", ip_address="10.0.0.5").exists()


def test_a_success_resets_the_count(alice):
    client = Client()
    for _ in range(2):
        log_in(client, "wrong")
    log_in(client, PASSWORD)
    client.logout()

    for _ in range(2):
        log_in(client, "wrong")
    log_in(client, PASSWORD)

    assert logged_in(client)


def test_an_admin_unlocks_by_deleting_the_attempts(alice):
    for _ in range(3):
        log_in(Client(), "wrong")
    assert log_in(Client(), PASSWORD).status_code == 429

    AccessAttempt.objects.filter(username="alice").delete()  # "Access attempts" in the console
    client = Client()
    log_in(client, PASSWORD)

    assert logged_in(client)
