"""Rate limits: requests per token, anonymous requests per address, bad tokens per address.

429 answers use the error envelope (`throttled`) and carry Retry-After; every limit fails
open when its cache is unreachable. A token that verifies is never refused for what others
at its address sent; a malformed one costs no query and is not counted.
"""

import time
from types import SimpleNamespace

import httpx
import pytest
from django.db.backends.utils import CursorWrapper

from accounts.tokens import token_create_for_agent, token_create_for_user
from infra import ratelimits
from infra.ratelimits import WINDOW_SECONDS
from tests.conftest import bearer_client
from tests.support.aio import run_asgi
from tests.support.token_forms import well_formed_token, with_bad_checksum

pytest_plugins = ["tests.support.throttling"]  # counters: local memory, and Redis

LIST = "/api/breakpoints"


@pytest.fixture(autouse=True)
def _one_minute_window(monkeypatch) -> None:
    """The limits count in fixed minutes: a flood that crossed a minute's end would start
    counting again halfway (the tests here then failed about once in a hundred runs). Their
    clock is held in the middle of one minute."""
    middle = (int(time.time()) // WINDOW_SECONDS) * WINDOW_SECONDS + WINDOW_SECONDS / 2
    monkeypatch.setattr(ratelimits, "time", SimpleNamespace(time=lambda: middle))


def bearer(raw: str) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {raw}"}


def queries_on_every_thread(monkeypatch) -> list[str]:
    """The SQL run from now on by any thread (the status path reads on its bridge threads)."""
    seen: list[str] = []
    original = CursorWrapper._execute_with_wrappers

    def spy(self, sql, *args, **kwargs):
        seen.append(sql)
        return original(self, sql, *args, **kwargs)

    monkeypatch.setattr(CursorWrapper, "_execute_with_wrappers", spy)
    return seen


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


def test_bad_tokens_from_one_address_are_cut_off_but_never_a_valid_one(
    settings, client, db, counters
):
    settings.BPM_AUTH_FAILURES_PER_MINUTE = 3
    good = token_create_for_agent(agent_id="agent-a")[1]
    bad = bearer(well_formed_token())

    failures = [client.get(LIST, **bad).status_code for _ in range(3)]
    refused = client.get(LIST, **bad)
    another_bad_one = client.get(LIST, **bearer(well_formed_token()))
    a_good_one = client.get(LIST, **bearer(good))

    assert failures == [401, 401, 401]
    assert_throttled(refused)
    assert_throttled(another_bad_one)
    assert a_good_one.status_code == 200


def test_a_valid_token_is_not_locked_out_by_another_clients_bad_tokens(
    settings, client, reviewer, counters
):
    """Issue 18: after 20 bad tokens from a shared address, every token that this process had
    not verified in the last seconds got 429 from it for up to a minute."""
    settings.BPM_AUTH_FAILURES_PER_MINUTE = 20
    flood = [client.get(LIST, **bearer(well_formed_token())).status_code for _ in range(25)]
    fresh = token_create_for_user(user=reviewer)[1]

    assert flood == [401] * 20 + [429] * 5
    assert client.get(LIST, **bearer(fresh)).status_code == 200


def test_malformed_tokens_are_not_counted(settings, client, db):
    settings.BPM_AUTH_FAILURES_PER_MINUTE = 1
    raw = token_create_for_agent(agent_id="agent-a")[1]

    answers = [client.get(LIST, **bearer(with_bad_checksum(raw))).status_code for _ in range(5)]

    assert answers == [401] * 5


def test_a_token_verified_moments_ago_is_not_held_back_by_others_failures(settings, client, db):
    settings.BPM_AUTH_FAILURES_PER_MINUTE = 2
    good = bearer(token_create_for_agent(agent_id="agent-a")[1])
    assert client.get(LIST, **good).status_code == 200

    for _ in range(3):
        client.get(LIST, **bearer(well_formed_token()))

    assert client.get(LIST, **good).status_code == 200


def status_answers(path: str, tokens: list[str]) -> list[httpx.Response]:
    """GET `path` on the ASGI status handler once per token, in order, from 10.1.1.1."""

    async def scenario(client: httpx.AsyncClient) -> list[httpx.Response]:
        return [
            await client.get(path, headers={"Authorization": f"Bearer {raw}"}) for raw in tokens
        ]

    return run_asgi(scenario, client=("10.1.1.1", 5000))


@pytest.mark.django_db(transaction=True)
def test_the_status_path_cuts_off_bad_tokens_the_same_way(settings, make_breakpoint, counters):
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    settings.BPM_AUTH_FAILURES_PER_MINUTE = 2
    bp = make_breakpoint()
    fresh = token_create_for_agent(agent_id="agent-a")[1]

    answers = status_answers(f"{LIST}/{bp.pk}/status", [well_formed_token()] * 3 + [fresh])

    assert [a.status_code for a in answers] == [401, 401, 429, 200]
    assert answers[2].json()["error"]["code"] == "throttled"
    assert int(answers[2].headers["retry-after"]) >= 1


@pytest.mark.django_db(transaction=True)
def test_the_status_path_refuses_a_bad_checksum_without_a_query(
    settings, make_breakpoint, monkeypatch
):
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    settings.BPM_AUTH_FAILURES_PER_MINUTE = 1
    path = f"{LIST}/{make_breakpoint().pk}/status"
    valid = token_create_for_agent(agent_id="agent-a")[1]
    queries = queries_on_every_thread(monkeypatch)

    answers = status_answers(path, [with_bad_checksum(valid)] * 3)
    queries_when_refused = list(queries)
    status_answers(path, [valid])

    assert [a.status_code for a in answers] == [401, 401, 401]
    assert answers[0].json()["error"]["code"] == "not_authenticated"
    assert queries_when_refused == []
    assert queries  # the spy does see the bridge threads: a valid token was looked up there


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
    assert client.get(LIST, **bearer(well_formed_token())).status_code == 401


def test_a_forged_x_forwarded_for_does_not_buy_a_fresh_bucket(settings, client, db):
    """Without trusted proxies (BPM_NUM_PROXIES=0) the address is the connection's."""
    settings.BPM_AUTH_FAILURES_PER_MINUTE = 2
    bad = bearer(well_formed_token())

    answers = [
        client.get(LIST, HTTP_X_FORWARDED_FOR=f"203.0.113.{n}", **bad).status_code for n in range(3)
    ]

    assert answers == [401, 401, 429]
