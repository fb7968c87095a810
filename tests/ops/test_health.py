"""Probes: /healthz (process alive) and /readyz (database and broker reachable)."""

import pytest
from django.db import connection

from breakpoints.waiting.hub import get_hub
from tests.support.aio import run_asgi


def test_healthz_is_200_without_auth_or_database(client):
    response = client.get("/healthz")

    assert response.status_code == 200
    listener = "off" if connection.vendor == "postgresql" else "not used"
    assert response.json() == {"status": "ok", "waiters": 0, "listener": listener}


@pytest.mark.sqlite  # the embedded default's answer (PostgreSQL's: tests/live/integration)
def test_healthz_on_sqlite_says_the_listener_is_not_used_once_waits_started(
    settings, transactional_db
):
    """Not "down", which reads as broken: SQLite has no NOTIFY (issue 31)."""
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]

    async def scenario(client):
        get_hub()  # what this process's first long-poll does
        return await client.get("/healthz")

    response = run_asgi(scenario)

    assert response.status_code == 200
    assert response.json() == {"status": "ok", "waiters": 0, "listener": "not used"}


def test_readyz_is_200_when_database_and_broker_answer(client, db):
    response = client.get("/readyz")

    assert response.status_code == 200
    assert response.json() == {"status": "ok", "checks": {"database": "ok", "broker": "ok"}}


def test_readyz_is_503_naming_the_broker_when_redis_is_unreachable(client, db, settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"

    response = client.get("/readyz")

    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    body = response.json()
    assert body["status"] == "unavailable"
    assert body["checks"]["database"] == "ok"
    assert body["checks"]["broker"] != "ok"
    assert "Connection" in body["checks"]["broker"]


def test_readyz_is_503_naming_the_database_when_it_is_unreachable(client, db, monkeypatch):
    from ops import health

    def broken_cursor():
        raise OSError("connection refused")

    with monkeypatch.context() as patched:
        patched.setattr(health.connection, "cursor", broken_cursor)
        response = client.get("/readyz")

    assert response.status_code == 503
    assert response.json()["checks"]["database"] == "OSError: connection refused"
    assert response.json()["checks"]["broker"] == "ok"


@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
def test_probes_answer_get_only(client, db, path):
    assert client.post(path).status_code == 405
