"""`bpm rules simulate` against the live server: the same figures as the API, and the exit
code a repository of rules gates its changes on."""

import json

from bpm_client import Client

from tests.live.clients.test_cli import bpm

# (key, tags, approved, comment), made by agent-a and decided by alice, in this order.
HISTORY = [
    ("deploy.staging", ["deploy"], True, "Fine"),
    ("deploy.staging", ["deploy", "hotfix"], False, "Not in the freeze"),
    ("deploy.production", ["deploy"], True, "Ok"),
    ("plan-review", [], False, "Too risky"),
]


def test_bpm_rules_simulate_prints_the_apis_figures_and_gates_on_rejections(
    live, agent_token, reviewer_token, admin_token, bpm_env
):
    with (
        Client(live.base_url, agent_token) as agent,
        Client(live.base_url, reviewer_token) as alice,
    ):
        for key, tags, approved, comment in HISTORY:
            created = agent.create(f"{key}?", key=key, tags=tags)
            alice.release(created.breakpoint_id, comment, approved=approved)
    with Client(live.base_url, admin_token) as admin:
        expected = admin.simulate_rule("deploy.*").to_json()
    env = {**bpm_env, "BPM_TOKEN": admin_token}

    as_json = bpm("rules", "simulate", "deploy.*", "--json", env=env)

    assert as_json.code == 0, as_json.stderr
    printed = json.loads(as_json.stdout)
    figures = ("considered", "matched", "wouldAutoApprove", "agreedWithHumans")
    assert [printed[name] for name in figures] == [4, 3, 3, 2]
    assert {**printed, "since": None} == {**expected, "since": None}  # "90d" moved on
    assert printed["rejectedButWouldApprove"][0]["feedback"] == "Not in the freeze"

    failing = bpm("rules", "simulate", "deploy.*", "--fail-on-rejected", env=env)
    assert failing.code == 1, failing.stderr
    assert "humanRejected: 1" in failing.stdout.splitlines()
    assert "rejectedButWouldApprove: 1 (the newest 1 below)" in failing.stdout

    narrower = bpm("rules", "simulate", "deploy.production", "--fail-on-rejected", env=env)
    assert narrower.code == 0, narrower.stderr
    assert "wouldAutoApprove: 1" in narrower.stdout.splitlines()

    refused = bpm("rules", "simulate", "deploy.*", "--since", "soon", env=env)
    assert refused.code == 4
    assert "since" in refused.stderr
