"""Auto-approval: the precedence table row by row, the N-consecutive counter, rules, history."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from audit.models import Event
from breakpoints import selectors
from breakpoints.models import Breakpoint, Feedback
from breakpoints.selectors import history
from breakpoints.services import (
    breakpoint_always_approve,
    breakpoint_cancel,
    breakpoint_expire,
    feedback_add,
)
from core.actors import Actor
from core.exceptions import Forbidden, InvalidInput, NotFound
from notifications.models import Delivery, Webhook
from policies import autoapproval
from policies.autoapproval import (
    always_break_on_add,
    always_break_on_remove,
    evaluate,
    rule_create,
    rule_remove,
)
from policies.models import AutoApprovalRule
from tests.support.receipts import unsealed

SYSTEM = Actor.system("test")


def auto(pattern: str, note: str = "") -> AutoApprovalRule:
    return rule_create(actor=SYSTEM, pattern=pattern, note=note)


def never(pattern: str) -> AutoApprovalRule:
    return rule_create(actor=SYSTEM, pattern=pattern, action="never-auto-approve")


def star_repo(make_breakpoint, n: int = 3, **extra):
    payload = {
        "question": "Confirm repository star?",
        "title": "Star Repository",
        "breakpointId": "confirm.star-repo",
        "autoApproveAfterN": n,
        "tags": ["routine", "github"],
        **extra,
    }
    return make_breakpoint(payload=payload)


def decide(bp, reviewer, approved: bool = True) -> None:
    feedback_add(
        breakpoint_id=bp.pk,
        actor=Actor.for_user(reviewer),
        comment="" if approved else "No",
        release=True,
        approved=approved,
    )


def manual_decisions(make_breakpoint, reviewer, *outcomes: bool, key="confirm.star-repo"):
    for approved in outcomes:
        decide(make_breakpoint(payload={"question": "?", "breakpointId": key}), reviewer, approved)


# --- the precedence table, one test per row -----------------------------------------------


def test_row_1_a_never_rule_wins_over_every_other_source(db, make_breakpoint, reviewer):
    manual_decisions(make_breakpoint, reviewer, True, True, True)
    auto("confirm.*")
    blocked = never("confirm.star-repo")

    verdict = evaluate(key="confirm.star-repo", tags=["routine"], auto_approve_after_n=3)

    assert verdict.recommended is False
    assert verdict.reason == f"Matched never-auto-approve rule: {blocked.pk}"
    assert verdict.matched_rule == blocked.pk
    assert verdict.consecutive_approvals == 3


def test_row_2_an_always_break_on_tag_wins_over_auto_rule_and_threshold(
    db, make_breakpoint, reviewer
):
    manual_decisions(make_breakpoint, reviewer, True, True, True)
    auto("confirm.*")
    always_break_on_add(actor=SYSTEM, tag="prod")

    verdict = evaluate(key="confirm.star-repo", tags=["routine", "prod"], auto_approve_after_n=3)

    assert verdict.as_dict() == {
        "recommended": False,
        "reason": "Tag 'prod' is in alwaysBreakOn",
        "matchedRule": None,
        "consecutiveApprovals": 3,
    }


def test_row_3_an_auto_approve_rule_approves_without_history(db):
    rule = auto("confirm.*", note="Routine confirmations")

    verdict = evaluate(key="confirm.star-repo", tags=["routine"], auto_approve_after_n=3)

    assert verdict.recommended is True
    assert verdict.reason == f"Matched auto-approve rule: {rule.pk}"
    assert verdict.matched_rule == rule.pk
    assert verdict.consecutive_approvals == 0
    assert verdict.responder == f"rule:{rule.pk}"


def test_row_4_n_consecutive_manual_approvals_approve(db, make_breakpoint, reviewer):
    manual_decisions(make_breakpoint, reviewer, True, True)
    assert evaluate(key="confirm.star-repo", auto_approve_after_n=3).recommended is False

    manual_decisions(make_breakpoint, reviewer, True)
    verdict = evaluate(key="confirm.star-repo", auto_approve_after_n=3)

    assert verdict.as_dict() == {
        "recommended": True,
        "reason": "3 consecutive approvals (threshold 3)",
        "matchedRule": None,
        "consecutiveApprovals": 3,
    }
    assert verdict.responder == "auto:after-3"


def test_row_5_nothing_matching_prompts(db, make_breakpoint, reviewer):
    auto("deploy.*")
    never("gate.*")
    manual_decisions(make_breakpoint, reviewer, True, True, True)

    verdict = evaluate(key="confirm.star-repo", tags=["routine"])

    assert verdict.recommended is False
    assert verdict.reason == "No matching rule"
    assert verdict.matched_rule is None
    assert verdict.consecutive_approvals == 3


# --- the N-consecutive counter ----------------------------------------------------------------


def test_a_rejection_resets_the_consecutive_count(db, make_breakpoint, reviewer):
    manual_decisions(make_breakpoint, reviewer, True, True, False, True, True)

    before = evaluate(key="confirm.star-repo", auto_approve_after_n=3)
    assert (before.recommended, before.consecutive_approvals) == (False, 2)

    manual_decisions(make_breakpoint, reviewer, True)
    after = evaluate(key="confirm.star-repo", auto_approve_after_n=3)
    assert (after.recommended, after.consecutive_approvals) == (True, 3)


def test_the_counter_is_per_key(db, make_breakpoint, reviewer):
    manual_decisions(make_breakpoint, reviewer, True, True, True, key="confirm.other")

    verdict = evaluate(key="confirm.star-repo", auto_approve_after_n=3)

    assert verdict.consecutive_approvals == 0
    assert verdict.recommended is False


def test_expired_cancelled_and_waiting_ones_neither_count_nor_reset(
    db, make_breakpoint, reviewer, admin_user
):
    manual_decisions(make_breakpoint, reviewer, True, True)
    expired = star_repo(make_breakpoint)
    breakpoint_expire(breakpoint_id=expired.pk, actor=Actor.for_user(admin_user))
    cancelled = star_repo(make_breakpoint)
    breakpoint_cancel(breakpoint_id=cancelled.pk, actor=Actor.for_agent("agent-a"))
    star_repo(make_breakpoint)  # still waiting

    assert evaluate(key="confirm.star-repo", auto_approve_after_n=3).consecutive_approvals == 2


def test_auto_approvals_do_not_break_the_streak(db, make_breakpoint, reviewer):
    for _ in range(3):
        decide(star_repo(make_breakpoint), reviewer)

    fourth = star_repo(make_breakpoint)
    fifth = star_repo(make_breakpoint)

    assert fourth.status == fifth.status == "released"
    assert fifth.result["respondedBy"] == "auto:after-3"
    assert fifth.auto_approval["consecutiveApprovals"] == 3


def test_the_counter_reads_at_most_n_rows(db, make_breakpoint, reviewer):
    manual_decisions(make_breakpoint, reviewer, True, True, True, True, True)

    with CaptureQueriesContext(connection) as captured:
        assert selectors.consecutive_approvals("confirm.star-repo", limit=3) == 3

    assert len(captured.captured_queries) == 1
    assert "LIMIT 3" in captured.captured_queries[0]["sql"]


def test_without_a_threshold_the_count_is_reported_but_never_approves(
    db, make_breakpoint, reviewer
):
    manual_decisions(make_breakpoint, reviewer, *([True] * 4))

    verdict = evaluate(key="confirm.star-repo", auto_approve_after_n=-1)

    assert verdict.recommended is False
    assert verdict.consecutive_approvals == 4


# --- predicates and rule management ------------------------------------------------------------


def test_rule_predicates_must_all_hold(db):
    rule = auto("gate.*(tags contains 'prerequisites' AND expert = 'owner')")

    assert evaluate(key="gate.merge", tags=["prerequisites"], experts=["owner"]).matched_rule == (
        rule.pk
    )
    assert evaluate(key="gate.merge", tags=["prerequisites"], experts=["ops"]).recommended is False
    assert evaluate(key="gate.merge", tags=[], experts=["owner"]).recommended is False
    assert (
        evaluate(key="plan.merge", tags=["prerequisites"], experts=["owner"]).recommended is False
    )


def test_rules_are_stored_in_canonical_form_with_id_author_and_time(db):
    rule = rule_create(
        actor=SYSTEM, pattern='  *.review( TAGS contains "design" )', note=" Design reviews "
    )

    stored = AutoApprovalRule.objects.get(pk=rule.pk)
    assert stored.pattern == "*.review(tags contains 'design')"
    assert stored.action == "auto-approve"
    assert stored.note == "Design reviews"
    assert stored.created_by == "system:test"
    assert stored.created_at is not None
    assert len(stored.pk) == 13 and stored.pk.startswith("rule-")
    int(stored.pk[5:], 16)


def test_a_malformed_pattern_names_the_position(db):
    with pytest.raises(InvalidInput) as raised:
        rule_create(actor=SYSTEM, pattern="confirm.*(tags has 'x')")

    assert raised.value.details["position"] == 15
    assert "position 15" in raised.value.message
    assert AutoApprovalRule.objects.count() == 0


def test_only_admins_and_the_system_manage_rules(db, reviewer, admin_user):
    with pytest.raises(Forbidden):
        rule_create(actor=Actor.for_user(reviewer), pattern="confirm.*")
    with pytest.raises(Forbidden):
        rule_create(actor=Actor.for_agent("agent-a"), pattern="confirm.*")
    rule = rule_create(actor=Actor.for_user(admin_user), pattern="confirm.*")
    with pytest.raises(Forbidden):
        rule_remove(actor=Actor.for_user(reviewer), rule_id=rule.pk)

    rule_remove(actor=Actor.for_user(admin_user), rule_id=rule.pk)

    assert not AutoApprovalRule.objects.exists()
    with pytest.raises(NotFound):
        rule_remove(actor=SYSTEM, rule_id=rule.pk)


def test_always_break_on_tags_can_be_added_and_removed(db):
    always_break_on_add(actor=SYSTEM, tag="prod")
    always_break_on_add(actor=SYSTEM, tag="prod")  # idempotent
    auto("deploy.*")
    assert autoapproval.always_break_on_tags() == ["prod"]
    assert evaluate(key="deploy.eu", tags=["prod"]).recommended is False

    always_break_on_remove(actor=SYSTEM, tag="prod")

    assert evaluate(key="deploy.eu", tags=["prod"]).recommended is True


# --- breakpoint_create with the verdict ---------------------------------------------------------


def test_create_stores_the_verdict_and_waits_when_not_recommended(db, make_breakpoint):
    bp = make_breakpoint()

    stored = Breakpoint.objects.get(pk=bp.pk)
    assert stored.status == "waiting"
    assert stored.auto_approval == {
        "recommended": False,
        "reason": "No matching rule",
        "matchedRule": None,
        "consecutiveApprovals": 0,
    }
    assert list(Event.objects.filter(breakpoint=bp).values_list("type", flat=True)) == ["created"]


def test_create_matching_an_auto_rule_is_released_at_once_with_events_and_webhooks(
    db, make_breakpoint
):
    Webhook.objects.create(url="https://hooks.example.com/bpm")
    rule = auto("confirm.*")

    bp = star_repo(make_breakpoint, n=-1)

    stored = Breakpoint.objects.get(pk=bp.pk)
    assert stored.status == "released"
    assert stored.released_at is not None
    feedback = f"Auto-approved: Matched auto-approve rule: {rule.pk}"
    unsealed_result = unsealed(stored.result, via="rule")
    assert {k: v for k, v in unsealed_result.items() if k != "allResponses"} == {
        "approved": True,
        "response": feedback,
        "feedback": feedback,
        "respondedBy": f"rule:{rule.pk}",
    }
    [vote] = stored.result["allResponses"]
    assert (vote["respondedBy"], vote["approved"], vote["feedback"]) == (
        f"rule:{rule.pk}",
        True,
        feedback,
    )
    assert stored.auto_approval["recommended"] is True
    assert stored.auto_approval["matchedRule"] == rule.pk
    events = list(Event.objects.filter(breakpoint=bp).values_list("type", "actor"))
    assert events == [
        ("created", "agent:agent-a"),
        ("auto_approved", f"rule:{rule.pk}"),
        ("released", f"rule:{rule.pk}"),
    ]
    released = Event.objects.get(breakpoint=bp, type="released")
    assert released.metadata["autoApproved"] is True
    deliveries = Delivery.objects.filter(breakpoint=bp).order_by("created_at")
    assert sorted(deliveries.values_list("event_type", flat=True)) == ["created", "released"]
    released_body = deliveries.get(event_type="released").body
    assert released_body["data"]["status"] == "released"
    assert released_body["data"]["result"]["respondedBy"] == f"rule:{rule.pk}"


# --- "Always approve" ---------------------------------------------------------------------------


def test_always_approve_approves_and_adds_a_rule_for_the_key(db, make_breakpoint, reviewer):
    bp = star_repo(make_breakpoint, n=-1)

    feedback, released, rule = breakpoint_always_approve(
        breakpoint_id=bp.pk, actor=Actor.for_user(reviewer), comment="Always fine"
    )

    assert released.status == "released"
    assert Breakpoint.objects.get(pk=bp.pk).result["respondedBy"] == "alice"
    assert feedback.releases is True and feedback.approved is True
    stored = AutoApprovalRule.objects.get(pk=rule.pk)
    assert (stored.pattern, stored.action, stored.created_by) == (
        "confirm.star-repo",
        "auto-approve",
        "alice",
    )
    assert bp.pk in stored.note
    again = star_repo(make_breakpoint, n=-1)
    assert again.status == "released"
    assert again.result["respondedBy"] == f"rule:{rule.pk}"


def test_always_approve_reuses_an_identical_rule(db, make_breakpoint, reviewer):
    existing = auto("plan-review")
    rule_count = AutoApprovalRule.objects.count()
    never("plan-review")  # keeps the next one waiting
    bp = make_breakpoint()

    _, _, rule = breakpoint_always_approve(breakpoint_id=bp.pk, actor=Actor.for_user(reviewer))

    assert rule.pk == existing.pk
    assert AutoApprovalRule.objects.count() == rule_count + 1


def test_always_approve_is_refused_when_the_agent_did_not_offer_it(db, make_breakpoint, reviewer):
    bp = star_repo(make_breakpoint, n=-1, presentAlwaysApprove=False)

    with pytest.raises(InvalidInput):
        breakpoint_always_approve(breakpoint_id=bp.pk, actor=Actor.for_user(reviewer))

    assert Breakpoint.objects.get(pk=bp.pk).status == "waiting"
    assert not AutoApprovalRule.objects.exists()
    assert not Feedback.objects.filter(breakpoint=bp).exists()


def test_always_approve_respects_routing(db, make_breakpoint, reviewer):
    bp = make_breakpoint(payload={"question": "?", "title": "Sec", "expert": "security-team"})

    with pytest.raises(Forbidden):
        breakpoint_always_approve(breakpoint_id=bp.pk, actor=Actor.for_user(reviewer))

    assert not AutoApprovalRule.objects.exists()
    assert Breakpoint.objects.get(pk=bp.pk).status == "waiting"


# --- history ------------------------------------------------------------------------------------


def test_history_lists_decisions_newest_first_with_limit_and_key(db, make_breakpoint, reviewer):
    manual_decisions(make_breakpoint, reviewer, True, False, key="confirm.star-repo")
    manual_decisions(make_breakpoint, reviewer, True, key="plan.review")
    make_breakpoint()  # waiting: not a decision
    rule = auto("auto.*")
    make_breakpoint(payload={"question": "?", "breakpointId": "auto.one"})

    rows = history(limit=10)
    assert [(r["key"], r["approved"], r["autoApproved"]) for r in rows] == [
        ("auto.one", True, True),
        ("plan.review", True, False),
        ("confirm.star-repo", False, False),
        ("confirm.star-repo", True, False),
    ]
    assert rows[0]["respondedBy"] == f"rule:{rule.pk}"
    assert rows[1]["respondedBy"] == "alice"
    assert len(history(limit=2)) == 2
    assert [r["approved"] for r in history(limit=10, key="confirm.star-repo")] == [False, True]
    with pytest.raises(InvalidInput):
        history(limit=0)


# --- the counter is per (agent, key) (issue 9, defect 13) ----------------------------------------


def star_repo_by(make_breakpoint, agent_id: str, n: int = 3):
    payload = {"question": "Confirm repository star?", "breakpointId": "confirm.star-repo"}
    return make_breakpoint(agent_id=agent_id, payload={**payload, "autoApproveAfterN": n})


def decisions_by(make_breakpoint, reviewer, *decisions: tuple[str, bool]) -> None:
    """Manual decisions on confirm.star-repo, in order, each by (agent, approved)."""
    for agent_id, approved in decisions:
        decide(star_repo_by(make_breakpoint, agent_id, n=-1), reviewer, approved)


def test_another_agent_reusing_a_key_does_not_inherit_the_approvals(db, make_breakpoint, reviewer):
    decisions_by(make_breakpoint, reviewer, ("agent-a", True), ("agent-a", True), ("agent-a", True))

    other = star_repo_by(make_breakpoint, "agent-b")

    other.refresh_from_db()
    assert other.status == "waiting"
    assert other.result is None
    assert other.auto_approval == {
        "recommended": False,
        "reason": "No matching rule",
        "matchedRule": None,
        "consecutiveApprovals": 0,
    }
    assert not Event.objects.filter(breakpoint=other, type="auto_approved").exists()
    verdict = evaluate(key="confirm.star-repo", agent_id="agent-b", auto_approve_after_n=3)
    assert (verdict.recommended, verdict.consecutive_approvals) == (False, 0)


def test_an_agents_own_approvals_still_count_when_other_agents_share_the_key(
    db, make_breakpoint, reviewer
):
    decisions_by(
        make_breakpoint,
        reviewer,
        ("agent-a", True),
        ("agent-b", True),
        ("agent-a", True),
        ("agent-b", True),
        ("agent-a", True),
    )

    mine = star_repo_by(make_breakpoint, "agent-a")
    theirs = star_repo_by(make_breakpoint, "agent-b")

    mine.refresh_from_db()
    theirs.refresh_from_db()
    assert mine.status == "released"
    assert mine.result["approved"] is True
    assert mine.result["respondedBy"] == "auto:after-3"
    assert mine.auto_approval["consecutiveApprovals"] == 3
    assert theirs.status == "waiting"
    assert theirs.auto_approval["consecutiveApprovals"] == 2


def test_a_rejection_resets_only_its_own_agents_count(db, make_breakpoint, reviewer):
    decisions_by(
        make_breakpoint,
        reviewer,
        ("agent-a", True),
        ("agent-a", True),
        ("agent-b", False),  # another agent's rejection leaves agent-a's streak alone
        ("agent-a", True),
    )
    assert evaluate(key="confirm.star-repo", agent_id="agent-a").consecutive_approvals == 3
    assert evaluate(key="confirm.star-repo", agent_id="agent-b").consecutive_approvals == 0

    decisions_by(make_breakpoint, reviewer, ("agent-a", False))  # its own rejection resets it
    after_reset = star_repo_by(make_breakpoint, "agent-a")

    after_reset.refresh_from_db()
    assert after_reset.status == "waiting"
    assert after_reset.auto_approval["consecutiveApprovals"] == 0


def test_without_an_agent_the_count_spans_every_agent_using_the_key(db, make_breakpoint, reviewer):
    decisions_by(make_breakpoint, reviewer, ("agent-a", True), ("agent-b", True))

    assert evaluate(key="confirm.star-repo").consecutive_approvals == 2


def test_the_per_agent_counter_reads_at_most_n_rows(db, make_breakpoint, reviewer):
    decisions_by(make_breakpoint, reviewer, *[("agent-a", True)] * 4)

    with CaptureQueriesContext(connection) as captured:
        assert (
            selectors.consecutive_approvals("confirm.star-repo", agent_id="agent-a", limit=3) == 3
        )

    [query] = captured.captured_queries
    assert "LIMIT 3" in query["sql"]
    assert "agent-a" in query["sql"]
