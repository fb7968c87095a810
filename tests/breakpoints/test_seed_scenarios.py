"""The seed guide's examples, run against the API as an agent, reviewers and an admin would."""

import re

from django.test import override_settings

from breakpoints.models import Breakpoint
from tests.support.factories import UserFactory

CREATE = "/api/breakpoints"


def create(agent_client, payload, **body):
    response = agent_client.post(CREATE, {"payload": payload, **body}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def respond(client, breakpoint_id, *, approved=True, comment="", option=None):
    body = {"comment": comment, "release": True, "approved": approved}
    if option is not None:
        body["option"] = option
    response = client.post(f"{CREATE}/{breakpoint_id}/feedback", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def poll(agent_client, breakpoint_id) -> dict:
    response = agent_client.get(f"{CREATE}/{breakpoint_id}/status")
    assert response.status_code == 200
    return response.json()


# --- Scenarios 1-3 -------------------------------------------------------------------------


def test_scenario_1_plan_approval_before_implementation(agent_client, reviewer_client):
    payload = {
        "question": "Review the implementation plan. Approve to proceed?",
        "title": "Plan Review",
        "context": {
            "runId": "run-42",
            "files": [{"path": "artifacts/plan.md", "format": "markdown"}],
        },
    }
    bp = create(agent_client, payload)
    assert bp["status"] == "waiting"
    assert (bp["key"], bp["runId"], bp["title"]) == ("plan-review", "run-42", "Plan Review")
    assert poll(agent_client, bp["breakpointId"])["result"] is None

    respond(reviewer_client, bp["breakpointId"], comment="Looks right")

    review = poll(agent_client, bp["breakpointId"])
    assert review["status"] == "released"
    assert review["result"]["approved"] is True
    assert review["result"]["feedback"] == "Looks right"
    assert review["result"]["respondedBy"] == "alice"


def test_scenario_1_rejection_gives_the_agent_the_reason(agent_client, reviewer_client):
    bp = create(agent_client, {"question": "Approve to proceed?", "title": "Plan Review"})

    respond(reviewer_client, bp["breakpointId"], approved=False, comment="Split phase 2")

    review = poll(agent_client, bp["breakpointId"])["result"]
    assert review["approved"] is False
    assert review["feedback"] == "Split phase 2"


def test_scenario_2_pre_deployment_approval(agent_client, reviewer_client):
    files = [
        {"path": "artifacts/final-report.md", "format": "markdown"},
        {"path": "artifacts/coverage-report.html", "format": "html"},
        {"path": "artifacts/quality-score.json", "format": "code", "language": "json"},
    ]
    payload = {
        "question": "Deploy to production?",
        "title": "Production Deployment",
        "context": {"runId": "run-7", "files": files},
    }
    bp = create(agent_client, payload)
    assert bp["payload"]["context"]["files"] == files
    assert bp["key"] == "production-deployment"

    respond(reviewer_client, bp["breakpointId"], comment="Go")

    assert poll(agent_client, bp["breakpointId"])["result"]["approved"] is True


def test_scenario_3_quality_score_review(agent_client, reviewer_client):
    iteration, score, target = 2, 72, 85
    payload = {
        "question": f"Iteration {iteration} complete. Quality: {score}/{target}. "
        f"Continue to iteration {iteration + 1}?",
        "title": f"Iteration {iteration} Review",
        "context": {
            "runId": "run-9",
            "files": [{"path": f"artifacts/iteration-{iteration}-report.md", "format": "markdown"}],
        },
    }
    bp = create(agent_client, payload)
    assert bp["key"] == "iteration-2-review"
    assert bp["question"] == "Iteration 2 complete. Quality: 72/85. Continue to iteration 3?"

    respond(reviewer_client, bp["breakpointId"], approved=False, comment="Stop; good enough")

    result = poll(agent_client, bp["breakpointId"])["result"]
    assert result["approved"] is False
    assert result["feedback"] == "Stop; good enough"


# --- Example 4: the robust rejection loop ----------------------------------------------------


def test_example_4_robust_rejection_loop_retries_with_previous_feedback(
    agent_client, reviewer_client
):
    reviewer_says = iter([(False, "Add a rollback section"), (False, "Name the owner"), (True, "")])
    approved, attempt, previous_feedback, seen = False, 0, None, []

    while not approved:
        attempt += 1
        question = (
            "Plan revised based on your feedback. Please review again."
            if previous_feedback
            else "Review the implementation plan. Approve to proceed?"
        )
        payload = {
            "question": question,
            "title": "Plan Review",
            "attempt": attempt,
            "context": {
                "runId": "run-1",
                "files": [{"path": "artifacts/plan.md", "format": "markdown"}],
            },
        }
        if previous_feedback:
            payload["previousFeedback"] = previous_feedback
        bp = create(agent_client, payload)

        # The reviewer sees the retry context.
        shown = reviewer_client.get(f"{CREATE}/{bp['breakpointId']}").json()
        seen.append((shown["payload"].get("attempt"), shown["payload"].get("previousFeedback")))
        decision, comment = next(reviewer_says)
        respond(reviewer_client, bp["breakpointId"], approved=decision, comment=comment)

        review = poll(agent_client, bp["breakpointId"])["result"]
        if review["approved"]:
            approved = True
        else:
            previous_feedback = review["feedback"]

    assert attempt == 3
    assert seen == [(1, None), (2, "Add a rollback section"), (3, "Name the owner")]
    history = list(
        Breakpoint.objects.filter(key="plan-review")
        .order_by("created_at")
        .values_list("status", "result__approved")
    )
    assert history == [("released", False), ("released", False), ("released", True)]


def test_attempt_must_be_a_positive_whole_number(agent_client):
    response = agent_client.post(
        CREATE, {"payload": {"question": "?", "attempt": 0}}, format="json"
    )

    assert response.status_code == 400
    assert "payload.attempt" in response.json()["error"]["details"]


# --- Routing ---------------------------------------------------------------------------------------


def test_routing_to_one_expert_group(agent_client, expert_member, client_for, reviewer_client):
    sue = client_for(expert_member("sue", "security-team"))
    bp = create(
        agent_client,
        {
            "question": "Review the security audit results?",
            "title": "Security Review",
            "expert": "security-team",
            "tags": ["security", "audit"],
        },
    )
    assert bp["experts"] == [{"name": "security-team", "resolved": True, "kind": "group"}]
    assert bp["tags"] == ["security", "audit"]
    queue = sue.get(CREATE, {"assignedTo": "me"}).json()["results"]
    assert [row["breakpointId"] for row in queue] == [bp["breakpointId"]]

    denied = reviewer_client.post(
        f"{CREATE}/{bp['breakpointId']}/feedback", {"release": True}, format="json"
    )
    assert denied.status_code == 403
    assert respond(sue, bp["breakpointId"])["result"]["respondedBy"] == "sue"


def test_routing_to_multiple_experts_any_of_them_answers(agent_client, expert_member, client_for):
    expert_member("tina", "tech-lead")
    archie = client_for(expert_member("archie", "architect"))
    bp = create(
        agent_client,
        {
            "question": "Approve the architecture changes?",
            "title": "Architecture Review",
            "expert": ["tech-lead", "architect"],
            "tags": ["architecture", "design"],
        },
    )
    assert [e["name"] for e in bp["experts"]] == ["tech-lead", "architect"]

    body = respond(archie, bp["breakpointId"], comment="Fine")

    assert body["status"] == "released"
    assert body["result"]["respondedBy"] == "archie"


@override_settings(BPM_PROJECT_OWNERS=["olivia"])
def test_routing_to_the_project_owner(agent_client, client_for):
    olivia = client_for(UserFactory(username="olivia", groups=["reviewers"]))
    bp = create(
        agent_client,
        {"question": "Approve the release?", "title": "Release Approval", "expert": "owner"},
    )

    assert bp["experts"] == [{"name": "owner", "resolved": True, "kind": "owner"}]
    assert respond(olivia, bp["breakpointId"])["result"]["respondedBy"] == "olivia"


def test_the_quorum_deployment_example(agent_client, three_experts, client_for):
    bp = create(
        agent_client,
        {
            "question": "Approve production deployment?",
            "title": "Production Deployment",
            "expert": ["tech-lead", "ops-lead", "security-lead"],
            "strategy": "quorum",
        },
    )
    assert bp["strategy"] == "quorum"
    assert all(e["resolved"] for e in bp["experts"])
    tina, sam = client_for(three_experts["tech-lead"]), client_for(three_experts["security-lead"])

    assert respond(tina, bp["breakpointId"], comment="Code ok")["status"] == "waiting"
    assert poll(agent_client, bp["breakpointId"])["status"] == "waiting"
    respond(sam, bp["breakpointId"], comment="Scan clean")

    result = poll(agent_client, bp["breakpointId"])["result"]
    assert result["approved"] is True  # a quorum approved
    assert result["respondedBy"] == ["tina", "sam"]
    assert [(r["seat"], r["approved"]) for r in result["allResponses"]] == [
        ("tech-lead", True),
        ("security-lead", True),
    ]


# --- Auto-approval rules ----------------------------------------------------------------------


def test_the_cli_rule_examples_through_the_api(admin_client, agent_client):
    confirm = admin_client.post(
        "/api/rules", {"pattern": "confirm.*", "note": "Routine confirmations"}, format="json"
    ).json()
    never = admin_client.post(
        "/api/rules",
        {
            "pattern": "gate.deploy-production",
            "action": "never-auto-approve",
            "note": "Always review prod deploys",
        },
        format="json",
    ).json()
    design = admin_client.post(
        "/api/rules",
        {"pattern": "*.review(tags contains 'design')", "note": "Auto-approve design reviews"},
        format="json",
    ).json()
    assert [r["id"] for r in admin_client.get("/api/rules").json()["results"]] == [
        confirm["id"],
        never["id"],
        design["id"],
    ]

    star = create(agent_client, {"question": "Star?", "breakpointId": "confirm.star-repo"})
    deploy = create(agent_client, {"question": "Deploy?", "breakpointId": "gate.deploy-production"})
    design_review = create(
        agent_client, {"question": "Design ok?", "breakpointId": "ui.review", "tags": ["design"]}
    )
    other_review = create(
        agent_client, {"question": "Copy ok?", "breakpointId": "ui.review", "tags": ["copy"]}
    )

    assert (star["status"], star["result"]["respondedBy"]) == ("released", f"rule:{confirm['id']}")
    assert deploy["status"] == "waiting"
    assert deploy["autoApproval"]["matchedRule"] == never["id"]
    assert design_review["status"] == "released"
    assert design_review["autoApproval"]["matchedRule"] == design["id"]
    assert other_review["status"] == "waiting"

    verdict = admin_client.get("/api/rules/evaluate", {"key": "confirm.star-repo"}).json()
    assert verdict["recommended"] is True
    assert admin_client.delete(f"/api/rules/{confirm['id']}").status_code == 204
    assert (
        admin_client.get("/api/rules/evaluate", {"key": "confirm.star-repo"}).json()["recommended"]
        is False
    )


def test_star_repo_auto_approves_after_three_consecutive_approvals(agent_client, reviewer_client):
    payload = {
        "question": "Confirm repository star?",
        "title": "Star Repository",
        "breakpointId": "confirm.star-repo",
        "autoApproveAfterN": 3,
        "presentAlwaysApprove": True,
        "tags": ["routine", "github"],
    }
    for expected_streak in range(3):
        bp = create(agent_client, payload)
        assert bp["status"] == "waiting"
        assert bp["autoApproval"]["consecutiveApprovals"] == expected_streak
        respond(reviewer_client, bp["breakpointId"])

    fourth = create(agent_client, payload)

    assert fourth["status"] == "released"
    assert fourth["key"] == "confirm.star-repo"
    assert fourth["result"]["approved"] is True
    assert fourth["result"]["respondedBy"] == "auto:after-3"
    assert fourth["autoApproval"] == {
        "recommended": True,
        "reason": "3 consecutive approvals (threshold 3)",
        "matchedRule": None,
        "consecutiveApprovals": 3,
    }


def test_a_rejection_restarts_the_star_repo_count(agent_client, reviewer_client):
    payload = {"question": "Star?", "breakpointId": "confirm.star-repo", "autoApproveAfterN": 3}
    for approved in (True, True, False, True, True):
        respond(reviewer_client, create(agent_client, payload)["breakpointId"], approved=approved)

    waiting = create(agent_client, payload)

    assert waiting["status"] == "waiting"
    assert waiting["autoApproval"]["consecutiveApprovals"] == 2


def test_breakpoint_id_is_derived_from_the_title(agent_client):
    bp = create(
        agent_client,
        {"question": "Review the design?", "title": "Review Design Document", "tags": ["design"]},
    )

    assert bp["key"] == "review-design-document"
    assert bp["status"] == "waiting"
    assert bp["autoApproval"]["reason"] == "No matching rule"


def test_pre_computed_auto_approval_matches_the_task_json_shape(admin_client, agent_client):
    rule_id = admin_client.post("/api/rules", {"pattern": "confirm.*"}, format="json").json()["id"]

    bp = create(
        agent_client,
        {
            "question": "Confirm repository star?",
            "title": "Star Repository",
            "breakpointId": "confirm.star-repo",
            "tags": ["routine", "github"],
        },
    )

    assert re.fullmatch(r"rule-[0-9a-f]{8}", rule_id)
    assert bp["autoApproval"] == {
        "recommended": True,
        "reason": f"Matched auto-approve rule: {rule_id}",
        "matchedRule": rule_id,
        "consecutiveApprovals": 0,
    }
