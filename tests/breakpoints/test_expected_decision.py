"""expectedDecision: how long a person usually takes, from the last 90 days of human decisions.

The history is made through the API (an agent creates, a reviewer or an admin decides);
each decision's time is then set on its row (created_at moved back from its releasedAt),
as a history of real waits would have left it. The aggregate is computed by the beat
task's function, and the expected figures here are computed independently
(statistics.quantiles, whose "inclusive" method is PostgreSQL's percentile_cont).
"""

import statistics
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from prometheus_client import REGISTRY

from breakpoints.models import Breakpoint, DecisionTimeStat
from breakpoints.representation.expected_decision import MIN_SAMPLES, aggregate
from breakpoints.tasks import refresh_decision_times
from core.actors import Actor
from policies.autoapproval import rule_create
from tests.support.aio import run_asgi
from tests.support.threads import ConnectionNotingLock, run_together

SEATS = ["tech-lead", "ops-lead"]


def ask(client, *, key: str | None = None, expert: list[str] | None = None) -> dict:
    """A new breakpoint through the API: its create answer."""
    payload: dict = {"question": "Ship it?"}
    if key:
        payload["breakpointId"] = key
    if expert:
        payload["expert"] = expert
    response = client.post("/api/breakpoints", {"payload": payload}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def decide(agent_client, decider, *, seconds: float, approved: bool = True, **asked) -> str:
    """A breakpoint asked and decided through the API, that took `seconds` to decide."""
    breakpoint_id = ask(agent_client, **asked)["breakpointId"]
    body = {"release": True, "approved": approved, "comment": "" if approved else "No."}
    response = decider.post(f"/api/breakpoints/{breakpoint_id}/feedback", body, format="json")
    assert response.status_code == 201, response.content
    row = Breakpoint.objects.get(pk=breakpoint_id)
    assert row.released_at is not None
    Breakpoint.objects.filter(pk=breakpoint_id).update(
        created_at=row.released_at - timedelta(seconds=seconds)
    )
    return breakpoint_id


def expected(durations: list[float], basis: str) -> dict:
    deciles = statistics.quantiles(durations, n=10, method="inclusive")
    return {
        "p50Seconds": round(deciles[4]),
        "p90Seconds": round(deciles[8]),
        "samples": len(durations),
        "basis": basis,
    }


def shown(agent_client, breakpoint_id: str) -> dict:
    """expectedDecision as the detail, the status poll and the many-status poll show it
    (asserting that they agree)."""
    detail = agent_client.get(f"/api/breakpoints/{breakpoint_id}").json()["expectedDecision"]
    status = agent_client.get(f"/api/breakpoints/{breakpoint_id}/status").json()
    many = agent_client.get(f"/api/breakpoints/status?id={breakpoint_id}").json()["results"][0]
    assert detail == status["expectedDecision"] == many["expectedDecision"]
    return detail


# Durations (seconds) with no ties, so a wrong interpolation shows.
KEY_DURATIONS = [60 + 37 * i + (i * i) % 11 for i in range(MIN_SAMPLES)]
SEAT_DURATIONS = [600 + 113 * i for i in range(MIN_SAMPLES)]


def test_fewer_than_twenty_human_decisions_give_no_expectation(
    agent_client, reviewer_client, admin_client
):
    """19 human decisions of a key: null on every level. Cancelled and expired ones, and
    an auto-approval, are nobody's decision and do not make up the 20th."""
    for seconds in KEY_DURATIONS[:19]:
        decide(agent_client, reviewer_client, key="deploy.prod", seconds=seconds)
    cancelled = ask(agent_client, key="deploy.prod")["breakpointId"]
    agent_client.post(f"/api/breakpoints/{cancelled}/cancel", {}, format="json")
    expired = ask(agent_client, key="deploy.prod")["breakpointId"]
    assert admin_client.post(f"/api/breakpoints/{expired}/expire").status_code == 200
    rule_create(actor=Actor.system("test"), pattern="auto.*")
    assert ask(agent_client, key="auto.ok")["status"] == "released"

    assert refresh_decision_times() == 0
    created = ask(agent_client, key="deploy.prod")

    assert created["expectedDecision"] is None
    assert shown(agent_client, created["breakpointId"]) is None
    assert not DecisionTimeStat.objects.exists()


def test_twenty_decisions_of_the_same_key_give_its_figures(agent_client, reviewer_client):
    """With the 20th the key's own figures appear: on the create answer, the
    representation and both status polls; null again once it is decided."""
    for number, seconds in enumerate(KEY_DURATIONS):
        decide(
            agent_client,
            reviewer_client,
            key="deploy.prod",
            seconds=seconds,
            approved=number % 3 > 0,
        )
    refresh_decision_times()

    created = ask(agent_client, key="deploy.prod")

    assert created["expectedDecision"] == expected(KEY_DURATIONS, "key")
    assert shown(agent_client, created["breakpointId"]) == expected(KEY_DURATIONS, "key")
    reviewer_client.post(
        f"/api/breakpoints/{created['breakpointId']}/feedback", {"release": True}, format="json"
    )
    assert shown(agent_client, created["breakpointId"]) is None


def test_the_key_comes_first_then_the_expert_seats_then_all(agent_client, admin_client):
    """A key with its own 20 decisions uses them; a new key routed to the same seats (in
    any order) uses the seats' decisions; other seats, no seats, or no key at all: every
    human decision."""
    for seconds in KEY_DURATIONS:
        decide(agent_client, admin_client, key="deploy.prod", expert=SEATS, seconds=seconds)
    for number, seconds in enumerate(SEAT_DURATIONS):
        decide(
            agent_client, admin_client, key=f"migrate.db-{number}", expert=SEATS, seconds=seconds
        )
    for number, seconds in enumerate(KEY_DURATIONS):
        decide(agent_client, admin_client, key=f"misc.q-{number}", seconds=seconds * 7)
    refresh_decision_times()
    routed = KEY_DURATIONS + SEAT_DURATIONS
    everything = routed + [seconds * 7 for seconds in KEY_DURATIONS]

    same_key = ask(agent_client, key="deploy.prod", expert=SEATS)
    same_seats = ask(agent_client, key="brand.new", expert=list(reversed(SEATS)))
    other_seats = ask(agent_client, key="brand.new", expert=["ops-lead"])
    unrouted = ask(agent_client, key="brand.new")
    unnamed = ask(agent_client)

    assert same_key["expectedDecision"] == expected(KEY_DURATIONS, "key")
    assert same_seats["expectedDecision"] == expected(routed, "experts")
    for answer in (other_seats, unrouted, unnamed):
        assert answer["expectedDecision"] == expected(everything, "all")
    assert shown(agent_client, same_seats["breakpointId"]) == expected(routed, "experts")


def test_the_refresh_computes_p50_and_p90_of_human_decisions_of_the_last_90_days(
    agent_client, reviewer_client
):
    """Each group's figures are percentile_cont's (interpolated), over the decisions a
    person made on breakpoints of the last 90 days: a trigger's release, a timeout
    policy's and an older decision are left out."""
    durations = [5.0, 17.0, 30.0, 31.0, 44.0, 90.0, 91.0, 120.0, 121.0, 300.0, 301.0]
    durations += [450.0, 600.0, 601.0, 900.0, 1800.0, 1801.0, 3600.0, 7200.0, 86400.0, 9.5]
    for seconds in durations:
        decide(agent_client, reviewer_client, key="report.weekly", seconds=seconds)
    by_trigger = decide(agent_client, reviewer_client, key="report.weekly", seconds=1)
    by_policy = decide(agent_client, reviewer_client, key="report.weekly", seconds=2)
    too_old = decide(agent_client, reviewer_client, key="report.weekly", seconds=3)
    for breakpoint_id, responder in (
        (by_trigger, "trigger:ci-green"),
        (by_policy, "timeout-policy"),
    ):
        row = Breakpoint.objects.get(pk=breakpoint_id)
        row.result = {**row.result, "respondedBy": responder}
        row.save(update_fields=["result"])
    Breakpoint.objects.filter(pk=too_old).update(created_at=timezone.now() - timedelta(days=91))

    assert refresh_decision_times() == 2  # the key's group and all

    deciles = statistics.quantiles(durations, n=10, method="inclusive")
    stats = {row.basis: row for row in DecisionTimeStat.objects.all()}
    assert set(stats) == {"key", "all"}
    for row in stats.values():
        assert row.samples == len(durations) == 21
        assert row.p50_seconds == pytest.approx(deciles[4], abs=1e-6)
        assert row.p90_seconds == pytest.approx(deciles[8], abs=1e-6)
    assert stats["key"].value == "report.weekly"


def test_a_refresh_replaces_the_aggregate(agent_client, reviewer_client):
    for seconds in KEY_DURATIONS:
        decide(agent_client, reviewer_client, key="deploy.prod", seconds=seconds)
    refresh_decision_times()
    Breakpoint.objects.filter(key="deploy.prod").update(
        created_at=timezone.now() - timedelta(days=100)
    )

    assert refresh_decision_times() == 0
    assert not DecisionTimeStat.objects.exists()
    assert ask(agent_client, key="deploy.prod")["expectedDecision"] is None


def test_the_status_poll_reads_no_more_for_its_expectation(
    agent_client, reviewer_client, django_assert_num_queries
):
    """The poll is one query with or without figures: they come from this process's copy
    of the aggregate, read once per CACHE_SECONDS (here by the refresh itself)."""
    waiting = ask(agent_client, key="deploy.prod")["breakpointId"]
    url = f"/api/breakpoints/{waiting}/status"
    agent_client.get(url)  # warm-up: the token is verified, then trusted for a while
    with CaptureQueriesContext(connection) as without_figures:
        assert agent_client.get(url).json()["expectedDecision"] is None
    queries = len(without_figures.captured_queries)  # read now: a request clears the log
    for seconds in KEY_DURATIONS:
        decide(agent_client, reviewer_client, key="deploy.prod", seconds=seconds)
    refresh_decision_times()

    with django_assert_num_queries(queries):
        assert agent_client.get(url).json()["expectedDecision"]["basis"] == "key"
    assert queries == 1


def test_a_process_reads_the_aggregate_once_then_holds_it(
    agent_client, reviewer_client, django_assert_num_queries
):
    """Another process's refresh reaches this one at its next read: one query, then none
    until CACHE_SECONDS pass."""
    for seconds in KEY_DURATIONS:
        decide(agent_client, reviewer_client, key="deploy.prod", seconds=seconds)
    refresh_decision_times()
    waiting = ask(agent_client, key="deploy.prod")["breakpointId"]
    url = f"/api/breakpoints/{waiting}/status"
    agent_client.get(url)
    aggregate.forget()  # as a web process that has not read it yet

    with CaptureQueriesContext(connection) as cold:
        assert agent_client.get(url).json()["expectedDecision"]["samples"] == MIN_SAMPLES
    # The aggregate's read has a savepoint inside a transaction (the test's own here; a
    # poll runs in none): the queries are the aggregate, once, and the status row.
    read = [q["sql"] for q in cold.captured_queries if "SAVEPOINT" not in q["sql"]]
    assert len(read) == 2 and "decisiontimestat" in read[0]
    with django_assert_num_queries(1):
        assert agent_client.get(url).json()["expectedDecision"]["samples"] == MIN_SAMPLES


def _measured(basis: str) -> tuple[float, float, float]:
    labels = {"basis": basis}
    return tuple(  # type: ignore[return-value]
        REGISTRY.get_sample_value(name, labels) or 0.0
        for name in (
            "bpm_decision_seconds_count",
            "bpm_decision_seconds_vs_expected_p50_count",
            "bpm_decisions_past_expected_p90_total",
        )
    )


def test_each_human_decision_is_measured_against_what_was_expected(
    agent_client, reviewer_client, client, django_capture_on_commit_callbacks
):
    """Expected vs actual: each human release counts its time, and its time over the
    expected p50 (past the p90 counted apart); /metrics shows the expected figures."""
    for seconds in KEY_DURATIONS:
        decide(agent_client, reviewer_client, key="deploy.prod", seconds=seconds)
    refresh_decision_times()
    before, unexpected = _measured("key"), _measured("none")
    quick = ask(agent_client, key="deploy.prod")["breakpointId"]
    slow = ask(agent_client, key="deploy.prod")["breakpointId"]
    Breakpoint.objects.filter(pk=slow).update(created_at=timezone.now() - timedelta(hours=10))
    with django_capture_on_commit_callbacks(execute=True):
        for breakpoint_id in (quick, slow):
            reviewer_client.post(
                f"/api/breakpoints/{breakpoint_id}/feedback", {"release": True}, format="json"
            )

    after = _measured("key")
    assert [after[i] - before[i] for i in range(3)] == [2, 2, 1]  # only the slow one past p90
    assert _measured("none") == unexpected
    response = client.get("/metrics")
    assert response.status_code == 200
    text = response.content.decode()
    everything = expected(KEY_DURATIONS, "all")
    assert "bpm_decision_time_expected_samples 20.0" in text
    assert 'bpm_decision_time_expected_seconds{quantile="0.9"}' in text
    p50 = DecisionTimeStat.objects.get(basis="all").p50_seconds
    assert f'bpm_decision_time_expected_seconds{{quantile="0.5"}} {p50}' in text
    assert round(p50) == everything["p50Seconds"]


@pytest.mark.django_db(transaction=True)
def test_the_waiting_handler_answers_it_even_when_its_copy_is_stale(
    agent_client, agent_token, reviewer_client, settings
):
    """The ASGI status handler builds its answer on the event loop, where no query may run:
    its status read (on a bridge thread) reads the aggregate when this process's copy is
    stale, so the answer has the figures, for one id and for many, and never fails."""
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    for seconds in KEY_DURATIONS:
        decide(agent_client, reviewer_client, key="deploy.prod", seconds=seconds)
    refresh_decision_times()
    waiting = ask(agent_client, key="deploy.prod")["breakpointId"]
    headers = {"Authorization": f"Bearer {agent_token}"}

    async def poll(client):
        aggregate.forget()  # as a web process whose copy is older than CACHE_SECONDS
        one = await client.get(f"/api/breakpoints/{waiting}/status", headers=headers)
        aggregate.forget()
        many = await client.get(f"/api/breakpoints/status?id={waiting}", headers=headers)
        return one, many

    one, many = run_asgi(poll)

    assert one.status_code == 200 and many.status_code == 200, (one.text, many.text)
    assert one.json()["expectedDecision"] == expected(KEY_DURATIONS, "key")
    assert many.json()["results"][0]["expectedDecision"] == expected(KEY_DURATIONS, "key")


def test_an_unreadable_aggregate_means_no_figures_not_a_failed_answer(agent_client, monkeypatch):
    """As before its migration ran: the create (whose transaction reads the aggregate for
    its webhook body) and the poll still answer, with expectedDecision null."""
    monkeypatch.setattr(DecisionTimeStat._meta, "db_table", "no_such_table_yet")
    aggregate.forget()

    created = ask(agent_client, key="deploy.prod")

    assert created["expectedDecision"] is None
    assert shown(agent_client, created["breakpointId"]) is None


@pytest.mark.django_db(transaction=True)
def test_the_aggregate_is_read_by_a_thread_that_already_holds_its_connection(monkeypatch):
    """Its lock is taken with the connection in hand (infra.db.locking): the threads waiting for
    it may each hold one of the pool's connections."""
    aggregate.forget()  # read again at the next use, as after CACHE_SECONDS
    noting = ConnectionNotingLock()
    monkeypatch.setattr(aggregate, "_lock", noting)

    got = run_together({"fresh thread": aggregate.current})

    assert got == {"fresh thread": {}}  # no figures yet: an empty aggregate was read
    assert noting.connected == [True]
