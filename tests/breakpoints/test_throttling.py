"""Rate limits: requests per token, anonymous requests per address, bad tokens per address.

429 answers use the error envelope (`throttled`) and carry Retry-After; every limit fails
open when its cache is unreachable.
"""

import httpx
import pytest

from breakpoints.tokens import token_create_for_agent
from config.asgi import application
from tests.aio import run_async
from tests.conftest import bearer_client

LIST = "/api/breakpoints"


def assert_throttled(response) -> None:
    assert response.status_code == 429
    assert response.json()["error"]["code"] == "throttled"
    assert int(response["Retry-After"]) >= 1


def test_a_token_over_its_rate_is_429_and_another_token_is_not(settings, agent_client, db):
    settings.BPM_THROTTLE_TOKEN_RATE = "3/min"
    other = bearer_client(token_create_for_agent(agent_id="agent-b")[1])

    answers = [agent_client.get(LIST).status_code for _ in range(3)]
    refused = agent_client.get(LIST)

    assert answers == [200, 200, 200]
    assert_throttled(refused)
    assert other.get(LIST).status_code == 200


def test_off_disables_the_token_rate(settings, agent_client):
    settings.BPM_THROTTLE_TOKEN_RATE = "off"

    assert {agent_client.get(LIST).status_code for _ in range(20)} == {200}


def test_anonymous_calls_are_limited_per_address(settings, client, db):
    settings.BPM_THROTTLE_ANON_RATE = "2/min"

    answers = [client.get("/api/schema").status_code for _ in range(2)]
    refused = client.get("/api/schema")
    elsewhere = client.get("/api/schema", REMOTE_ADDR="10.9.8.7")

    assert answers == [200, 200]
    assert refused.status_code == 429
    assert elsewhere.status_code == 200


def test_bad_tokens_from_one_address_are_cut_off(settings, client, db):
    settings.BPM_AUTH_FAILURES_PER_MINUTE = 3
    good = token_create_for_agent(agent_id="agent-a")[1]
    bad = {"HTTP_AUTHORIZATION": "Bearer bpm_guessed-token"}

    failures = [client.get(LIST, **bad).status_code for _ in range(3)]
    refused = client.get(LIST, **bad)
    even_a_good_one = client.get(LIST, HTTP_AUTHORIZATION=f"Bearer {good}")
    from_elsewhere = client.get(LIST, REMOTE_ADDR="10.9.8.7", HTTP_AUTHORIZATION=f"Bearer {good}")

    assert failures == [401, 401, 401]
    assert_throttled(refused)
    assert_throttled(even_a_good_one)
    assert from_elsewhere.status_code == 200


def test_a_token_verified_moments_ago_is_not_held_back_by_others_failures(settings, client, db):
    settings.BPM_AUTH_FAILURES_PER_MINUTE = 2
    good = {"HTTP_AUTHORIZATION": f"Bearer {token_create_for_agent(agent_id='agent-a')[1]}"}
    assert client.get(LIST, **good).status_code == 200

    for _ in range(3):
        client.get(LIST, HTTP_AUTHORIZATION="Bearer bpm_guessed-token")

    assert client.get(LIST, **good).status_code == 200


@pytest.mark.django_db(transaction=True)
def test_the_status_path_cuts_off_bad_tokens_the_same_way(settings, make_breakpoint):
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    settings.BPM_AUTH_FAILURES_PER_MINUTE = 2
    bp = make_breakpoint()

    async def scenario() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=application, client=("10.1.1.1", 5000))
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
            headers = {"Authorization": "Bearer bpm_guessed-token"}
            return [await c.get(f"{LIST}/{bp.pk}/status", headers=headers) for _ in range(3)]

    answers = run_async(scenario())

    assert [a.status_code for a in answers] == [401, 401, 429]
    assert answers[2].json()["error"]["code"] == "throttled"
    assert int(answers[2].headers["retry-after"]) >= 1


def test_limits_fail_open_when_the_cache_is_unreachable(settings, agent_client, client):
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "redis://127.0.0.1:1/0",  # nothing listens there
            "OPTIONS": {"socket_connect_timeout": 0.2, "socket_timeout": 0.2},
        }
    }
    settings.BPM_THROTTLE_TOKEN_RATE = "1/min"

    assert [agent_client.get(LIST).status_code for _ in range(3)] == [200, 200, 200]
    assert client.get(LIST, HTTP_AUTHORIZATION="Bearer bpm_guessed-token").status_code == 401


def test_a_forged_x_forwarded_for_does_not_buy_a_fresh_bucket(settings, client, db):
    """Without trusted proxies (BPM_NUM_PROXIES=0) the address is the connection's."""
    settings.BPM_AUTH_FAILURES_PER_MINUTE = 2
    bad = {"HTTP_AUTHORIZATION": "Bearer bpm_guessed-token"}

    answers = [
        client.get(LIST, HTTP_X_FORWARDED_FOR=f"203.0.113.{n}", **bad).status_code for n in range(3)
    ]

    assert answers == [401, 401, 429]
