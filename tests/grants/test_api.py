"""The grants through the API: a feedback's `grant` (given with the approval, or refused with
it), GET /api/grants (own; admins all; live or ended; paginated), GET and DELETE
/api/grants/{id}."""

import pytest

from audit.models import GrantEvent
from breakpoints.models import Breakpoint, Feedback
from grants.models import Grant
from tests.support.api import assert_error
from tests.support.factories import ReviewerFactory
from tests.support.grants import create, granted, payload

GRANT = {"scope": "key", "uses": 3, "expiresInSeconds": 600}


def approve(client, bp, grant, **body):
    body = {"comment": "Go", "release": True, "grant": grant, **body}
    return client.post(f"/api/breakpoints/{bp.pk}/feedback", body, format="json")


def test_an_approval_with_a_grant_answers_it(reviewer_client):
    bp = create(run_id="r-1")
    values = {"path": {"prefix": "/srv/app/"}}

    answer = approve(reviewer_client, bp, {**GRANT, "scope": "run", "values": values})

    assert answer.status_code == 201, answer.content
    body = answer.json()
    assert body["status"] == "released"
    grant = body["grant"]
    assert set(grant) == {
        "id", "scope", "agentId", "runId", "key", "values", "uses", "usesLeft", "expiresAt",
        "createdAt", "grantedBy", "breakpointId", "status", "revokedAt", "revokedBy",
    }  # fmt: skip
    assert grant | {"id": None, "createdAt": None, "expiresAt": None} == {
        "id": None,
        "scope": "run",
        "agentId": "agent-a",
        "runId": "r-1",
        "key": "deploy.api",
        "values": values,
        "uses": 3,
        "usesLeft": 3,
        "expiresAt": None,
        "createdAt": None,
        "grantedBy": "alice",
        "breakpointId": bp.pk,
        "status": "live",
        "revokedAt": None,
        "revokedBy": None,
    }
    assert grant["expiresAt"].endswith("Z")


@pytest.mark.parametrize(
    ("grant", "field"),
    [
        ({"scope": "session", "uses": 1}, "grant.scope"),
        ({"scope": "key"}, "grant"),
        ({"scope": "key", "uses": 0}, "grant.uses"),
        ({"scope": "key", "uses": 1001}, "grant.uses"),
        ({"scope": "key", "uses": True}, "grant.uses"),
        ({"scope": "key", "expiresInSeconds": 86401}, "grant.expiresInSeconds"),
        ({"scope": "key", "uses": 1, "forever": True}, "grant.forever"),
        ({"scope": "key", "uses": 1, "values": []}, "grant.values"),
        ({"scope": "key", "uses": 1, "values": {"p": {"prefix": "x" * 1001}}}, "grant.values.p"),
        ({"scope": "key", "uses": 1, "values": {"p": {"equals": {"a": 1}}}}, "grant.values.p"),
        ({"scope": "key", "uses": 1, "values": {"p": {"like": "x"}}}, "grant.values.p"),
        (
            {"scope": "key", "uses": 1, "values": {f"f{n}": {"equals": n} for n in range(21)}},
            "grant.values",
        ),
        ("all", "grant"),
    ],
)
def test_a_malformed_grant_is_400_and_nothing_is_decided(reviewer_client, grant, field):
    bp = create()

    error = assert_error(approve(reviewer_client, bp, grant), 400)

    assert field in error["details"]
    bp.refresh_from_db()
    assert bp.status == "waiting" and not Feedback.objects.exists()
    assert not Grant.objects.exists()


def test_the_longest_grant_follows_the_setting(reviewer_client, settings):
    settings.BPM_GRANT_MAX_SECONDS = 60

    assert_error(approve(reviewer_client, create(), {"scope": "key", "expiresInSeconds": 61}), 400)
    assert (
        approve(reviewer_client, create(), {"scope": "key", "expiresInSeconds": 60}).status_code
        == 201
    )


@pytest.mark.parametrize(
    ("fields", "body", "detail"),
    [
        ({}, {"approved": False}, "grant"),  # a rejection
        ({}, {"release": False}, "grant"),  # a comment
        ({"payload": payload(presentAlwaysApprove=False)}, {}, "grant"),
        ({"payload": {"question": "Deploy?"}}, {}, "grant"),  # no key of its own
        ({"payload": payload(strategy="collect-all", expert=["alice"])}, {}, "grant"),
    ],
)
def test_a_grant_this_decision_may_not_carry_is_400_with_nothing_written(
    reviewer_client, fields, body, detail
):
    bp = create(**fields)

    error = assert_error(approve(reviewer_client, bp, GRANT, **body), 400)

    assert detail in error["details"]
    bp.refresh_from_db()
    assert bp.status == "waiting" and bp.votes == []
    assert not Feedback.objects.exists() and not Grant.objects.exists()
    assert not GrantEvent.objects.exists()


def test_a_run_grant_needs_a_run(reviewer_client):
    error = assert_error(approve(reviewer_client, create(), {**GRANT, "scope": "run"}), 400)

    assert "grant.scope" in error["details"]
    assert not Grant.objects.exists()


@pytest.mark.parametrize("service_wide", [False, True])
def test_no_grant_under_four_eyes(reviewer_client, settings, service_wide):
    ReviewerFactory(username="someone-else")
    if service_wide:
        settings.BPM_PREVENT_SELF_REVIEW = True
        bp = create(requested_by="someone-else")
    else:
        bp = create(payload=payload(preventSelfReview=True), requested_by="someone-else")

    error = assert_error(approve(reviewer_client, bp, GRANT), 403, "permission_denied")

    assert error["details"]["rule"] == "preventSelfReview"
    bp.refresh_from_db()
    assert bp.status == "waiting" and not Grant.objects.exists()
    # The reviewer may retry without it.
    retried = reviewer_client.post(
        f"/api/breakpoints/{bp.pk}/feedback", {"comment": "Go", "release": True}, format="json"
    )
    assert retried.status_code == 201


# --- /api/grants ------------------------------------------------------------------------


@pytest.fixture
def three_grants(reviewer, admin_user):
    """Two of alice's (the older one revoked), one of the admin's."""
    bob = ReviewerFactory(username="bob")
    revoked = granted(reviewer, create(), uses=2)
    Grant.objects.filter(pk=revoked.pk).update(
        revoked_at=revoked.created_at, ended_at=revoked.created_at
    )
    live = granted(reviewer, create(payload=payload("deploy.db")), uses=2)
    admins = granted(admin_user, create(payload=payload("deploy.web")), uses=2)
    granted(bob, create(payload=payload("deploy.cdn")), uses=2)
    return {"revoked": revoked.pk, "live": live.pk, "admins": admins.pk}


def ids(answer) -> list[str]:
    assert answer.status_code == 200, answer.content
    return [grant["id"] for grant in answer.json()["results"]]


def test_a_reviewer_lists_her_own_newest_first(reviewer_client, three_grants):
    assert ids(reviewer_client.get("/api/grants")) == [
        three_grants["live"],
        three_grants["revoked"],
    ]
    assert ids(reviewer_client.get("/api/grants?status=live")) == [three_grants["live"]]
    assert ids(reviewer_client.get("/api/grants?status=ended")) == [three_grants["revoked"]]


def test_an_admin_lists_every_grant(admin_client, three_grants):
    assert len(ids(admin_client.get("/api/grants"))) == 4


def test_the_list_is_paginated(admin_client, three_grants):
    first = admin_client.get("/api/grants?pageSize=3")
    body = first.json()
    assert len(body["results"]) == 3 and body["next"]

    rest = admin_client.get(body["next"])

    assert len(ids(rest)) == 1
    assert set(ids(first)).isdisjoint(ids(rest))


def test_the_list_reads_a_fixed_number_of_queries(
    admin_client, three_grants, django_assert_max_num_queries
):
    with django_assert_max_num_queries(6):
        admin_client.get("/api/grants")


def test_an_unknown_status_is_400(reviewer_client, three_grants):
    assert_error(reviewer_client.get("/api/grants?status=maybe"), 400)


def test_agents_and_people_without_a_role_get_403(agent_client, nobody_client, three_grants):
    for client in (agent_client, nobody_client):
        assert_error(client.get("/api/grants"), 403, "permission_denied")
        assert_error(client.get(f"/api/grants/{three_grants['live']}"), 403, "permission_denied")
        assert_error(client.delete(f"/api/grants/{three_grants['live']}"), 403, "permission_denied")


def test_reading_one(reviewer_client, admin_client, three_grants):
    mine = reviewer_client.get(f"/api/grants/{three_grants['live']}")
    assert mine.status_code == 200 and mine.json()["status"] == "live"
    assert_error(
        reviewer_client.get(f"/api/grants/{three_grants['admins']}"), 403, "permission_denied"
    )
    assert admin_client.get(f"/api/grants/{three_grants['live']}").status_code == 200
    assert_error(reviewer_client.get("/api/grants/grant-unknown"), 404, "not_found")


def test_revoking(reviewer_client, admin_client, three_grants):
    live = three_grants["live"]
    assert_error(
        reviewer_client.delete(f"/api/grants/{three_grants['admins']}"), 403, "permission_denied"
    )
    assert_error(reviewer_client.delete("/api/grants/grant-unknown"), 404, "not_found")

    answer = reviewer_client.delete(f"/api/grants/{live}")

    assert answer.status_code == 200, answer.content
    assert (answer.json()["status"], answer.json()["revokedBy"]) == ("revoked", "alice")
    assert_error(reviewer_client.delete(f"/api/grants/{live}"), 409, "invalid_state")
    assert admin_client.delete(f"/api/grants/{three_grants['admins']}").status_code == 200
    assert list(
        GrantEvent.objects.filter(type="revoked").values_list("grant_id", flat=True).order_by("id")
    ) == [live, three_grants["admins"]]


def test_a_granted_breakpoint_reads_as_approved_by_its_grant(agent_client, reviewer_client):
    approve(reviewer_client, create(), GRANT)

    created = agent_client.post("/api/breakpoints", {"payload": payload()}, format="json")

    assert created.status_code == 201, created.content
    body = created.json()
    grant = Grant.objects.get()
    assert body["status"] == "released"
    assert body["result"]["respondedBy"] == f"grant:{grant.pk}"
    assert body["autoApproval"]["grantId"] == grant.pk
    assert body["autoApproval"]["grantedBy"] == "alice"
    assert Breakpoint.objects.get(pk=body["breakpointId"]).status == "released"


def test_live_and_ended_split_every_kind_of_grant(reviewer, reviewer_client):
    """Unlimited uses until an expiry, uses without one, used up, past its expiry."""
    timed = granted(reviewer, create(payload=payload("a.timed")), expiresInSeconds=600)
    counted = granted(reviewer, create(payload=payload("a.counted")), uses=1)
    used = granted(reviewer, create(payload=payload("a.used")), uses=1)
    create(payload=payload("a.used"))  # spends its one use
    expired = granted(reviewer, create(payload=payload("a.expired")), expiresInSeconds=600)
    Grant.objects.filter(pk=expired.pk).update(expires_at=expired.created_at)

    live = set(ids(reviewer_client.get("/api/grants?status=live")))
    ended = set(ids(reviewer_client.get("/api/grants?status=ended")))

    assert live == {timed.pk, counted.pk}
    assert ended == {used.pk, expired.pk}
