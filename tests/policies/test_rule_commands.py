"""The rules CLI: approve_rule, list_rules, remove_rule, should_auto_approve, breakpoint_history."""

import json
import re
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from breakpoints.services import feedback_add
from core.actors import Actor
from policies.models import AutoApprovalRule

pytestmark = pytest.mark.django_db


def run(*args) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def last_line(output: str) -> str:
    return output.strip().splitlines()[-1]


def test_approve_rule_prints_the_new_id_on_the_last_line():
    output = run("approve_rule", "confirm.*", "--note", "Routine confirmations")

    rule_id = last_line(output)
    assert re.fullmatch(r"rule-[0-9a-f]{8}", rule_id)
    rule = AutoApprovalRule.objects.get(pk=rule_id)
    assert (rule.pattern, rule.action, rule.note) == (
        "confirm.*",
        "auto-approve",
        "Routine confirmations",
    )
    assert rule.created_by == "system:cli"


def test_approve_rule_with_never_action():
    rule_id = last_line(
        run(
            "approve_rule",
            "gate.deploy-production",
            "--action",
            "never-auto-approve",
            "--note",
            "Always review prod deploys",
        )
    )

    assert AutoApprovalRule.objects.get(pk=rule_id).action == "never-auto-approve"


def test_approve_rule_with_predicates_stores_the_canonical_form():
    rule_id = last_line(run("approve_rule", "*.review(tags contains 'design')"))

    assert AutoApprovalRule.objects.get(pk=rule_id).pattern == "*.review(tags contains 'design')"


def test_a_malformed_pattern_is_a_command_error_naming_the_position():
    with pytest.raises(CommandError, match="position 15"):
        run("approve_rule", "confirm.*(tags has 'x')")

    assert not AutoApprovalRule.objects.exists()


def test_list_rules_plain_and_json():
    first = last_line(run("approve_rule", "confirm.*", "--note", "Routine"))
    second = last_line(run("approve_rule", "gate.*", "--action", "never-auto-approve"))

    plain = run("list_rules").splitlines()
    rows = json.loads(run("list_rules", "--json"))

    assert plain == [
        f"{first}\tauto-approve\tconfirm.*\t# Routine",
        f"{second}\tnever-auto-approve\tgate.*",
    ]
    assert [(r["id"], r["pattern"], r["action"], r["note"]) for r in rows] == [
        (first, "confirm.*", "auto-approve", "Routine"),
        (second, "gate.*", "never-auto-approve", ""),
    ]
    assert all(r["createdBy"] == "system:cli" and r["createdAt"] for r in rows)


def test_list_rules_when_there_are_none():
    assert run("list_rules").strip() == "No rules."
    assert json.loads(run("list_rules", "--json")) == []


def test_remove_rule_and_unknown_rule():
    rule_id = last_line(run("approve_rule", "confirm.*"))

    assert f"Removed rule {rule_id}." in run("remove_rule", rule_id)
    assert not AutoApprovalRule.objects.exists()
    with pytest.raises(CommandError, match=rule_id):
        run("remove_rule", rule_id)


def test_should_auto_approve_json_matches_the_seed_shape():
    rule_id = last_line(run("approve_rule", "confirm.*"))

    verdict = json.loads(run("should_auto_approve", "confirm.star-repo", "--json"))

    assert verdict == {
        "recommended": True,
        "reason": f"Matched auto-approve rule: {rule_id}",
        "matchedRule": rule_id,
        "consecutiveApprovals": 0,
    }


def test_should_auto_approve_with_tags_and_experts():
    run("approve_rule", "gate.*(tags contains 'prerequisites' AND expert = 'owner')")

    matched = json.loads(
        run(
            "should_auto_approve",
            "gate.merge",
            "--tag",
            "ci",
            "--tag",
            "prerequisites",
            "--expert",
            "owner",
            "--json",
        )
    )
    missing = run("should_auto_approve", "gate.merge", "--tag", "prerequisites")

    assert matched["recommended"] is True
    assert "recommended: no" in missing
    assert "reason: No matching rule" in missing


def test_should_auto_approve_counts_consecutive_approvals(make_breakpoint, reviewer):
    for _ in range(3):
        bp = make_breakpoint(payload={"question": "?", "breakpointId": "confirm.star-repo"})
        feedback_add(breakpoint_id=bp.pk, actor=Actor.for_user(reviewer), comment="", release=True)

    verdict = json.loads(
        run("should_auto_approve", "confirm.star-repo", "--after-n", "3", "--json")
    )

    assert verdict["recommended"] is True
    assert verdict["reason"] == "3 consecutive approvals (threshold 3)"
    assert verdict["consecutiveApprovals"] == 3
    with pytest.raises(CommandError):
        run("should_auto_approve", "confirm.star-repo", "--after-n", "0")


def test_breakpoint_history_newest_first_with_limit_and_key(make_breakpoint, reviewer):
    reviewer_actor = Actor.for_user(reviewer)
    for key, approved in [
        ("plan-review", True),
        ("confirm.star-repo", False),
        ("plan-review", False),
    ]:
        bp = make_breakpoint(payload={"question": "?", "breakpointId": key})
        feedback_add(
            breakpoint_id=bp.pk,
            actor=reviewer_actor,
            comment="",
            release=True,
            approved=approved,
        )
    make_breakpoint()  # waiting: not listed

    rows = json.loads(run("breakpoint_history", "--json"))
    limited = json.loads(run("breakpoint_history", "--limit", "1", "--json"))
    by_key = json.loads(run("breakpoint_history", "--key", "plan-review", "--json"))
    plain = run("breakpoint_history", "--limit", "1").strip().splitlines()

    assert [(r["key"], r["approved"]) for r in rows] == [
        ("plan-review", False),
        ("confirm.star-repo", False),
        ("plan-review", True),
    ]
    assert all(r["respondedBy"] == "alice" and r["decidedAt"] for r in rows)
    assert [r["breakpointId"] for r in limited] == [rows[0]["breakpointId"]]
    assert [r["approved"] for r in by_key] == [False, True]
    assert len(plain) == 1 and "plan-review\trejected\talice" in plain[0]
    with pytest.raises(CommandError, match="limit"):
        run("breakpoint_history", "--limit", "0")


def test_should_auto_approve_counts_one_agents_approvals_with_agent(make_breakpoint, reviewer):
    for agent_id in ("agent-a", "agent-a", "agent-b"):
        bp = make_breakpoint(
            agent_id=agent_id, payload={"question": "?", "breakpointId": "confirm.star-repo"}
        )
        feedback_add(breakpoint_id=bp.pk, actor=Actor.for_user(reviewer), comment="", release=True)

    def verdict(*args: str) -> dict:
        return json.loads(run("should_auto_approve", "confirm.star-repo", *args, "--json"))

    assert verdict("--agent", "agent-a", "--after-n", "2")["recommended"] is True
    assert verdict("--agent", "agent-a")["consecutiveApprovals"] == 2
    assert verdict("--agent", "agent-b")["consecutiveApprovals"] == 1
    assert verdict()["consecutiveApprovals"] == 3
    assert "consecutiveApprovals: 1" in run(
        "should_auto_approve", "confirm.star-repo", "--agent", "agent-b"
    )
