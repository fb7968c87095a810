"""Expert routing and resolution strategies: seats, who may release, votes, collect-all, quorum."""

import threading

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.test import override_settings

from accounts.experts import seat_summary
from audit.models import Event
from breakpoints.answers.voting import votes_outcome
from breakpoints.models import Breakpoint, Feedback
from breakpoints.services import feedback_add, release_refusal
from core.actors import Actor
from core.exceptions import Forbidden, InvalidState
from tests.support.api import assert_error
from tests.support.factories import UserFactory

THREE = ["tech-lead", "ops-lead", "security-lead"]


def routed(make_breakpoint, expert, strategy=None, **payload):
    payload = {"question": "Approve production deployment?", "title": "Production Deployment"}
    payload["expert"] = expert
    if strategy:
        payload["strategy"] = strategy
    return make_breakpoint(payload=payload)


def vote(client, bp, *, approved=True, comment="", option=None):
    body = {"comment": comment, "release": True, "approved": approved}
    if option is not None:
        body["option"] = option
    return client.post(f"/api/breakpoints/{bp.pk}/feedback", body, format="json")


@pytest.fixture
def seat_clients(three_experts, client_for) -> dict:
    return {seat: client_for(user) for seat, user in three_experts.items()}


# --- the strategies' arithmetic ---------------------------------------------------------


@pytest.mark.parametrize(
    ("strategy", "seats", "votes", "expected"),
    [
        ("collect-all", 3, [True, True], None),
        ("collect-all", 3, [True, True, True], True),
        ("collect-all", 3, [False], None),
        ("collect-all", 3, [True, False, True], False),
        ("quorum", 3, [True], None),
        ("quorum", 3, [True, True], True),
        ("quorum", 3, [True, False], None),
        ("quorum", 3, [True, False, False], False),
        ("quorum", 3, [False, False], False),
        ("quorum", 2, [True], None),
        ("quorum", 2, [False], False),
        ("quorum", 4, [True, True], None),
        ("quorum", 4, [True, True, True], True),
        ("quorum", 4, [False, False], False),
        ("quorum", 1, [True], True),
    ],
)
def test_votes_outcome_follows_the_strategy(strategy, seats, votes, expected):
    assert votes_outcome(strategy, seats, votes) is expected


# --- collect-all -------------------------------------------------------------------------


def test_collect_all_waits_for_every_seat_and_approves_when_all_approve(
    make_breakpoint, seat_clients, agent_client
):
    bp = routed(make_breakpoint, THREE, "collect-all")

    first = vote(seat_clients["tech-lead"], bp, comment="Code is fine")
    second = vote(seat_clients["ops-lead"], bp, comment="Runbook ready")
    assert first.status_code == second.status_code == 201
    assert first.json()["status"] == second.json()["status"] == "waiting"
    assert first.json()["result"] is None
    waiting = agent_client.get(f"/api/breakpoints/{bp.pk}").json()
    assert [v["seat"] for v in waiting["votes"]] == ["tech-lead", "ops-lead"]
    assert waiting["result"] is None

    last = vote(seat_clients["security-lead"], bp, comment="No findings")

    assert last.status_code == 201
    assert last.json()["status"] == "released"
    result = last.json()["result"]
    assert result["approved"] is True
    assert result["respondedBy"] == ["tina", "oscar", "sam"]
    assert [(r["seat"], r["respondedBy"], r["approved"]) for r in result["allResponses"]] == [
        ("tech-lead", "tina", True),
        ("ops-lead", "oscar", True),
        ("security-lead", "sam", True),
    ]
    assert all(r["respondedAt"] for r in result["allResponses"])
    assert "oscar (ops-lead): Runbook ready" in result["feedback"]
    stored = Breakpoint.objects.get(pk=bp.pk)
    assert stored.status == "released" and stored.released_at is not None
    assert list(Feedback.objects.filter(breakpoint=bp).values_list("releases", "approved")) == [
        (False, True),
        (False, True),
        (True, True),
    ]


def test_collect_all_with_one_rejection_still_waits_for_all_then_rejects(
    make_breakpoint, seat_clients
):
    bp = routed(make_breakpoint, THREE, "collect-all")

    assert vote(seat_clients["tech-lead"], bp).json()["status"] == "waiting"
    rejected = vote(seat_clients["ops-lead"], bp, approved=False, comment="No rollback plan")
    assert rejected.json()["status"] == "waiting"
    final = vote(seat_clients["security-lead"], bp)

    result = final.json()["result"]
    assert final.json()["status"] == "released"
    assert result["approved"] is False
    assert result["feedback"] == "No rollback plan"
    assert [r["approved"] for r in result["allResponses"]] == [True, False, True]


def test_collect_all_keeps_the_most_chosen_option_of_the_winning_side(
    make_breakpoint, seat_clients
):
    bp = make_breakpoint(
        payload={
            "question": "Which region?",
            "expert": THREE,
            "strategy": "collect-all",
            "options": ["eu", "us"],
        }
    )
    vote(seat_clients["tech-lead"], bp, option="us")
    vote(seat_clients["ops-lead"], bp, option="eu")
    result = vote(seat_clients["security-lead"], bp, option="eu").json()["result"]

    assert result["option"] == "eu"
    assert [r["option"] for r in result["allResponses"]] == ["us", "eu", "eu"]


# --- quorum ---------------------------------------------------------------------------------


def test_quorum_releases_approved_as_soon_as_a_majority_approved(make_breakpoint, seat_clients):
    bp = routed(make_breakpoint, THREE, "quorum")

    assert vote(seat_clients["tech-lead"], bp).json()["status"] == "waiting"
    second = vote(seat_clients["security-lead"], bp, comment="LGTM")

    assert second.json()["status"] == "released"
    result = second.json()["result"]
    assert result["approved"] is True
    assert result["respondedBy"] == ["tina", "sam"]
    assert len(result["allResponses"]) == 2
    late = vote(seat_clients["ops-lead"], bp)
    assert late.status_code == 409
    assert late.json()["error"]["details"]["currentStatus"] == "released"


def test_quorum_tie_is_broken_by_the_third_seat_rejecting(make_breakpoint, seat_clients):
    bp = routed(make_breakpoint, THREE, "quorum")

    assert vote(seat_clients["tech-lead"], bp).json()["status"] == "waiting"
    tie = vote(seat_clients["ops-lead"], bp, approved=False, comment="Too risky")
    assert tie.json()["status"] == "waiting"
    breaker = vote(seat_clients["security-lead"], bp, approved=False, comment="Agree, wait")

    assert breaker.json()["status"] == "released"
    result = breaker.json()["result"]
    assert result["approved"] is False
    assert result["feedback"] == "oscar (ops-lead): Too risky\nsam (security-lead): Agree, wait"
    assert result["respondedBy"] == ["tina", "oscar", "sam"]
    assert Breakpoint.objects.get(pk=bp.pk).result["approved"] is False


def test_quorum_rejects_once_a_majority_of_approvals_is_impossible(make_breakpoint, seat_clients):
    bp = routed(make_breakpoint, THREE, "quorum")

    vote(seat_clients["tech-lead"], bp, approved=False)
    response = vote(seat_clients["ops-lead"], bp, approved=False)

    assert response.json()["status"] == "released"
    assert response.json()["result"]["approved"] is False
    assert len(response.json()["result"]["allResponses"]) == 2


# --- one vote per seat ------------------------------------------------------------------------


def test_a_seat_votes_once_a_second_vote_is_409(make_breakpoint, seat_clients):
    bp = routed(make_breakpoint, THREE, "quorum")
    assert vote(seat_clients["tech-lead"], bp).status_code == 201

    again = vote(seat_clients["tech-lead"], bp, approved=False)

    assert again.status_code == 409
    error = again.json()["error"]
    assert error["code"] == "invalid_state"
    assert "tech-lead" in error["message"]
    assert error["details"]["currentStatus"] == "waiting"
    stored = Breakpoint.objects.get(pk=bp.pk)
    assert stored.status == "waiting"
    assert [v["approved"] for v in stored.votes] == [True]
    assert Feedback.objects.filter(breakpoint=bp).count() == 1


def test_another_member_of_a_seat_that_voted_gets_409(
    make_breakpoint, seat_clients, expert_member, client_for
):
    bp = routed(make_breakpoint, THREE, "collect-all")
    tom = client_for(expert_member("tom", "tech-lead"))
    vote(seat_clients["tech-lead"], bp)

    assert vote(tom, bp).status_code == 409
    assert len(Breakpoint.objects.get(pk=bp.pk).votes) == 1


def refusals_of(bp) -> list[tuple[str, str]]:
    """The REFUSED events of `bp`: (actor, reason)."""
    events = Event.objects.filter(breakpoint_id=bp.pk, type="refused").order_by("pk")
    return [(event.actor, event.metadata["reason"]) for event in events]


def test_a_member_of_two_seats_fills_one_of_them_a_second_vote_is_409(
    make_breakpoint, expert_member, client_for
):
    """bob, in two of a 3-seat quorum's groups, cannot release it alone: a person fills
    one seat per breakpoint."""
    bob = client_for(expert_member("bob", "tech-lead", "ops-lead"))
    expert_member("carol", "security-lead")
    bp = routed(make_breakpoint, THREE, "quorum")

    first = vote(bob, bp)
    assert (first.status_code, first.json()["status"]) == (201, "waiting")
    second = vote(bob, bp)

    error = assert_error(second, 409, "invalid_state")
    assert "bob has already voted" in error["message"] and "tech-lead" in error["message"]
    assert error["details"]["currentStatus"] == "waiting"
    assert error["details"]["votedFor"] == ["tech-lead"]
    stored = Breakpoint.objects.get(pk=bp.pk)
    assert stored.status == "waiting"
    assert [(v["seat"], v["respondedBy"]) for v in stored.votes] == [("tech-lead", "bob")]
    assert Feedback.objects.filter(breakpoint=bp).count() == 1
    assert refusals_of(bp) == [("api:bob", "invalid_state")]


def test_two_accounts_of_one_person_fill_one_seat(make_breakpoint, expert_member, client_for):
    """bob and bob-2 share bob's email (a second account, made by a sign-in): one person,
    so the second account's vote is refused as the first account's second vote would be."""
    bob, bob_2 = expert_member("bob", "tech-lead"), expert_member("bob-2", "ops-lead")
    for user in (bob, bob_2):
        user.email = "bob@example.com"
        user.save(update_fields=["email"])
    bp = routed(make_breakpoint, ["tech-lead", "ops-lead"], "collect-all")

    assert vote(client_for(bob), bp).json()["status"] == "waiting"
    refused = vote(client_for(bob_2), bp)

    error = assert_error(refused, 409, "invalid_state")
    assert "bob-2 has already voted" in error["message"]
    assert error["details"]["votedFor"] == ["tech-lead"]
    assert len(Breakpoint.objects.get(pk=bp.pk).votes) == 1
    assert refusals_of(bp) == [("api:bob-2", "invalid_state")]


def test_an_admin_casts_one_vote_of_a_collect_all_not_all_three(
    make_breakpoint, expert_member, admin_client
):
    """root may answer for any seat, and an answer for a seat is root's one seat."""
    for name, seat in zip(["dana", "bob", "carol"], THREE, strict=True):
        expert_member(name, seat)
    bp = routed(make_breakpoint, THREE, "collect-all")

    assert vote(admin_client, bp).json()["status"] == "waiting"
    again = vote(admin_client, bp)
    third = vote(admin_client, bp, approved=False)

    assert "root-admin has already voted" in assert_error(again, 409, "invalid_state")["message"]
    assert assert_error(third, 409, "invalid_state")["details"]["votedFor"] == ["tech-lead"]
    stored = Breakpoint.objects.get(pk=bp.pk)
    assert (stored.status, [v["seat"] for v in stored.votes]) == ("waiting", ["tech-lead"])
    assert refusals_of(bp) == [("api:root-admin", "invalid_state")] * 2


def test_a_trigger_rule_acting_for_a_person_who_voted_fills_no_second_seat(
    make_breakpoint, three_experts, admin_user, admin_client
):
    """A trigger rule acts as its owner: root's rule cannot add a vote after root's own."""
    bp = routed(make_breakpoint, THREE, "collect-all")
    assert vote(admin_client, bp).json()["status"] == "waiting"
    rule = Actor(name="trigger:release-all", user=admin_user, handle="release-all")

    with pytest.raises(InvalidState, match="root-admin has already voted"):
        feedback_add(breakpoint_id=bp.pk, actor=rule, comment="", release=True, via="trigger")

    assert [v["respondedBy"] for v in Breakpoint.objects.get(pk=bp.pk).votes] == ["root-admin"]
    assert refusals_of(bp) == [("trigger:release-all", "invalid_state")]


def test_the_console_offers_no_second_seat_to_a_person_who_voted(make_breakpoint, expert_member):
    """release_refusal, the question the console and the email page ask, says why."""
    bob = expert_member("bob", "tech-lead", "ops-lead")
    bp = routed(make_breakpoint, THREE, "collect-all")
    feedback_add(breakpoint_id=bp.pk, actor=Actor.for_user(bob), comment="", release=True)

    refusal = release_refusal(Breakpoint.objects.get(pk=bp.pk), Actor.for_user(bob))

    assert refusal is not None and "bob has already voted" in refusal


# --- who may release -------------------------------------------------------------------------


def test_a_reviewer_outside_the_experts_may_comment_but_not_release(
    make_breakpoint, three_experts, reviewer_client
):
    bp = routed(make_breakpoint, "security-lead")

    denied = vote(reviewer_client, bp)
    assert denied.status_code == 403
    assert denied.json()["error"]["code"] == "permission_denied"
    assert "security-lead" in denied.json()["error"]["message"]
    assert Breakpoint.objects.get(pk=bp.pk).status == "waiting"

    comment = reviewer_client.post(
        f"/api/breakpoints/{bp.pk}/feedback", {"comment": "FYI: CVE-123"}, format="json"
    )
    assert comment.status_code == 201
    assert comment.json()["status"] == "waiting"
    assert list(Feedback.objects.filter(breakpoint=bp).values_list("author", "releases")) == [
        ("alice", False)
    ]


def test_single_routed_breakpoint_is_released_by_any_member_of_its_group(
    make_breakpoint, expert_member, client_for
):
    expert_member("sam", "security-team")
    sue = client_for(expert_member("sue", "security-team"))
    bp = routed(make_breakpoint, "security-team")

    response = vote(sue, bp, comment="Audit clean")

    assert response.status_code == 201
    result = response.json()["result"]
    assert response.json()["status"] == "released"
    assert result["respondedBy"] == "sue"
    assert result["feedback"] == "Audit clean"
    assert result["allResponses"][0]["seat"] == "security-team"


def test_first_response_wins_takes_the_first_allowed_release(make_breakpoint, seat_clients):
    bp = routed(make_breakpoint, ["tech-lead", "architect"], "first-response-wins")

    first = vote(seat_clients["tech-lead"], bp, approved=False, comment="Not yet")

    assert first.json()["status"] == "released"
    assert first.json()["result"]["approved"] is False
    assert first.json()["result"]["respondedBy"] == "tina"
    assert vote(seat_clients["tech-lead"], bp).status_code == 409


def test_an_expert_named_by_username_resolves_to_that_user(
    make_breakpoint, client_for, reviewer_client
):
    bob = UserFactory(username="bob", groups=["reviewers"])
    bp = routed(make_breakpoint, "bob")

    body = reviewer_client.get(f"/api/breakpoints/{bp.pk}").json()
    assert body["experts"] == [{"name": "bob", "resolved": True, "kind": "user"}]
    assert vote(reviewer_client, bp).status_code == 403
    assert vote(client_for(bob), bp).json()["result"]["respondedBy"] == "bob"


def test_a_group_without_members_does_not_resolve(make_breakpoint, reviewer_client):
    Group.objects.create(name="empty-team")
    bp = routed(make_breakpoint, "empty-team")

    body = reviewer_client.get(f"/api/breakpoints/{bp.pk}").json()
    assert body["experts"] == [{"name": "empty-team", "resolved": False, "kind": None}]


# --- unresolved experts ----------------------------------------------------------------------


def test_an_unresolved_expert_is_accepted_flagged_and_answerable_by_admins(
    agent_client, reviewer_client, admin_client
):
    created = agent_client.post(
        "/api/breakpoints",
        {"payload": {"question": "Review the audit?", "expert": "secruity-team"}},
        format="json",
    )
    assert created.status_code == 201
    body = created.json()
    assert body["strategy"] == "single"
    assert body["experts"] == [{"name": "secruity-team", "resolved": False, "kind": None}]

    assert vote(reviewer_client, Breakpoint(pk=body["breakpointId"])).status_code == 403
    answered = vote(admin_client, Breakpoint(pk=body["breakpointId"]), comment="Typo; fine")

    assert answered.status_code == 201
    assert answered.json()["status"] == "released"
    assert answered.json()["result"]["respondedBy"] == "root-admin"
    assert answered.json()["result"]["allResponses"][0]["seat"] == "secruity-team"


def test_admins_answer_for_the_unresolved_seat_of_a_collect_all(
    make_breakpoint, seat_clients, admin_client
):
    bp = routed(make_breakpoint, ["tech-lead", "nobody-here"], "collect-all")
    vote(seat_clients["tech-lead"], bp)

    response = vote(admin_client, bp, comment="Standing in")

    assert response.json()["status"] == "released"
    assert [r["seat"] for r in response.json()["result"]["allResponses"]] == [
        "tech-lead",
        "nobody-here",
    ]


def test_resolution_is_live_so_creating_the_group_later_takes_effect(
    make_breakpoint, reviewer, reviewer_client
):
    bp = routed(make_breakpoint, "late-team")
    assert (
        reviewer_client.get(f"/api/breakpoints/{bp.pk}").json()["experts"][0]["resolved"] is False
    )

    reviewer.groups.add(Group.objects.create(name="late-team"))

    body = reviewer_client.get(f"/api/breakpoints/{bp.pk}").json()
    assert body["experts"] == [{"name": "late-team", "resolved": True, "kind": "group"}]


# --- owner -----------------------------------------------------------------------------------------


@override_settings(BPM_PROJECT_OWNERS=["olivia"])
def test_owner_resolves_to_the_configured_project_owners(
    make_breakpoint, client_for, reviewer_client
):
    olivia = UserFactory(username="olivia", groups=["reviewers"])
    bp = routed(make_breakpoint, "owner")

    body = reviewer_client.get(f"/api/breakpoints/{bp.pk}").json()
    assert body["experts"] == [{"name": "owner", "resolved": True, "kind": "owner"}]
    assert vote(reviewer_client, bp).status_code == 403
    released = vote(client_for(olivia), bp, comment="Ship the release")
    assert released.json()["result"]["respondedBy"] == "olivia"
    assert released.json()["result"]["allResponses"][0]["seat"] == "owner"


@override_settings(BPM_PROJECT_OWNERS=[])
def test_owner_without_configured_owners_is_unresolved(make_breakpoint, reviewer_client):
    bp = routed(make_breakpoint, "owner")

    body = reviewer_client.get(f"/api/breakpoints/{bp.pk}").json()
    assert body["experts"] == [{"name": "owner", "resolved": False, "kind": None}]


# --- the queue ------------------------------------------------------------------------------------


@override_settings(BPM_PROJECT_OWNERS=["olivia"])
def test_assigned_to_me_lists_breakpoints_routed_to_my_seats(
    make_breakpoint, three_experts, client_for, reviewer_client
):
    olivia = client_for(UserFactory(username="olivia", groups=["reviewers"]))
    tina = client_for(three_experts["tech-lead"])
    deploy = routed(make_breakpoint, THREE, "quorum")
    arch = routed(make_breakpoint, ["tech-lead", "architect"])
    sec = routed(make_breakpoint, "security-lead")
    release = routed(make_breakpoint, "owner")
    make_breakpoint()  # unrouted

    def ids(client):
        response = client.get("/api/breakpoints", {"assignedTo": "me"})
        assert response.status_code == 200
        return {row["breakpointId"] for row in response.json()["results"]}

    assert ids(tina) == {deploy.pk, arch.pk}
    assert ids(client_for(three_experts["security-lead"])) == {deploy.pk, sec.pk}
    assert ids(olivia) == {release.pk}
    assert ids(reviewer_client) == set()
    assert len(reviewer_client.get("/api/breakpoints").json()["results"]) == 5


def test_assigned_to_me_combines_with_other_filters(make_breakpoint, three_experts, client_for):
    tina = client_for(three_experts["tech-lead"])
    waiting = routed(make_breakpoint, "tech-lead")
    done = routed(make_breakpoint, "tech-lead")
    feedback_add(
        breakpoint_id=done.pk,
        actor=Actor.for_user(three_experts["tech-lead"]),
        comment="ok",
        release=True,
    )

    response = tina.get("/api/breakpoints", {"assignedTo": "me", "status": "waiting"})

    assert [row["breakpointId"] for row in response.json()["results"]] == [waiting.pk]


def test_assigned_to_rejects_anything_but_me(reviewer_client):
    response = reviewer_client.get("/api/breakpoints", {"assignedTo": "bob"})

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "validation_error"
    assert "assignedTo" in response.json()["error"]["details"]


def test_an_agent_has_nothing_assigned(agent_client, make_breakpoint):
    routed(make_breakpoint, "tech-lead")

    response = agent_client.get("/api/breakpoints", {"assignedTo": "me"})

    assert response.status_code == 200
    assert response.json()["results"] == []


def test_the_list_resolves_experts_for_the_whole_page_at_once(
    make_breakpoint, three_experts, reviewer_client, django_assert_max_num_queries
):
    for _ in range(3):
        routed(make_breakpoint, [*THREE, "typo"], "quorum")
    reviewer_client.get("/api/breakpoints")  # warm-up: token last_used_at
    with django_assert_max_num_queries(8) as few:
        reviewer_client.get("/api/breakpoints")
    for _ in range(12):
        routed(make_breakpoint, ["tech-lead", "owner", "typo"], "collect-all")
    with django_assert_max_num_queries(8) as many:
        rows = reviewer_client.get("/api/breakpoints").json()["results"]

    assert len(rows) == 15
    assert rows[0]["experts"][2] == {"name": "typo", "resolved": False, "kind": None}
    assert rows[-1]["experts"][0] == {"name": "tech-lead", "resolved": True, "kind": "group"}
    assert len(many.captured_queries) == len(few.captured_queries)


# --- service-level details --------------------------------------------------------------------


def test_votes_are_recorded_as_feedback_events_naming_the_seat(make_breakpoint, three_experts):
    bp = routed(make_breakpoint, THREE, "quorum")

    feedback_add(
        breakpoint_id=bp.pk,
        actor=Actor.for_user(three_experts["ops-lead"]),
        comment="",
        release=True,
        approved=False,
    )

    event = Event.objects.get(breakpoint_id=bp.pk, type="feedback")
    assert event.actor == "oscar"
    assert event.metadata["vote"] == {"seat": "ops-lead", "approved": False}
    assert not Event.objects.filter(breakpoint_id=bp.pk, type="released").exists()


def test_service_refuses_a_non_member_and_a_double_vote(make_breakpoint, three_experts, reviewer):
    bp = routed(make_breakpoint, THREE, "collect-all")
    tina = Actor.for_user(three_experts["tech-lead"])

    with pytest.raises(Forbidden):
        feedback_add(breakpoint_id=bp.pk, actor=Actor.for_user(reviewer), comment="", release=True)
    feedback_add(breakpoint_id=bp.pk, actor=tina, comment="", release=True)
    with pytest.raises(InvalidState) as raised:
        feedback_add(breakpoint_id=bp.pk, actor=tina, comment="", release=True)

    assert raised.value.current_status == "waiting"
    assert len(Breakpoint.objects.get(pk=bp.pk).votes) == 1


def test_strategy_without_experts_behaves_like_single(make_breakpoint, reviewer_client):
    bp = make_breakpoint(payload={"question": "Go?", "strategy": "collect-all"})

    response = vote(reviewer_client, bp)

    assert response.json()["status"] == "released"
    assert response.json()["result"]["respondedBy"] == "alice"
    assert Breakpoint.objects.get(pk=bp.pk).strategy == "collect-all"


# --- concurrent votes (PostgreSQL row locks) ------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.postgres  # row locks and concurrent connections
def test_simultaneous_votes_of_every_seat_are_all_counted_and_release_once(
    make_breakpoint, expert_member, client_for
):
    seats = [f"seat-{i}" for i in range(6)]
    clients = [client_for(expert_member(f"member{i}", seat)) for i, seat in enumerate(seats)]
    bp = routed(make_breakpoint, seats, "collect-all")
    barrier = threading.Barrier(len(clients))
    statuses: list[int] = [0] * len(clients)

    def cast(i: int) -> None:
        try:
            barrier.wait(timeout=10)
            statuses[i] = vote(clients[i], bp).status_code
        finally:
            connection.close()

    threads = [threading.Thread(target=cast, args=(i,)) for i in range(len(clients))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert statuses == [201] * len(clients)
    stored = Breakpoint.objects.get(pk=bp.pk)
    assert stored.status == "released"
    assert sorted(v["seat"] for v in stored.votes) == sorted(seats)
    assert stored.result["approved"] is True
    assert len(stored.result["allResponses"]) == len(seats)
    assert Event.objects.filter(breakpoint_id=bp.pk, type="released").count() == 1
    assert Feedback.objects.filter(breakpoint=bp, releases=True).count() == 1


def test_seat_summary_shows_who_voted_what_and_what_is_missing(make_breakpoint, seat_clients):
    bp = routed(make_breakpoint, [*THREE, "typo"], "collect-all")
    vote(seat_clients["ops-lead"], bp, approved=False, comment="Needs a runbook")
    bp.refresh_from_db()

    summary = seat_summary(bp.experts, bp.votes)

    assert [(s["name"], s["resolved"], s["kind"]) for s in summary] == [
        ("tech-lead", True, "group"),
        ("ops-lead", True, "group"),
        ("security-lead", True, "group"),
        ("typo", False, None),
    ]
    assert [s["vote"] and (s["vote"]["respondedBy"], s["vote"]["approved"]) for s in summary] == [
        None,
        ("oscar", False),
        None,
        None,
    ]


def test_filtersets_alive_at_once_each_filter_for_their_own_caller(make_breakpoint, three_experts):
    """The filters are copied per filterset (not deep-copied): each copy's method must
    answer for its own filterset's request, whatever was built after it."""
    from types import SimpleNamespace

    from django.http import QueryDict

    from breakpoints.filters import BreakpointFilter

    tina_seat = routed(make_breakpoint, "tech-lead")
    security_seat = routed(make_breakpoint, "security-lead")
    mine = QueryDict("assignedTo=me&status=waiting")
    filtersets = {
        expert: BreakpointFilter(
            mine,
            queryset=Breakpoint.objects.all(),
            request=SimpleNamespace(user=three_experts[expert]),
        )
        for expert in ("tech-lead", "security-lead")
    }

    found = {expert: {bp.pk for bp in fs.qs} for expert, fs in filtersets.items()}

    assert found == {"tech-lead": {tina_seat.pk}, "security-lead": {security_seat.pk}}
    first, second = filtersets.values()
    assert first.filters["assignedTo"] is not second.filters["assignedTo"]
    assert first.form.fields["status"] is second.form.fields["status"]  # shared, not copied
