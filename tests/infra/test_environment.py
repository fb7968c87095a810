"""The settings' environment (infra.environment): django-environ, read strictly; a bad value
names its variable."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from infra.environment import Env

POOL = {"pool_min": 1, "pool_max": 20, "pool_timeout": 2.0, "connect_timeout": 5}


@pytest.fixture
def env(monkeypatch):
    def reading(**values: str) -> Env:
        for name, value in values.items():
            monkeypatch.setenv(name, value)
        return Env()

    return reading


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("1", True),
        ("TRUE", True),
        (" yes ", True),
        ("on", True),
        ("0", False),
        ("off", False),
        ("", False),
    ],
)
def test_a_boolean_reads_the_words_it_always_read(env, raw, expected):
    assert env(FLAG=raw).bool("FLAG", default=not expected) is expected


def test_a_boolean_that_is_no_boolean_stops_the_process_naming_it(env):
    with pytest.raises(
        ImproperlyConfigured, match=r"FLAG must be a boolean \(1/0, true/false\), got 'treu'"
    ):
        env(FLAG="treu").bool("FLAG", default=False)


def test_an_unset_or_empty_number_is_its_default(env, monkeypatch):
    monkeypatch.delenv("COUNT", raising=False)
    assert Env().int("COUNT", default=7) == 7
    assert env(COUNT=" ").int("COUNT", default=7) == 7
    assert env(SECONDS="").float("SECONDS", default=1.5) == 1.5


def test_a_number_that_is_no_number_stops_the_process_naming_it(env):
    with pytest.raises(ImproperlyConfigured, match="COUNT must be an integer, got 'lots'"):
        env(COUNT="lots").int("COUNT", default=1)
    # django-environ alone would read "5s" as 5.0: a typo is refused, not guessed at.
    with pytest.raises(ImproperlyConfigured, match="SECONDS must be a number, got '5s'"):
        env(SECONDS="5s").float("SECONDS", default=1.0)


def test_a_value_starting_with_a_dollar_is_that_value(env):
    """A secret may start with "$": it is not the name of another variable to read."""
    assert env(SECRET="$HOME").str("SECRET", default="") == "$HOME"


def test_a_list_is_stripped_of_spaces_and_empty_items(env):
    assert env(HOSTS=" a.example , b.example,,").list("HOSTS", default=[]) == [
        "a.example",
        "b.example",
    ]


def test_a_postgresql_url_is_served_by_infra_postgres_through_the_pool(env):
    database = env(
        DATABASE_URL="postgres://u:p%40w@%2Fvar%2Frun%2Fpostgresql/bpm?sslmode=require"
    ).database("DATABASE_URL", default="sqlite:///x", **POOL)
    assert database["ENGINE"] == "infra.postgres"
    assert (database["HOST"], database["NAME"], database["PASSWORD"]) == (
        "/var/run/postgresql",
        "bpm",
        "p@w",
    )
    assert database["CONN_MAX_AGE"] == 0
    assert database["CONN_HEALTH_CHECKS"] is False
    assert database["OPTIONS"]["sslmode"] == "require"
    assert database["OPTIONS"]["pool"]["max_size"] == 20
    assert database["OPTIONS"]["pool"]["reconnect_timeout"] == 2.0
    assert database["OPTIONS"]["connect_timeout"] == 5
    assert database["OPTIONS"]["prepare_threshold"] == 5


def test_a_pooler_in_transaction_mode_gets_no_server_side_statement_or_cursor(env):
    reading = env(DATABASE_URL="postgres://u@127.0.0.1:6432/bpm")
    direct = reading.database("DATABASE_URL", default="sqlite:///x", **POOL)
    pooled = reading.database("DATABASE_URL", default="sqlite:///x", pooler="transaction", **POOL)

    assert direct["OPTIONS"]["prepare_threshold"] == 5
    assert direct["DISABLE_SERVER_SIDE_CURSORS"] is False
    assert pooled["OPTIONS"]["prepare_threshold"] is None
    assert pooled["DISABLE_SERVER_SIDE_CURSORS"] is True
    assert pooled["OPTIONS"]["pool"] == direct["OPTIONS"]["pool"]


def test_an_unknown_pooler_stops_the_process_naming_it(env):
    with pytest.raises(ImproperlyConfigured, match="DATABASE_POOLER"):
        env(DATABASE_URL="postgres://u@h/bpm").database(
            "DATABASE_URL", default="sqlite:///x", pooler="statement", **POOL
        )


def test_sqlite_waits_for_locks_and_has_no_pool(env, monkeypatch):
    monkeypatch.delenv("DATABASE_URL", raising=False)
    database = Env().database("DATABASE_URL", default="sqlite:////tmp/bpm.sqlite3", **POOL)
    assert database["ENGINE"] == "django.db.backends.sqlite3"
    assert database["NAME"] == "/tmp/bpm.sqlite3"
    assert database["OPTIONS"] == {"timeout": 20, "transaction_mode": "IMMEDIATE"}


def test_an_email_url_gives_djangos_email_settings(env):
    assert env(MAIL="smtps://me:pa%20ss@mail.example").email("MAIL") == {
        "EMAIL_BACKEND": "django.core.mail.backends.smtp.EmailBackend",
        "EMAIL_HOST": "mail.example",
        "EMAIL_PORT": 465,
        "EMAIL_HOST_USER": "me",
        "EMAIL_HOST_PASSWORD": "pa ss",
        "EMAIL_USE_SSL": True,
        "EMAIL_USE_TLS": False,
    }
    assert env(MAIL="").email("MAIL") == {}
    with pytest.raises(ImproperlyConfigured, match="MAIL must be smtp://host:port"):
        env(MAIL="mail://x").email("MAIL")
