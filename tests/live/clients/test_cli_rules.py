"""`bpm rules simulate` against the live server: the same figures as the API, and the exit
code a repository of rules gates its changes on."""

import json
import re

from bpm_client import Client

from tests.support.cli import bpm

# (key, tags, approved, comment), made by agent-a and decided by alice, in this order.
HISTORY = [
    ("deploy.staging", ["deploy"], True, "Fine"),
    ("deploy.staging", ["deploy", "hotfix"], False, "Not in the freeze"),
    ("deploy.production", ["deploy"], True, "Ok"),
    ("plan-review", [], False, "Too risky"),
]


def test_bpm_rules_simulate_says_what_the_rule_would_do_and_gates_on_rejections(
    live, agent_token, reviewer_token, admin_token, bpm_env
):
    """In words a reviewer reads (the API's field names only with --json); with
    --fail-on-rejected a rule that would approve a rejection exits 1 and says why on stderr."""
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
    assert failing.stderr == (
        "bpm: the rule would have auto-approved 1 breakpoint(s) a person rejected\n"
    )
    said = failing.stdout.splitlines()
    assert said[0] == "rule: auto-approve deploy.*"
    assert re.fullmatch(r"since \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ: .*", said[1]), said[1]
    assert said[1].endswith(": 4 finished breakpoints, of which the rule matches 3")
    assert said[2:4] == [
        "of those 3, a person approved 2 and rejected 1",
        "would approve 3, of which 1 a person rejected and 2 a person approved",
    ]
    assert said[4:] == [
        "the 1 it would approve that a person rejected, newest first:",
        f"  {printed['rejectedButWouldApprove'][0]['breakpointId']}  deploy.staging"
        '  rejected by alice: "Not in the freeze"',
    ]
    raw_names = ("humanRejected", "wouldAutoApprove", "rejectedButWouldApprove", "considered")
    assert not [name for name in raw_names if name in failing.stdout]

    narrower = bpm("rules", "simulate", "deploy.production", "--fail-on-rejected", env=env)
    assert narrower.code == 0, narrower.stderr
    assert "would approve 1, of which 0 a person rejected and 1 a person approved" in (
        narrower.stdout.splitlines()
    )

    refused = bpm("rules", "simulate", "deploy.*", "--since", "soon", env=env)
    assert refused.code == 4
    assert "since" in refused.stderr
