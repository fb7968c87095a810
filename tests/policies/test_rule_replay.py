"""Replaying a rule over the decisions already made: POST /api/rules/simulate and
manage.py simulate_rule, over a history made through the API (agents create, a reviewer
approves or rejects)."""

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from breakpoints.models import Breakpoint
from policies.autoapproval import always_break_on_add, rule_create
from policies.models import AutoApprovalRule
from tests.conftest import bearer_client
from tests.support.api import assert_error

SIMULATE = "/api/rules/simulate"

# (agent, key, tags, expert, decision, comment): in the order they are made.
HISTORY = [
    ("agent-a", "deploy.staging", ["deploy"], "security", "approve", "Fine"),
    ("agent-b", "deploy.staging", ["deploy"], None, "approve", "Go"),
    ("agent-a", "deploy.staging", ["deploy", "hotfix"], "sre", "reject", "Not in the freeze"),
    ("agent-a", "deploy.production", ["deploy", "production"], None, "reject", "No rollback"),
    ("agent-b", "deploy.production", ["deploy", "production"], "security", "approve", "Ok"),
    ("agent-a", "plan-review", [], None, "approve", "Good plan"),
    ("agent-b", "plan-review", [], "sre", "reject", "Too risky"),
    ("agent-a", "deploy.staging", ["deploy"], None, "cancel", ""),
]


@pytest.fixture
def history(agent_client, other_agent_client, expert_member, client_for) -> list[str]:
    """The decisions of HISTORY, made through the API; their ids, in the same order."""
    agents = {"agent-a": agent_client, "agent-b": other_agent_client}
    reviewer = client_for(expert_member("rita", "security", "sre"))
    ids = []
    for number, (agent, key, tags, expert, decision, comment) in enumerate(HISTORY):
        payload = {"question": f"Step {number}?", "breakpointId": key}
        if expert:
            payload["expert"] = expert
        body = {"payload": payload, "tags": tags}
        created = agents[agent].post("/api/breakpoints", body, format="json")
        assert created.status_code == 201, created.content
        bp_id = created.json()["breakpointId"]
        if decision == "cancel":
            answer = agents[agent].post(f"/api/breakpoints/{bp_id}/cancel", {}, format="json")
        else:
            body = {"comment": comment, "release": True, "approved": decision == "approve"}
            answer = reviewer.post(f"/api/breakpoints/{bp_id}/feedback", body, format="json")
        assert answer.status_code in (200, 201), answer.content
        ids.append(bp_id)
    return ids


def simulate(client, **body):
    return client.post(SIMULATE, body, format="json")


def figures(body: dict) -> tuple:
    return (
        body["considered"],
        body["matched"],
        body["wouldAutoApprove"],
        body["agreedWithHumans"],
        body["humanApproved"],
        body["humanRejected"],
        body["rejectedButWouldApproveCount"],
    )


# --- the figures -------------------------------------------------------------------------------


def test_a_rule_is_replayed_over_every_finished_breakpoint(admin_client, history):
    response = simulate(admin_client, pattern="deploy.*")

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["rule"] == {"action": "auto-approve", "pattern": "deploy.*"}
    # 8 finished; 6 deploy.*; all 6 would be approved: 3 people approved, 2 rejected, 1
    # was cancelled (nobody's decision).
    assert figures(body) == (8, 6, 6, 3, 3, 2, 2)
    listed = body["rejectedButWouldApprove"]
    assert [item["breakpointId"] for item in listed] == [history[3], history[2]]  # newest first
    assert listed[0] == {
        "breakpointId": history[3],
        "key": "deploy.production",
        "respondedBy": "rita",
        "feedback": "No rollback",
        "decidedAt": listed[0]["decidedAt"],
    }
    assert listed[0]["decidedAt"].endswith("Z")
    assert not AutoApprovalRule.objects.exists()  # a replay saves nothing


def test_predicates_narrow_what_the_replay_matches(admin_client, history):
    body = simulate(admin_client, pattern="deploy.*(expert = 'security')").json()

    assert figures(body) == (8, 2, 2, 2, 2, 0, 0)
    assert body["rejectedButWouldApprove"] == []


def test_an_existing_never_auto_approve_rule_wins_as_in_production(admin_client, admin, history):
    rule_create(actor=admin, pattern="deploy.production", action="never-auto-approve")

    body = simulate(admin_client, pattern="deploy.*").json()

    # deploy.production's two still match, but the never rule keeps them for a person.
    assert figures(body) == (8, 6, 4, 2, 3, 2, 1)
    assert [item["breakpointId"] for item in body["rejectedButWouldApprove"]] == [history[2]]


def test_an_always_break_on_tag_wins_too(admin_client, admin, history):
    always_break_on_add(actor=admin, tag="hotfix")

    body = simulate(admin_client, pattern="deploy.staging").json()

    assert figures(body) == (8, 4, 3, 2, 2, 1, 0)  # #2 (hotfix) stays with a person


def test_a_never_auto_approve_candidate_approves_nothing(admin_client, history):
    body = simulate(admin_client, pattern="plan-review", action="never-auto-approve").json()

    assert figures(body) == (8, 2, 0, 0, 1, 1, 0)


def test_auto_approve_after_n_counts_each_agents_streak_in_order(admin_client, history):
    body = simulate(admin_client, action="autoApproveAfterN", key="deploy.staging", n=1).json()

    # agent-a approved (#0), so its next two (#2 rejected, #7 cancelled) would have been
    # approved; agent-b's first (#1) had no approval before it.
    assert body["rule"] == {"action": "autoApproveAfterN", "key": "deploy.staging", "n": 1}
    assert figures(body) == (8, 4, 2, 0, 2, 1, 1)
    assert [item["breakpointId"] for item in body["rejectedButWouldApprove"]] == [history[2]]


def test_the_window_leaves_out_older_breakpoints(admin_client, history):
    Breakpoint.objects.filter(pk__in=history[:4]).update(
        created_at=timezone.now() - timedelta(days=10)
    )

    assert figures(simulate(admin_client, pattern="deploy.*", since="7d").json()) == (
        4,
        2,
        2,
        1,
        1,
        0,
        0,
    )
    assert simulate(admin_client, pattern="deploy.*", since="11d").json()["considered"] == 8
    since = (timezone.now() - timedelta(days=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert simulate(admin_client, pattern="deploy.*", since=since).json()["considered"] == 4


def test_a_waiting_breakpoint_is_not_considered(admin_client, agent_client, history):
    payload = {"question": "Still open?", "breakpointId": "deploy.x"}
    agent_client.post("/api/breakpoints", {"payload": payload}, format="json")

    assert simulate(admin_client, pattern="deploy.*").json()["considered"] == 8


# --- who may, and bad input -------------------------------------------------------------------


def test_only_admins_may_replay(reviewer_client, agent_client, db):
    assert_error(simulate(reviewer_client, pattern="deploy.*"), 403, "permission_denied")
    assert_error(simulate(agent_client, pattern="deploy.*"), 403, "permission_denied")
    assert_error(simulate(bearer_client("nonsense"), pattern="x"), 401, "not_authenticated")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"pattern": "deploy.*", "action": "approve-all"}, "action"),
        ({"pattern": "deploy.*(tags contains)"}, "pattern"),
        ({"pattern": ""}, "pattern"),
        ({}, "pattern"),
        ({"pattern": "deploy.*", "since": "yesterday"}, "since"),
        ({"pattern": "deploy.*", "since": "-5d"}, "since"),
        ({"pattern": "deploy.*", "since": "2999-01-01T00:00:00Z"}, "since"),
        ({"pattern": "deploy.*", "since": "2026-02-30T00:00:00Z"}, "since"),
        ({"pattern": "deploy.*", "since": "99999d"}, "since"),
        ({"pattern": "deploy.*", "since": 90}, "since"),
        ({"action": "autoApproveAfterN", "key": "deploy.staging", "n": 0}, "n"),
        ({"action": "autoApproveAfterN", "key": "deploy.staging", "n": "3"}, "n"),
        ({"action": "autoApproveAfterN", "key": "deploy.staging"}, "n"),
        ({"action": "autoApproveAfterN", "n": 3}, "key"),
        ({"action": "autoApproveAfterN", "key": "k", "n": 3, "pattern": "k"}, "pattern"),
        ({"pattern": "deploy.*", "n": 3}, "n"),
        ({"pattern": "deploy.*", "dryRun": True}, "non_field_errors"),  # names dryRun
    ],
)
def test_bad_input_is_400_naming_the_field(admin_client, body, field):
    error = assert_error(admin_client.post(SIMULATE, body, format="json"), 400)
    assert field in error["details"], error


# --- manage.py simulate_rule -------------------------------------------------------------------


def run(*args) -> str:
    out = StringIO()
    call_command("simulate_rule", *args, stdout=out)
    return out.getvalue()


def test_the_command_prints_the_figures_and_the_rejections(history):
    output = run("deploy.*")

    for line in ("considered: 8", "matched: 6", "wouldAutoApprove: 6", "humanRejected: 2"):
        assert line in output.splitlines()
    assert "rejectedButWouldApprove: 2 (the newest 2 below)" in output
    assert f"  {history[3]}  deploy.production  by rita " in output


def test_fail_on_rejected_exits_1_then_0_for_a_narrower_pattern(history):
    with pytest.raises(CommandError) as failed:
        run("deploy.*", "--fail-on-rejected")
    assert failed.value.returncode == 1
    assert "2 breakpoint(s) a person rejected" in str(failed.value)

    output = run("deploy.*(expert = 'security')", "--fail-on-rejected", "--json")

    assert '"rejectedButWouldApproveCount": 0' in output


def test_the_command_refuses_bad_input_naming_it(db):
    with pytest.raises(CommandError, match="since"):
        run("deploy.*", "--since", "soon")
    with pytest.raises(CommandError, match="pattern"):
        run("deploy.*(")


def test_decisions_nobody_made_and_forms_a_person_fills_are_told_apart(
    admin_client, admin, agent_client, reviewer_client
):
    """A rule's approval at creation and an expiry are nobody's decision; a form that needs
    a person stays with a person in the replay as it did in production."""
    rule_create(actor=admin, pattern="auto.one")

    def create(key, **payload):
        body = {"payload": {"question": f"{key}?", "breakpointId": key, **payload}}
        response = agent_client.post("/api/breakpoints", body, format="json")
        assert response.status_code == 201, response.content
        return response.json()

    assert create("auto.one")["status"] == "released"  # by the rule, at creation
    form = {"type": "object", "required": ["x"], "properties": {"x": {"type": "string"}}}
    filled = create("auto.two", form=form)["breakpointId"]
    body = {"comment": "Filled in", "release": True, "values": {"x": "y"}}
    released = reviewer_client.post(f"/api/breakpoints/{filled}/feedback", body, format="json")
    assert released.status_code in (200, 201), released.content
    expired = create("auto.three")["breakpointId"]
    expiry = admin_client.post(f"/api/breakpoints/{expired}/expire", {}, format="json")
    assert expiry.status_code == 200, expiry.content

    body = simulate(admin_client, pattern="auto.*").json()

    # all three match; the form's stays with a person; only its decision is a person's.
    assert figures(body) == (3, 3, 2, 0, 1, 0, 0)
    decided = dict(Breakpoint.objects.values_list("key", "person_decision"))
    assert decided == {"auto.one": None, "auto.two": "approved", "auto.three": None}


def test_the_list_is_capped_and_the_count_is_not(admin_client, history, monkeypatch):
    monkeypatch.setattr("breakpoints.rule_replay.LIST_CAP", 1)

    body = simulate(admin_client, pattern="deploy.*").json()

    assert [item["breakpointId"] for item in body["rejectedButWouldApprove"]] == [history[3]]
    assert body["rejectedButWouldApproveCount"] == 2
