"""The JIRA webhook: a status change made in JIRA (the stand-in) decides the breakpoint.

A person moves the issue on the stand-in over real HTTP; the stand-in records the
`jira:issue_updated` payload JIRA would send, and the test posts it to the endpoint.
"""

import json
import logging

import pytest

from accounts.people import TWINS_REFUSAL
from audit.models import Event
from breakpoints.models import Breakpoint, Feedback
from breakpoints.services import feedback_add
from core.actors import Actor
from notifications.models import Delivery
from tests.support.factories import ReviewerFactory, UserFactory
from tests.support.jira import (
    SECRET,
    URL,
    attempt,
    blocks,
    created_issue,
    deliveries,
    move,
    only,
    post,
)
from tests.support.records import make_due, refusals

pytest_plugins = ["tests.support.jira"]  # jira, audit_route, audited

PEOPLE = {"alice@example.com": "alice-token", "mallory@elsewhere.test": "m-token"}
ISSUE_PATH = r"/issue/[^/]+"


@pytest.fixture
def hook(settings, jira):
    settings.JIRA_WEBHOOK_SECRET = SECRET
    jira.users.update(PEOPLE)
    return jira


@pytest.fixture
def issue(hook, audited):
    """An audit-required breakpoint whose issue exists: (breakpoint, key)."""
    bp = audited()
    return bp, created_issue(bp)


def assert_untouched(bp) -> None:
    bp.refresh_from_db()
    assert bp.status == "waiting"
    assert not Feedback.objects.filter(breakpoint=bp).exists()


@pytest.fixture
def alice(reviewer):
    assert reviewer.email == "alice@example.com"
    return reviewer


# --- who may call ----------------------------------------------------------------------


@pytest.mark.parametrize("secret", [None, "", "wrong", SECRET + "x"])
def test_a_missing_or_wrong_secret_is_refused_and_changes_nothing(
    client, jira, issue, alice, secret, caplog
):
    bp, key = issue
    payload = move(jira, key, "Approved")

    with caplog.at_level(logging.WARNING, logger="breakpoints.audit"):
        response = post(client, payload, secret=secret)

    assert response.status_code == 401
    assert response.json()["outcome"] == "refused"
    assert_untouched(bp)
    assert refusals(bp) == []
    (record,) = [r for r in caplog.records if r.name == "breakpoints.audit"]
    assert record.reason == "bad secret" and SECRET not in record.getMessage()


def test_the_secret_may_come_in_a_header(client, jira, issue, alice):
    bp, key = issue
    payload = move(jira, key, "Approved")

    response = post(client, payload, secret=None, HTTP_X_BPM_WEBHOOK_SECRET=SECRET)

    assert response.status_code == 200, response.content
    assert response.json()["outcome"] == "released"


def test_the_webhook_is_off_without_a_configured_secret(client, jira, issue, alice, settings):
    bp, key = issue
    settings.JIRA_WEBHOOK_SECRET = ""
    payload = move(jira, key, "Approved")

    response = post(client, payload, secret="")

    assert response.status_code == 503
    assert_untouched(bp)


@pytest.mark.parametrize(
    "raw",
    [b"{not json", b"[1, 2]", b'"text"', b"\xff\xfe{}", b"[" * 100_000 + b"]" * 100_000, b""],
)
def test_a_body_that_is_not_a_json_object_is_a_400(client, hook, raw):
    response = post(client, None, raw=raw)

    assert response.status_code == 400
    assert response.json()["ok"] is False


@pytest.mark.parametrize("bad", ["\x00", "\ud800"], ids=["nul", "lone-surrogate"])
@pytest.mark.parametrize("where", ["key", "label", "email"])
def test_text_no_database_can_hold_is_a_400_jira_does_not_retry(
    client, jira, issue, alice, where, bad
):
    bp, key = issue
    payload = move(jira, key, "Rejected", comment="Not now.")
    if where == "key":
        payload["issue"]["key"] = key + bad
    elif where == "label":
        payload["issue"]["fields"]["labels"] = [f"bpm-{bp.pk}{bad}"]
    else:
        payload["user"]["emailAddress"] = "alice@example.com" + bad

    response = post(client, payload)

    assert response.status_code == 400
    assert response.json()["outcome"] == "refused" and where in response.json()["detail"]
    assert_untouched(bp)


def test_only_post_is_allowed(client, hook):
    assert client.get(f"{URL}?secret={SECRET}").status_code == 405


# --- decisions ---------------------------------------------------------------------------


def test_approved_in_jira_releases_the_breakpoint_as_that_reviewer(client, jira, issue, alice):
    bp, key = issue
    payload = move(jira, key, "Approved")

    response = post(client, payload)

    assert response.status_code == 200
    assert response.json() == {"ok": True, "outcome": "released", "detail": "approved by alice"}
    bp.refresh_from_db()
    assert bp.status == "released"
    assert bp.result["approved"] is True
    assert bp.result["respondedBy"] == "alice"
    (feedback,) = Feedback.objects.filter(breakpoint=bp)
    assert (feedback.via, feedback.author_user, feedback.approved) == ("jira", alice, True)
    assert feedback.comment == f"Approved in JIRA {key}"
    # Then the outcome goes back to JIRA: a comment, and the issue is Done. The feedback
    # itself was given in JIRA: it is not echoed back as a comment.
    feedback_delivery = only(bp, "feedback")
    assert attempt(feedback_delivery).status == "delivered"
    feedback_delivery.refresh_from_db()
    assert feedback_delivery.reply == {"key": key, "skipped": "given in JIRA"}
    assert attempt(only(bp, "released")).status == "delivered"
    (comment,) = jira.issues[key].comments
    assert comment["body"].startswith("The breakpoint was approved")
    assert blocks(comment["body"]) == [f"By: alice\nFeedback: Approved in JIRA {key}"]
    assert jira.issues[key].status == "Done"


def test_our_own_done_transition_coming_back_decides_nothing(client, jira, issue, alice):
    bp, key = issue
    post(client, move(jira, key, "Approved"))
    attempt(only(bp, "released"))
    done = jira.webhooks[-1]  # the stand-in emitted our bot's transition to Done
    assert done["changelog"]["items"][0]["toString"] == "Done"

    response = post(client, done)

    assert response.json()["outcome"] == "ignored"
    assert Feedback.objects.filter(breakpoint=bp).count() == 1


def test_rejected_in_jira_rejects_with_the_transition_s_comment(client, jira, issue, alice):
    bp, key = issue
    payload = move(jira, key, "Rejected", comment="Not during the freeze")

    response = post(client, payload)

    assert response.json()["outcome"] == "released"
    bp.refresh_from_db()
    assert (bp.status, bp.result["approved"]) == ("released", False)
    assert bp.result["feedback"] == "Not during the freeze"
    assert Feedback.objects.get(breakpoint=bp).via == "jira"
    for event in ("feedback", "released"):
        assert attempt(only(bp, event)).status == "delivered"
    comments = [c["body"] for c in jira.issues[key].comments]
    assert comments[0] == "Not during the freeze"  # the reviewer's own, made in JIRA
    assert blocks(comments[1]) == ["By: alice\nFeedback: Not during the freeze"]
    assert len(comments) == 2
    assert jira.issues[key].status == "Won't Do"


def test_a_duplicate_webhook_gives_one_decision(client, jira, issue, alice):
    bp, key = issue
    payload = move(jira, key, "Approved")

    first, second = post(client, payload), post(client, payload)

    assert first.json()["outcome"] == "released"
    assert (second.status_code, second.json()["outcome"]) == (200, "duplicate")
    assert Feedback.objects.filter(breakpoint=bp).count() == 1
    assert Event.objects.filter(breakpoint=bp, type="released").count() == 1
    assert refusals(bp) == []


def test_an_unknown_jira_user_is_refused_and_audited(client, jira, issue):
    bp, key = issue
    payload = move(jira, key, "Approved", as_user="mallory@elsewhere.test")

    response = post(client, payload)

    assert (response.status_code, response.json()["outcome"]) == (200, "refused")
    assert_untouched(bp)
    (event,) = refusals(bp)
    assert event.actor == "jira:mallory@elsewhere.test"
    assert event.metadata == {
        "via": "jira",
        "reason": "user_not_matched",
        "message": "no active user has this email address",
        "issue": key,
        "status": "Approved",
        "approved": True,
    }


def test_a_jira_user_without_a_visible_email_is_refused(client, jira, issue, alice):
    bp, key = issue
    jira.emails["alice@example.com"] = ""  # hidden, as JIRA Cloud's profile privacy does
    payload = move(jira, key, "Approved")

    response = post(client, payload)

    assert response.json()["outcome"] == "refused"
    assert_untouched(bp)
    (event,) = refusals(bp)
    assert event.actor == "jira:acct-alice@example.com"
    assert "no email address" in event.metadata["message"]


def test_two_users_with_the_email_are_refused(client, jira, issue, alice):
    bp, key = issue
    ReviewerFactory(username="alice2", email="ALICE@example.com")

    response = post(client, move(jira, key, "Approved"))

    assert response.json()["outcome"] == "refused"
    assert_untouched(bp)
    assert refusals(bp)[0].metadata["message"] == TWINS_REFUSAL  # and what an admin does


def test_a_user_who_is_not_a_reviewer_is_refused(client, jira, issue):
    bp, key = issue
    UserFactory(username="bob", email="mallory@elsewhere.test")
    payload = move(jira, key, "Approved", as_user="mallory@elsewhere.test")

    response = post(client, payload)

    assert response.json()["outcome"] == "refused"
    assert_untouched(bp)
    post(client, payload)  # JIRA sends it again: refused again, undone in JIRA once
    assert len(deliveries(bp, "refused")) == 1
    event = refusals(bp)[0]
    assert (event.metadata["reason"], event.metadata["message"]) == (
        "permission_denied",
        "Only reviewers and admins can give feedback.",
    )


def test_a_reviewer_without_the_routed_seat_is_refused(
    client, jira, hook, audited, alice, expert_member
):
    expert_member("sam", "security-lead")
    bp = audited(payload={"question": "Rotate keys?", "title": "Keys", "expert": "security-lead"})
    key = created_issue(bp)

    response = post(client, move(jira, key, "Approved"))

    assert response.json()["outcome"] == "refused"
    assert_untouched(bp)
    (event,) = refusals(bp)
    assert event.actor == "jira:alice@example.com"


def test_a_breakpoint_decided_elsewhere_refuses_the_late_jira_decision(
    client, jira, issue, alice, admin_user
):
    bp, key = issue
    feedback_add(breakpoint_id=bp.pk, actor=Actor.for_user(admin_user), comment="", release=True)

    response = post(client, move(jira, key, "Rejected"))

    assert response.json()["outcome"] == "refused"
    bp.refresh_from_db()
    assert (bp.status, bp.result["approved"], bp.result["respondedBy"]) == (
        "released",
        True,
        "root-admin",
    )
    assert (
        refusals(bp)[0].metadata["message"]
        == "Breakpoint is released; it no longer takes feedback."
    )
    # JIRA is told why; the issue is left to the outcome's own transition (Done).
    undo = only(bp, "refused")
    assert "no longer takes feedback" in turned_back(jira, bp, key)
    undo.refresh_from_db()
    assert undo.reply["skipped"] == "the issue shows another change"
    assert jira.issues[key].status == "Rejected"
    assert attempt(only(bp, "released")).status == "delivered"
    assert jira.issues[key].status == "Done"


# --- what is ignored -----------------------------------------------------------------------


def test_other_events_and_statuses_are_ignored(client, jira, issue, alice):
    bp, key = issue
    payload = move(jira, key, "Approved")
    comment_event = {**payload, "webhookEvent": "comment_created"}
    in_progress = json.loads(json.dumps(payload))
    in_progress["changelog"]["items"][0]["toString"] = "In Progress"
    no_changelog = {key: value for key, value in payload.items() if key != "changelog"}

    for ignored in (comment_event, in_progress, no_changelog, {}, {"issue": "x"}):
        response = post(client, ignored)
        assert (response.status_code, response.json()["outcome"]) == (200, "ignored")

    assert_untouched(bp)
    assert refusals(bp) == []


def test_an_issue_no_breakpoint_created_is_ignored_with_a_log_line(
    client, jira, issue, alice, caplog
):
    bp, key = issue
    payload = move(jira, key, "Approved")
    payload["issue"]["key"] = "OPS-999"

    with caplog.at_level(logging.INFO, logger="channels.jira.events"):
        response = post(client, payload)

    assert (response.status_code, response.json()["outcome"]) == (200, "ignored")
    assert any("OPS-999" in r.getMessage() for r in caplog.records)
    assert_untouched(bp)


def test_a_label_never_points_at_another_breakpoint(client, jira, hook, audited, alice):
    first, second = audited(), audited()
    first_key, _ = created_issue(first), created_issue(second)
    payload = move(jira, first_key, "Approved")
    payload["issue"]["fields"]["labels"] = [f"bpm-{second.pk}"]  # a label pointing elsewhere

    assert post(client, payload).json()["outcome"] == "released"

    statuses = dict(Breakpoint.objects.values_list("pk", "status"))
    assert (statuses[first.pk], statuses[second.pk]) == ("released", "waiting")
    assert Delivery.objects.get(breakpoint=first, event_type="created").reply == {"key": first_key}


def test_a_repeated_webhook_never_casts_a_second_seat_s_vote(
    client, jira, hook, audited, alice, expert_member
):
    """A reviewer holding two seats of a collect-all breakpoint votes once per JIRA move."""
    for group in ("tech-lead", "ops-lead"):
        expert_member("alice", group)
    expert_member("oscar", "ops-lead")
    bp = audited(
        payload={
            "question": "Migrate?",
            "title": "Migration",
            "expert": ["tech-lead", "ops-lead"],
            "strategy": "collect-all",
        }
    )
    payload = move(jira, created_issue(bp), "Approved")

    first, second = post(client, payload), post(client, payload)

    assert (first.json()["outcome"], second.json()["outcome"]) == ("voted", "duplicate")
    bp.refresh_from_db()
    assert bp.status == "waiting"
    assert [vote["seat"] for vote in bp.votes] == ["tech-lead"]


# --- a form (issue 36): JIRA approves as proposed ------------------------------------------


def test_approved_in_jira_approves_the_proposal_as_it_is(client, hook, audited, alice):
    form = {"type": "object", "properties": {"replicas": {"type": "integer"}}}
    bp = audited(payload={"question": "Deploy?", "form": form, "proposal": {"replicas": 3}})
    key = created_issue(bp)
    assert "approves its proposal as it is" in hook.issues[key].fields["description"]

    response = post(client, move(hook, key, "Approved"))

    assert response.json()["outcome"] == "released"
    bp.refresh_from_db()
    assert (bp.result["values"], bp.result["edited"]) == ({"replicas": 3}, False)


def test_a_form_only_a_person_can_fill_is_refused_in_jira(client, hook, audited, alice):
    form = {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]}
    bp = audited(payload={"question": "Which x?", "form": form})
    key = created_issue(bp)

    response = post(client, move(hook, key, "Approved"))

    assert response.json()["outcome"] == "refused"
    assert_untouched(bp)


# --- who made the change: JIRA says, not the webhook's body (issue 47) ---------------------

BOB = "bob@example.com"


@pytest.fixture
def bob(hook):
    """A reviewer, bob@example.com, who is also a JIRA user of the stand-in."""
    hook.users[BOB] = "bob-token"
    return ReviewerFactory(username="bob", email=BOB)


def naming(jira, payload: dict, user: str) -> dict:
    """The payload with its `user` replaced: what a holder of the webhook secret can write."""
    forged = json.loads(json.dumps(payload))
    forged["user"] = jira._user_json(user)
    return forged


def turned_back(jira, bp, key: str) -> str:
    """Deliver the breakpoint's `refused` JIRA delivery; the comment it left on the issue."""
    delivery = only(bp, "refused")
    assert delivery.target == {"project": "OPS"}
    assert attempt(delivery).status == "delivered", delivery.last_error
    (comment,) = [c for c in jira.issues[key].comments if c["author"]["name"] == "bpm-bot"]
    return comment["body"]


def test_a_body_naming_a_reviewer_does_not_speak_for_the_jira_user_who_made_the_change(
    client, jira, issue, bob
):
    """bob is named in the body; JIRA's changelog says mallory (no reviewer) approved."""
    bp, key = issue
    UserFactory(username="mallory", email="mallory@elsewhere.test")
    forged = naming(jira, move(jira, key, "Approved", as_user="mallory@elsewhere.test"), BOB)
    assert forged["user"]["emailAddress"] == BOB

    response = post(client, forged)

    assert (response.status_code, response.json()["outcome"]) == (200, "refused")
    assert_untouched(bp)
    (event,) = refusals(bp)
    assert event.actor == "jira:mallory@elsewhere.test"
    assert (event.metadata["reason"], event.metadata["claimed"]) == ("permission_denied", BOB)
    (lookup,) = jira.calls_to("GET", ISSUE_PATH)
    assert lookup.user == "bpm-bot" and "changelog" in lookup.query["expand"][0]
    # The issue does not keep showing "Approved": it goes back, with a comment saying why.
    assert jira.issues[key].status == "Approved"
    comment = turned_back(jira, bp, key)
    assert jira.issues[key].status == "To Do"
    assert "Approved by mallory@elsewhere.test was refused" in comment
    assert "Only reviewers and admins can give feedback." in comment


def test_a_change_jira_attributes_to_the_named_reviewer_releases_as_them(client, jira, issue, bob):
    bp, key = issue

    response = post(client, move(jira, key, "Approved", as_user=BOB))

    assert response.json() == {"ok": True, "outcome": "released", "detail": "approved by bob"}
    bp.refresh_from_db()
    assert (bp.status, bp.result["respondedBy"]) == ("released", "bob")
    assert Feedback.objects.get(breakpoint=bp).author_user == bob
    assert not deliveries(bp, "refused")


def test_a_refused_rejection_goes_back_too_and_a_comment_says_why(client, jira, issue):
    bp, key = issue

    response = post(client, move(jira, key, "Rejected", as_user="mallory@elsewhere.test"))

    assert response.json()["outcome"] == "refused"
    comment = turned_back(jira, bp, key)
    assert jira.issues[key].status == "To Do"
    assert "no active user has this email address" in comment


def test_while_jira_cannot_be_asked_nothing_is_decided_and_the_issue_goes_back_later(
    client, jira, issue, bob
):
    bp, key = issue
    payload = move(jira, key, "Approved", as_user=BOB)
    jira.stop()

    response = post(client, payload)

    assert (response.status_code, response.json()["outcome"]) == (200, "refused")
    assert "JIRA could not confirm" in response.json()["detail"]
    assert_untouched(bp)
    (event,) = refusals(bp)
    assert event.actor == f"jira:{BOB}"  # who the body named: nobody confirmed it
    assert event.metadata["reason"] == "jira_unreachable"
    # Then: the outbox retries turning the issue back until JIRA answers again.
    undo = only(bp, "refused")
    assert attempt(undo).status == "retry"
    jira.start()
    make_due(undo)
    comment = turned_back(jira, bp, key)
    assert jira.issues[key].status == "To Do"
    assert "move the issue again" in comment
    # bob moves it again: now JIRA confirms him, and the breakpoint is released.
    assert post(client, move(jira, key, "Approved", as_user=BOB)).json()["outcome"] == "released"
    bp.refresh_from_db()
    assert (bp.status, bp.result["respondedBy"]) == ("released", "bob")


def test_a_change_jira_does_not_record_is_refused_and_the_issue_left_alone(
    client, jira, issue, alice
):
    bp, key = issue
    payload = move(jira, key, "Approved")
    invented = json.loads(json.dumps(payload))
    invented["changelog"]["id"] = "424242"
    other_status = json.loads(json.dumps(payload))
    other_status["changelog"]["items"][0]["toString"] = "Rejected"

    for forged in (invented, other_status):
        assert post(client, forged).json()["outcome"] == "refused"

    assert_untouched(bp)
    assert [event.metadata["reason"] for event in refusals(bp)] == ["unverified", "unverified"]
    assert not deliveries(bp, "refused")
    assert jira.issues[key].status == "Approved"
    assert post(client, payload).json()["outcome"] == "released"  # the real one still counts


def test_a_replayed_older_change_is_refused(client, jira, issue, bob):
    """bob's earlier Approved, sent again after the issue moved on, decides nothing."""
    bp, key = issue
    earlier = move(jira, key, "Approved", as_user=BOB)
    move(jira, key, "Rejected", as_user="mallory@elsewhere.test")

    response = post(client, earlier)

    assert response.json()["outcome"] == "refused"
    assert_untouched(bp)
    assert refusals(bp)[0].metadata["reason"] == "unverified"
    assert not deliveries(bp, "refused")


def test_the_comment_is_taken_from_jira_not_from_the_body(client, jira, issue, bob):
    bp, key = issue
    payload = json.loads(json.dumps(move(jira, key, "Rejected", as_user=BOB, comment="No")))
    payload["comment"]["body"] = "Approved, go ahead"  # the body's word, not JIRA's

    assert post(client, payload).json()["outcome"] == "released"

    bp.refresh_from_db()
    assert bp.result["feedback"] == "No"
