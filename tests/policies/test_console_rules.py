"""Auto-approval in the console: admins add and remove rules and always-break-on tags through
the services; reviewers use "Always approve", which releases and adds a rule for the key."""

from unittest import mock

import pytest

from breakpoints.models import Breakpoint, Feedback
from core.actors import Actor
from policies import autoapproval
from policies.models import AlwaysBreakOnTag, AutoApprovalRule
from tests.support.console import (
    QUEUE_URL,
    SECTIONS_URL,
    action_url,
    messages,
    review_url,
    session_client,
)

RULES_URL = "/admin/policies/autoapprovalrule/"
TAGS_URL = "/admin/policies/alwaysbreakontag/"


def _rule(pattern: str = "confirm.*", **fields) -> AutoApprovalRule:
    return autoapproval.rule_create(actor=Actor.system("test"), pattern=pattern, **fields)


# --- rules: admins only ---------------------------------------------------------------


def test_admin_adds_a_rule_through_the_form(admin_browser):
    assert admin_browser.get(RULES_URL + "add/").status_code == 200
    response = admin_browser.post(
        RULES_URL + "add/",
        {"pattern": "confirm.*", "action": "auto-approve", "note": "Routine confirmations"},
    )
    assert response.status_code == 302
    assert response["Location"] == RULES_URL
    rule = AutoApprovalRule.objects.get()
    assert (rule.pattern, rule.action, rule.note, rule.created_by) == (
        "confirm.*",
        "auto-approve",
        "Routine confirmations",
        "adam",
    )
    assert rule.pk.startswith("rule-")
    listing = admin_browser.get(RULES_URL)
    html = listing.content.decode()
    assert rule.pk in html and "<code>confirm.*</code>" in html and "Routine confirmations" in html
    assert "Evaluate a key" in html


def test_rule_form_stores_the_canonical_pattern_and_never_action(admin_browser):
    admin_browser.post(
        RULES_URL + "add/",
        {
            "pattern": "gate.*(TAGS contains 'prod')",
            "action": "never-auto-approve",
            "note": "",
        },
    )
    rule = AutoApprovalRule.objects.get()
    assert rule.pattern == "gate.*(tags contains 'prod')"
    assert rule.action == "never-auto-approve"


@pytest.mark.parametrize(
    ("pattern", "position"),
    [
        ("confirm.*(tags contains 'x'", 27),
        ("*.review(tags has 'x')", 14),
        ("confirm..$", 9),
    ],
)
def test_malformed_pattern_is_a_form_error_naming_the_position(admin_browser, pattern, position):
    response = admin_browser.post(
        RULES_URL + "add/", {"pattern": pattern, "action": "auto-approve"}
    )
    assert response.status_code == 200
    errors = response.context["form"].errors["pattern"]
    assert any(f"at position {position}" in error for error in errors), errors
    html = response.content.decode()
    assert f"at position {position}" in html
    # The caret sits under the character where parsing stopped.
    pointer = response.context["pointer"]["text"].split("\n")
    assert pointer == [pattern, " " * position + "^"]
    assert not AutoApprovalRule.objects.exists()


def test_blank_pattern_and_unknown_action_are_refused(admin_browser):
    response = admin_browser.post(RULES_URL + "add/", {"pattern": "", "action": "sometimes"})
    assert response.status_code == 200
    assert set(response.context["form"].errors) == {"pattern", "action"}
    assert not AutoApprovalRule.objects.exists()


def test_admin_removes_a_rule_through_rule_remove(admin_browser, console_admin):
    rule = _rule()
    assert admin_browser.get(f"{RULES_URL}{rule.pk}/delete/").status_code == 200
    with mock.patch.object(autoapproval, "rule_remove", wraps=autoapproval.rule_remove) as remove:
        response = admin_browser.post(f"{RULES_URL}{rule.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    remove.assert_called_once()
    assert remove.call_args.kwargs["rule_id"] == rule.pk
    assert remove.call_args.kwargs["actor"].user == console_admin
    assert not AutoApprovalRule.objects.exists()


def test_admin_removes_selected_rules_in_bulk(admin_browser):
    keep, first, second = _rule("keep.*"), _rule("a.*"), _rule("b.*")
    with mock.patch.object(autoapproval, "rule_remove", wraps=autoapproval.rule_remove) as remove:
        response = admin_browser.post(
            RULES_URL,
            {"action": "delete_selected", "_selected_action": [first.pk, second.pk], "post": "yes"},
        )
    assert response.status_code == 302
    assert remove.call_count == 2
    assert list(AutoApprovalRule.objects.values_list("pk", flat=True)) == [keep.pk]


def test_rules_are_never_edited_in_place(admin_browser):
    rule = _rule(note="original")
    page = admin_browser.get(f"{RULES_URL}{rule.pk}/change/")
    assert page.status_code == 200
    assert b'name="pattern"' not in page.content  # a read-only view
    admin_browser.post(f"{RULES_URL}{rule.pk}/change/", {"pattern": "*", "note": "forged"})
    rule.refresh_from_db()
    assert (rule.pattern, rule.note) == ("confirm.*", "original")


@pytest.mark.parametrize(
    "url",
    [
        RULES_URL,
        RULES_URL + "add/",
        RULES_URL + "evaluate/?key=confirm.x",
        TAGS_URL,
        TAGS_URL + "add/",
    ],
)
def test_reviewers_get_403_on_rules_and_tags(reviewer_browser, url):
    assert reviewer_browser.get(url).status_code == 403


def test_reviewer_cannot_add_or_remove_rules(reviewer_browser):
    rule = _rule()
    response = reviewer_browser.post(RULES_URL + "add/", {"pattern": "*", "action": "auto-approve"})
    assert response.status_code == 403
    response = reviewer_browser.post(f"{RULES_URL}{rule.pk}/delete/", {"post": "yes"})
    assert response.status_code == 403
    assert list(AutoApprovalRule.objects.values_list("pattern", flat=True)) == ["confirm.*"]
    sections = reviewer_browser.get(SECTIONS_URL).content
    assert b"/admin/policies/autoapprovalrule/" not in sections


def test_evaluate_a_key_shows_the_verdict_and_the_matched_rule(admin_browser):
    rule = _rule("confirm.*")
    response = admin_browser.get(RULES_URL + "evaluate/", {"key": "confirm.star-repo"})
    assert response.status_code == 200
    verdict = response.context["verdict"]
    assert verdict.recommended is True and verdict.matched_rule == rule.pk
    html = response.content.decode()
    assert f"Matched auto-approve rule: {rule.pk}" in html
    assert f"{RULES_URL}{rule.pk}/change/" in html


def test_evaluate_honours_always_break_on_tags(admin_browser, console_admin):
    _rule("confirm.*")
    autoapproval.always_break_on_add(actor=Actor.for_user(console_admin), tag="prod")
    response = admin_browser.get(
        RULES_URL + "evaluate/", {"key": "confirm.deploy", "tags": "ops, prod"}
    )
    verdict = response.context["verdict"]
    assert verdict.recommended is False
    assert "alwaysBreakOn" in verdict.reason


def test_evaluate_refuses_a_bad_key_with_a_form_error(admin_browser):
    response = admin_browser.get(RULES_URL + "evaluate/", {"key": "   "})
    assert response.status_code == 200
    assert response.context["verdict"] is None
    assert response.context["form"].errors


# --- always-break-on tags ----------------------------------------------------------------


def test_admin_adds_and_removes_an_always_break_on_tag(admin_browser):
    response = admin_browser.post(TAGS_URL + "add/", {"tag": "prod", "note": "Never unattended"})
    assert response.status_code == 302
    entry = AlwaysBreakOnTag.objects.get()
    assert (entry.tag, entry.note, entry.created_by) == ("prod", "Never unattended", "adam")
    assert autoapproval.always_break_on_tags() == ["prod"]

    with mock.patch.object(
        autoapproval, "always_break_on_remove", wraps=autoapproval.always_break_on_remove
    ) as remove:
        response = admin_browser.post(f"{TAGS_URL}{entry.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert remove.call_args.kwargs["tag"] == "prod"
    assert autoapproval.always_break_on_tags() == []


def test_too_long_tag_is_a_form_error(admin_browser):
    response = admin_browser.post(TAGS_URL + "add/", {"tag": "x" * 101})
    assert response.status_code == 200
    assert "tag" in response.context["form"].errors
    assert not AlwaysBreakOnTag.objects.exists()


# --- "Always approve" on the review screen ------------------------------------------------


def _always(client, bp, comment: str = ""):
    """Both steps: the confirmation page, then the confirmed always-approve."""
    step1 = client.post(action_url("always_approve", bp.pk), {"comment": comment})
    assert step1.status_code == 200, step1
    return step1, client.post(
        action_url("always_approve", bp.pk), {"comment": comment, "confirm": "yes"}
    )


def test_review_screen_offers_always_approve_by_default(reviewer_browser, make_breakpoint):
    bp = make_breakpoint()
    page = reviewer_browser.get(review_url(bp.pk)).content.decode()
    assert 'id="bpm-always-approve"' in page
    assert action_url("always_approve", bp.pk) in page


def test_always_approve_confirms_then_releases_and_adds_a_rule_by_the_reviewer(
    reviewer_browser, make_breakpoint
):
    bp = make_breakpoint(payload={"question": "Star the repo?", "breakpointId": "confirm.star"})
    step1, step2 = _always(reviewer_browser, bp, comment="Fine every time")

    html = step1.content.decode()
    assert "The agent will receive this result" in html
    assert "Fine every time" in html and "rita" in html
    assert "And an auto-approval rule will be added" in html
    assert "<code>confirm.star</code>" in html
    # Step 2 only: nothing happened on the confirmation page.
    assert step2.status_code == 302
    assert step2["Location"].startswith(QUEUE_URL)
    assert any("confirm.star" in m and "was approved" in m for m in messages(step2))

    bp.refresh_from_db()
    assert bp.status == "released"
    assert bp.result["approved"] is True
    assert bp.result["respondedBy"] == "rita"
    assert bp.result["feedback"] == "Fine every time"
    rule = AutoApprovalRule.objects.get()
    assert (rule.pattern, rule.action, rule.created_by) == ("confirm.star", "auto-approve", "rita")
    assert Feedback.objects.get(breakpoint=bp).releases is True


def test_confirmation_page_of_always_approve_changes_nothing(reviewer_browser, make_breakpoint):
    bp = make_breakpoint()
    reviewer_browser.post(action_url("always_approve", bp.pk), {"comment": ""})
    assert Breakpoint.objects.get(pk=bp.pk).status == "waiting"
    assert not AutoApprovalRule.objects.exists()
    assert not Feedback.objects.exists()


def test_the_next_breakpoint_with_that_key_is_auto_approved(reviewer_browser, make_breakpoint):
    payload = {"question": "Star the repo?", "breakpointId": "confirm.star"}
    _always(reviewer_browser, make_breakpoint(payload=payload))
    later = make_breakpoint(payload=payload)
    assert later.status == "released"
    assert later.result["respondedBy"] == f"rule:{AutoApprovalRule.objects.get().pk}"


def test_always_approve_is_not_offered_when_the_agent_says_so(reviewer_browser, make_breakpoint):
    bp = make_breakpoint(payload={"question": "Deploy?", "presentAlwaysApprove": False})
    page = reviewer_browser.get(review_url(bp.pk)).content.decode()
    assert 'id="bpm-always-approve"' not in page
    assert "Review and release" in page  # the ordinary release is still there
    response = reviewer_browser.post(
        action_url("always_approve", bp.pk), {"comment": "", "confirm": "yes"}, follow=True
    )
    assert any("Always approve" in m for m in messages(response))
    assert Breakpoint.objects.get(pk=bp.pk).status == "waiting"
    assert not AutoApprovalRule.objects.exists()


def test_always_approve_on_a_finished_breakpoint_is_a_message_not_an_error(
    reviewer_browser, make_breakpoint, console_admin
):
    from breakpoints.services import breakpoint_expire

    bp = make_breakpoint()
    breakpoint_expire(breakpoint_id=bp.pk, actor=Actor.for_user(console_admin))
    response = reviewer_browser.post(
        action_url("always_approve", bp.pk), {"confirm": "yes"}, follow=True
    )
    assert response.status_code == 200
    assert any("already expired" in m for m in messages(response))
    assert not AutoApprovalRule.objects.exists()


def test_always_approve_is_not_offered_to_a_reviewer_outside_the_routed_seats(
    reviewer_browser, make_breakpoint, expert_member
):
    expert_member("tina", "tech-lead")
    bp = make_breakpoint(payload={"question": "Merge?", "expert": "tech-lead"})
    page = reviewer_browser.get(review_url(bp.pk)).content.decode()
    assert 'id="bpm-always-approve"' not in page
    response = reviewer_browser.post(
        action_url("always_approve", bp.pk), {"confirm": "yes"}, follow=True
    )
    assert any("tech-lead" in m for m in messages(response))
    assert Breakpoint.objects.get(pk=bp.pk).status == "waiting"
    assert not AutoApprovalRule.objects.exists()


def test_always_approve_by_an_expert_on_a_quorum_is_a_vote_plus_the_rule(
    make_breakpoint, three_experts
):

    bp = make_breakpoint(
        payload={
            "question": "Deploy?",
            "breakpointId": "gate.deploy-staging",
            "expert": ["tech-lead", "ops-lead", "security-lead"],
            "strategy": "quorum",
        }
    )
    tina = session_client(three_experts["tech-lead"])
    step1, step2 = _always(tina, bp)
    assert b"Your vote" in step1.content
    assert step2.status_code == 302 and step2["Location"].startswith(review_url(bp.pk))
    assert any("other seats still have to vote" in m for m in messages(step2))
    bp.refresh_from_db()
    assert bp.status == "waiting"
    assert [(v["seat"], v["approved"]) for v in bp.votes] == [("tech-lead", True)]
    rule = AutoApprovalRule.objects.get()
    assert (rule.pattern, rule.created_by) == ("gate.deploy-staging", "tina")
