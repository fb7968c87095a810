"""The JIRA channel against a real local JIRA stand-in: issues, comments, transitions, faults.

Deliveries are written by the services (a route with a jira channel) and attempted with
`notifications.services.delivery_attempt(id)`; every assertion is about what crossed the
socket to the stand-in, or rows in the database.
"""

from datetime import timedelta

import pytest
from django.utils import timezone

from breakpoints.representation.contract import console_url
from breakpoints.services import breakpoint_cancel, breakpoint_expire, feedback_add
from core.actors import Actor
from policies.routes import route_add
from tests.support.jira import TOKEN, attempt, blocks, created_issue, deliveries, only
from tests.support.records import make_due

pytest_plugins = ["tests.support.jira"]  # jira, audit_route, audited

ISSUE = r"/issue/[^/]+"


# --- creation ------------------------------------------------------------------------------


def test_an_audit_required_breakpoint_gets_an_issue_with_its_fields(jira, audited):
    bp = audited(
        title="Deploy the billing service",
        tags=["audit", "prod db", "  billing  "],
        payload={
            "question": "Ship release 4.2 to production?",
            "title": "Deploy the billing service",
            "context": {
                "runId": "run-77",
                "files": [
                    {"path": "plan.md", "format": "markdown", "content": "# Plan\nstep 1"},
                    {"path": "empty.txt", "format": "text"},
                ],
            },
        },
    )

    delivery = only(bp, "created")
    assert delivery.target == {"project": "OPS"}
    assert attempt(delivery).status == "delivered"

    (call,) = jira.calls_to("POST", "/issue")
    assert call.user == "bpm-bot"  # basic auth with JIRA_USER / JIRA_TOKEN
    fields = call.body["fields"]
    assert fields["project"] == {"key": "OPS"}
    assert fields["issuetype"] == {"name": "Task"}
    assert fields["summary"] == "Deploy the billing service"
    assert fields["labels"] == ["audit", "prod-db", "billing", f"bpm-{bp.pk}"]
    description = fields["description"]
    assert f"[{console_url(bp.pk)}]" in description
    assert console_url(bp.pk).startswith("https://bpm.example.test/admin/")
    details, plan = blocks(description)
    assert "Question:\nShip release 4.2 to production?" in details
    assert "Tags: audit, prod db, billing" in details
    assert "Agent: agent-a" in details
    assert plan == "plan.md (markdown)\n\n# Plan\nstep 1"
    assert "empty.txt" not in description  # no content: nothing to excerpt

    delivery.refresh_from_db()
    assert delivery.reply == {"key": "OPS-1"}
    assert jira.issues["OPS-1"].fields["summary"] == "Deploy the billing service"


def test_hostile_text_reaches_jira_as_text(jira, audited):
    hostile = (
        "Approve?\n{noformat}\n[click|javascript:alert(1)] {html}<script>x()</script>{html} "
        "!http://evil.test/p.png! *bold* {NoFormat}"
    )
    bp = audited(
        title="Line one\nLine two {noformat} " + "x" * 400,
        payload={"question": hostile, "title": "t"},
    )

    created_issue(bp)

    fields = jira.calls_to("POST", "/issue")[0].body["fields"]
    assert "\n" not in fields["summary"]
    assert len(fields["summary"]) == 255
    assert fields["summary"].startswith("Line one Line two {noformat} xxx")
    description = fields["description"]
    # Only our own markers open and close blocks: the agent's were defused, nothing else.
    assert description.count("{noformat}") == 2
    (details,) = blocks(description)
    defused = hostile.replace("{noformat}", "{ noformat}").replace("{NoFormat}", "{ NoFormat}")
    assert details.endswith(defused)
    assert "<script>x()</script>" in details and "[click|javascript:alert(1)]" in details


def test_a_long_question_and_many_files_stay_under_jira_s_limit(jira, audited):
    files = [{"path": f"f{i}.py", "format": "code", "content": "y" * 50_000} for i in range(8)]
    bp = audited(payload={"question": "q" * 20_000, "title": "big", "context": {"files": files}})

    created_issue(bp)

    description = jira.calls_to("POST", "/issue")[0].body["fields"]["description"]
    assert len(description) < 32_767
    assert "(10000 more characters)" in description
    assert "… and 3 more in the console." in description


# --- feedback ------------------------------------------------------------------------------


def test_every_feedback_is_a_comment_on_the_issue(jira, audited, reviewer):
    bp = audited()
    key = created_issue(bp)

    feedback_add(breakpoint_id=bp.pk, actor=Actor.for_user(reviewer), comment="Check {noformat} x")
    feedback_add(breakpoint_id=bp.pk, actor=Actor.for_user(reviewer), comment="Second look")
    first, second = sorted(deliveries(bp, "feedback"), key=lambda d: d.created_at)
    assert attempt(first).status == "delivered"
    assert attempt(second).status == "delivered"

    bodies = [c.body["body"] for c in jira.calls_to("POST", f"{ISSUE}/comment")]
    assert [blocks(body) for body in bodies] == [
        ["alice: Check { noformat} x"],
        ["alice: Second look"],
    ]
    assert [c["body"] for c in jira.issues[key].comments] == bodies


def test_feedback_waits_for_the_issue_to_exist(jira, audited, reviewer):
    bp = audited()
    feedback_add(breakpoint_id=bp.pk, actor=Actor.for_user(reviewer), comment="Early")
    early = only(bp, "feedback")

    outcome = attempt(early)

    assert (outcome.status, outcome.error) == ("retry", "issue not created yet")
    assert jira.calls == []
    key = created_issue(bp)
    make_due(early)
    assert attempt(early).status == "delivered"
    assert blocks(jira.issues[key].comments[0]["body"]) == ["alice: Early"]


# --- outcomes ------------------------------------------------------------------------------


def test_an_approval_comments_the_outcome_and_moves_the_issue_to_done(jira, audited, reviewer):
    bp = audited()
    key = created_issue(bp)

    feedback_add(
        breakpoint_id=bp.pk,
        actor=Actor.for_user(reviewer),
        comment="Ship it",
        release=True,
        approved=True,
    )
    released = only(bp, "released")
    assert attempt(released).status == "delivered"

    issue = jira.issues[key]
    assert issue.status == "Done"
    (comment,) = issue.comments  # the feedback delivery is a separate one, not sent here
    assert comment["body"].startswith("The breakpoint was approved in the Breakpoint Manager.")
    assert blocks(comment["body"]) == ["By: alice\nFeedback: Ship it"]
    (post,) = jira.calls_to("POST", f"{ISSUE}/transitions")
    assert post.body == {"transition": {"id": "31"}}
    released.refresh_from_db()
    assert released.reply == {"key": key, "commented": True, "transition": "Done"}


@pytest.mark.parametrize("ending", ["rejected", "expired", "cancelled"])
def test_other_endings_move_the_issue_to_won_t_do(jira, audited, reviewer, admin_user, ending):
    bp = audited()
    key = created_issue(bp)

    if ending == "rejected":
        feedback_add(
            breakpoint_id=bp.pk,
            actor=Actor.for_user(reviewer),
            comment="Too risky",
            release=True,
            approved=False,
        )
        event, said = "released", "rejected"
    elif ending == "expired":
        breakpoint_expire(breakpoint_id=bp.pk, actor=Actor.for_user(admin_user), reason="Stale")
        event, said = "expired", "expired"
    else:
        breakpoint_cancel(breakpoint_id=bp.pk, actor=Actor.for_agent("agent-a"), reason="Plan B")
        event, said = "cancelled", "cancelled"
    assert attempt(only(bp, event)).status == "delivered"

    issue = jira.issues[key]
    assert issue.status == "Won't Do"
    assert issue.comments[-1]["body"].startswith(f"The breakpoint was {said} in the")
    assert jira.calls_to("POST", f"{ISSUE}/transitions")[0].body == {"transition": {"id": "41"}}


def test_a_transition_name_jira_does_not_offer_fails_at_once_naming_the_offered_ones(
    jira, audited, reviewer, settings
):
    settings.JIRA_DONE_TRANSITION = "Ship It"
    bp = audited()
    key = created_issue(bp)
    feedback_add(breakpoint_id=bp.pk, actor=Actor.for_user(reviewer), comment="", release=True)
    released = only(bp, "released")

    outcome = attempt(released)

    assert outcome.status == "failed"
    assert "no transition named 'Ship It'" in outcome.error
    assert "available: Approve, Reject, Done, Won't Do" in outcome.error
    assert jira.issues[key].status == "To Do"
    released.refresh_from_db()
    assert (released.status, released.attempts) == ("failed", 1)


def test_a_transition_that_failed_is_retried_without_a_second_comment(jira, audited, reviewer):
    bp = audited()
    key = created_issue(bp)
    feedback_add(breakpoint_id=bp.pk, actor=Actor.for_user(reviewer), comment="ok", release=True)
    released = only(bp, "released")
    jira.fail_next(503, method="POST", path=f"{ISSUE}/transitions")

    assert attempt(released).status == "retry"
    make_due(released)
    assert attempt(released).status == "delivered"

    assert len(jira.issues[key].comments) == 1
    assert jira.issues[key].status == "Done"


def test_the_outcome_waits_for_the_issue(jira, audited, reviewer):
    bp = audited()
    feedback_add(breakpoint_id=bp.pk, actor=Actor.for_user(reviewer), comment="", release=True)

    outcome = attempt(only(bp, "released"))

    assert (outcome.status, outcome.error) == ("retry", "issue not created yet")


# --- JIRA down --------------------------------------------------------------------------


def test_a_500_is_retried_and_one_issue_is_created_once_jira_is_back(jira, audited):
    bp = audited()
    delivery = only(bp, "created")
    jira.fail_next(500)

    first = attempt(delivery)

    assert (first.status, first.status_code) == ("retry", 500)
    assert jira.issues == {}
    make_due(delivery)
    assert attempt(delivery).status == "delivered"
    assert list(jira.issues) == ["OPS-1"]


def test_a_429_is_retried_no_sooner_than_retry_after(jira, audited):
    bp = audited()
    delivery = only(bp, "created")
    jira.fail_next(429, retry_after=600)
    before = timezone.now()

    assert attempt(delivery).status == "retry"

    delivery.refresh_from_db()
    assert delivery.last_status_code == 429
    assert delivery.next_attempt_at >= before + timedelta(seconds=599)
    assert attempt(delivery).status == "skipped"  # not due yet
    make_due(delivery)
    assert attempt(delivery).status == "delivered"
    assert list(jira.issues) == ["OPS-1"]


def test_jira_unreachable_is_retried_and_delivered_once_it_listens_again(jira, audited):
    bp = audited()
    delivery = only(bp, "created")
    jira.stop()

    outcome = attempt(delivery)

    assert outcome.status == "retry"
    assert outcome.error.startswith("JIRA unreachable: ConnectError")
    jira.start()
    make_due(delivery)
    assert attempt(delivery).status == "delivered"
    assert list(jira.issues) == ["OPS-1"]


def test_an_answer_lost_after_jira_created_the_issue_makes_no_second_issue(jira, audited):
    bp = audited()
    delivery = only(bp, "created")
    jira.lose_next_create()

    assert attempt(delivery).status == "retry"
    make_due(delivery)
    assert attempt(delivery).status == "delivered"

    assert list(jira.issues) == ["OPS-1"]
    assert len(jira.calls_to("POST", "/issue")) == 1
    (search,) = jira.calls_to("GET", "/search")
    assert search.query["jql"] == [f'project = "OPS" AND labels = "bpm-{bp.pk}"']
    delivery.refresh_from_db()
    assert delivery.reply == {"key": "OPS-1"}


def test_a_4xx_fails_at_once_with_jira_s_message_and_never_the_token(
    jira, admin_user, make_breakpoint, settings
):
    route_add(
        actor=Actor.for_user(admin_user),
        name="unknown project",
        pattern="*",
        channels=[{"kind": "jira", "project": "NOPE"}],
    )
    bp = make_breakpoint()
    delivery = only(bp, "created")

    outcome = attempt(delivery)

    assert (outcome.status, outcome.status_code) == ("failed", 400)
    assert "project: valid project is required" in outcome.error
    delivery.refresh_from_db()
    assert delivery.status == "failed" and TOKEN not in delivery.last_error


def test_wrong_credentials_fail_at_once_without_the_token(jira, audited, settings):
    settings.JIRA_TOKEN = "wrong-" + TOKEN
    bp = audited()

    outcome = attempt(only(bp, "created"))

    assert (outcome.status, outcome.status_code) == ("failed", 401)
    assert "You are not authenticated" in outcome.error
    assert TOKEN not in outcome.error
    assert jira.issues == {}
