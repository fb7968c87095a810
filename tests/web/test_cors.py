"""CORS for browser-based tools (issue 13): off by default; BPM_CORS_ORIGINS allows listed
origins on /api/ only, with tokens (never cookies); a preflight never needs a token; the
status handler in front of Django (long-polls) answers with the same headers."""

import os
import subprocess
import sys

import httpx
import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import Client

from accounts.tokens import token_create_for_agent
from infra.environment import Env
from tests.support.aio import run_asgi
from tests.support.project import ROOT

TOOL = "https://tool.example"
DEV_TOOL = "http://localhost:5173"
STRANGER = "https://evil.example"
AGENT_HEADERS = ("authorization", "content-type", "idempotency-key", "x-request-id")


@pytest.fixture
def cors_on(settings):
    settings.CORS_ALLOWED_ORIGINS = [TOOL, DEV_TOOL]


def preflight(path: str, origin: str, method: str = "POST") -> object:
    """What a browser sends before a cross-origin call with an Authorization header."""
    return Client().options(
        path,
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": method,
            "Access-Control-Request-Headers": "authorization,content-type,idempotency-key",
        },
    )


def asgi_get(path: str, **headers: str) -> httpx.Response:
    return run_asgi(lambda client: client.get(path, headers=headers))


# --- preflight ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path", ["/api/breakpoints", "/api/breakpoints/", "/api/breakpoints/bp-x/status?wait=30"]
)
def test_a_preflight_from_a_listed_origin_is_answered_without_a_token(cors_on, db, path):
    response = preflight(path, TOOL, method="GET" if "status" in path else "POST")

    assert response.status_code == 200
    assert response["Access-Control-Allow-Origin"] == TOOL
    allowed = {h.strip() for h in response["Access-Control-Allow-Headers"].split(",")}
    assert set(AGENT_HEADERS) <= allowed
    assert {"GET", "POST"} <= {
        m.strip() for m in response["Access-Control-Allow-Methods"].split(",")
    }
    assert "Access-Control-Allow-Credentials" not in response
    assert response["X-Request-ID"]


def test_every_listed_origin_is_allowed_each_one_by_name(cors_on, db):
    response = preflight("/api/breakpoints", DEV_TOOL)

    assert response["Access-Control-Allow-Origin"] == DEV_TOOL


def test_a_preflight_from_an_unlisted_origin_gets_no_allow_origin(cors_on, db):
    response = preflight("/api/breakpoints", STRANGER)

    assert "Access-Control-Allow-Origin" not in response
    assert "Access-Control-Allow-Headers" not in response


def test_cors_is_off_by_default(db, agent_token, settings):
    assert settings.CORS_ALLOWED_ORIGINS == []
    assert "Access-Control-Allow-Origin" not in preflight("/api/breakpoints", TOOL)
    response = Client().get(
        "/api/breakpoints", headers={"Origin": TOOL, "Authorization": f"Bearer {agent_token}"}
    )
    assert response.status_code == 200
    assert "Access-Control-Allow-Origin" not in response


# --- the calls themselves ----------------------------------------------------------------


def test_a_cross_origin_call_from_a_listed_origin_can_read_the_answer(cors_on, agent_client):
    response = agent_client.post(
        "/api/breakpoints",
        {"payload": {"question": "Ship?"}},
        format="json",
        headers={"Origin": TOOL, "Idempotency-Key": "k-1"},
    )

    assert response.status_code == 201
    assert response["Access-Control-Allow-Origin"] == TOOL
    exposed = {h.strip().lower() for h in response["Access-Control-Expose-Headers"].split(",")}
    assert exposed == {"x-request-id", "retry-after"}
    assert "origin" in response["Vary"].lower()
    assert "Access-Control-Allow-Credentials" not in response


def test_an_error_is_readable_by_a_listed_origin_too(cors_on, db):
    response = Client().get("/api/breakpoints", headers={"Origin": TOOL})

    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"
    assert response["Access-Control-Allow-Origin"] == TOOL


def test_an_unlisted_origin_gets_no_allow_origin_on_calls(cors_on, agent_client):
    response = agent_client.get("/api/breakpoints", headers={"Origin": STRANGER})

    assert response.status_code == 200
    assert "Access-Control-Allow-Origin" not in response


def test_only_api_paths_answer_cross_origin(cors_on, db):
    response = Client().get("/admin/login/", headers={"Origin": TOOL})

    assert response.status_code == 200
    assert "Access-Control-Allow-Origin" not in response


# --- the status handler in front of Django (ASGI) ----------------------------------------


@pytest.fixture
def live_token(transactional_db, settings) -> str:
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    return token_create_for_agent(agent_id="agent-a")[1]


def test_the_long_poll_status_answer_carries_the_cors_headers(cors_on, live_token, make_breakpoint):
    bp = make_breakpoint()

    response = asgi_get(
        f"/api/breakpoints/{bp.pk}/status?wait=0",
        Authorization=f"Bearer {live_token}",
        Origin=TOOL,
    )

    assert response.status_code == 200 and response.json()["status"] == "waiting"
    assert response.headers.get_list("access-control-allow-origin") == [TOOL]
    exposed = response.headers["access-control-expose-headers"].lower()
    assert "x-request-id" in exposed and "retry-after" in exposed
    assert "origin" in response.headers["vary"].lower()


def test_a_status_error_from_the_handler_is_readable_cross_origin(cors_on, live_token):
    response = asgi_get(
        "/api/breakpoints/bp-missing/status", Authorization=f"Bearer {live_token}", Origin=TOOL
    )

    assert response.status_code == 404
    assert response.headers["access-control-allow-origin"] == TOOL


def test_the_status_handler_refuses_an_unlisted_origin(cors_on, live_token, make_breakpoint):
    bp = make_breakpoint()

    response = asgi_get(
        f"/api/breakpoints/{bp.pk}/status", Authorization=f"Bearer {live_token}", Origin=STRANGER
    )

    assert response.status_code == 200
    assert "access-control-allow-origin" not in response.headers


def test_the_status_handler_sends_no_cors_headers_by_default(live_token, make_breakpoint):
    bp = make_breakpoint()

    response = asgi_get(
        f"/api/breakpoints/{bp.pk}/status", Authorization=f"Bearer {live_token}", Origin=TOOL
    )

    assert response.status_code == 200
    assert not [name for name in response.headers if name.startswith("access-control-")]


def test_answers_from_django_through_asgi_carry_the_headers_once(
    cors_on, live_token, make_breakpoint
):
    bp = make_breakpoint()

    answer = asgi_get(
        f"/api/breakpoints/{bp.pk}", Authorization=f"Bearer {live_token}", Origin=TOOL
    )
    check = run_asgi(
        lambda client: client.options(
            f"/api/breakpoints/{bp.pk}/status",
            headers={"Origin": TOOL, "Access-Control-Request-Method": "GET"},
        )
    )

    assert answer.status_code == 200
    assert answer.headers.get_list("access-control-allow-origin") == [TOOL]
    assert check.status_code == 200
    assert check.headers.get_list("access-control-allow-origin") == [TOOL]


# --- configuration -----------------------------------------------------------------------


def test_bpm_cors_origins_lists_origins(monkeypatch):
    monkeypatch.setenv("BPM_CORS_ORIGINS", f" {TOOL} ,{DEV_TOOL},")

    assert Env().origins("BPM_CORS_ORIGINS") == [TOOL, DEV_TOOL]


@pytest.mark.parametrize(
    "value",
    ["tool.example", "https://tool.example/", "https://tool.example/app", "ftp://x.example"],
)
def test_bpm_cors_origins_refuses_what_is_not_an_origin(monkeypatch, value):
    monkeypatch.setenv("BPM_CORS_ORIGINS", value)

    with pytest.raises(ImproperlyConfigured, match="BPM_CORS_ORIGINS"):
        Env().origins("BPM_CORS_ORIGINS")


def test_the_settings_read_bpm_cors_origins_from_the_environment():
    env = {**os.environ, "DEBUG": "0", "SECRET_KEY": "x", "BPM_CORS_ORIGINS": f"{TOOL},{DEV_TOOL}"}
    code = "from django.conf import settings; print(settings.CORS_ALLOWED_ORIGINS)"

    result = subprocess.run(
        [sys.executable, "-c", f"import django; django.setup(); {code}"],
        cwd=ROOT,
        env={**env, "DJANGO_SETTINGS_MODULE": "config.settings"},
        capture_output=True,
        text=True,
        check=True,
    )

    assert result.stdout.strip().splitlines()[-1] == repr([TOOL, DEV_TOOL])
