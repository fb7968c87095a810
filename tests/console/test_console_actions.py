"""Console actions go through the services, as the reviewer, and never error on a stale page."""

import re
from html import unescape

import pytest

from audit.models import Event
from breakpoints.models import Breakpoint, Feedback
from breakpoints.services import breakpoint_cancel, feedback_add
from core.actors import Actor
from tests.support.console import QUEUE_URL, action_url, messages, review_url, session_client
from tests.support.factories import BreakpointFactory, ReviewerFactory
from tests.support.receipts import unsealed


def _release(client, bp, **data):
    """Both steps: the confirmation page, then the confirmed release."""
    step1 = client.post(action_url("release", bp.pk), data)
    assert step1.status_code == 200, step1
    assert b'name="confirm" value="yes"' in step1.content
    return client.post(action_url("release", bp.pk), {**data, "confirm": "yes"})


def test_comment_adds_feedback_and_an_event_by_the_reviewer(reviewer_browser, make_breakpoint):
    bp = make_breakpoint()
    response = reviewer_browser.post(
        action_url("comment", bp.pk), {"comment": "Checking the numbers"}
    )
    assert response.status_code == 302
    assert response["Location"].startswith(review_url(bp.pk))
    feedback = Feedback.objects.get(breakpoint=bp)
    assert (feedback.author, feedback.comment, feedback.releases) == (
        "rita",
        "Checking the numbers",
        False,
    )
    assert Event.objects.filter(breakpoint=bp, type="feedback", actor="rita").exists()
    assert Breakpoint.objects.get(pk=bp.pk).status == "waiting"
    page = reviewer_browser.get(review_url(bp.pk))
    assert b"Checking the numbers" in page.content


def test_empty_comment_is_refused_with_the_services_message(reviewer_browser, make_breakpoint):
    bp = make_breakpoint()
    response = reviewer_browser.post(action_url("comment", bp.pk), {"comment": "   "}, follow=True)
    assert response.status_code == 200
    assert "comment may be empty only when release is true." in messages(response)
    assert not Feedback.objects.filter(breakpoint=bp).exists()


def test_confirmation_step_shows_the_result_and_changes_nothing(reviewer_browser, make_breakpoint):
    bp = make_breakpoint()
    response = reviewer_browser.post(
        action_url("release", bp.pk), {"decision": "reject", "comment": "Split it in two"}
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert "The agent will receive this result" in html
    assert "&quot;approved&quot;" in html or '"approved"' in html
    assert "false" in html and "Split it in two" in html and "rita" in html
    assert Breakpoint.objects.get(pk=bp.pk).status == "waiting"
    assert not Feedback.objects.filter(breakpoint=bp).exists()


def test_approve_releases_with_the_reviewer_as_responder(reviewer_browser, make_breakpoint):
    bp = make_breakpoint()
    response = _release(reviewer_browser, bp, decision="approve", comment="Ship it")
    assert response.status_code == 302
    assert response["Location"].startswith(QUEUE_URL)
    bp.refresh_from_db()
    assert bp.status == "released"
    assert bp.result["approved"] is True
    assert bp.result["feedback"] == bp.result["response"] == "Ship it"
    assert bp.result["respondedBy"] == "rita"
    assert Event.objects.filter(breakpoint=bp, type="released", actor="rita").exists()


def test_approve_without_a_comment_is_allowed(reviewer_browser, make_breakpoint):
    bp = make_breakpoint()
    _release(reviewer_browser, bp, decision="approve", comment="")
    bp.refresh_from_db()
    assert bp.status == "released" and bp.result["approved"] is True


def test_reject_sends_its_feedback(reviewer_browser, make_breakpoint):
    bp = make_breakpoint()
    _release(reviewer_browser, bp, decision="reject", comment="Line one\r\nLine two")
    bp.refresh_from_db()
    assert bp.status == "released"
    assert bp.result["approved"] is False
    assert bp.result["feedback"] == "Line one\nLine two"  # browser CRLF normalised


def test_choosing_an_option_releases_with_result_option(reviewer_browser, make_breakpoint):
    bp = make_breakpoint(payload={"question": "When?", "options": ["Ship now", "Ship Monday"]})
    page = reviewer_browser.get(review_url(bp.pk))
    assert b"Ship Monday" in page.content
    _release(reviewer_browser, bp, option="1", decision="approve", comment="")
    bp.refresh_from_db()
    assert bp.status == "released"
    assert bp.result["option"] == "Ship Monday"
    assert bp.result["approved"] is True
    feedback = Feedback.objects.get(breakpoint=bp)
    assert feedback.option == "Ship Monday" and feedback.releases


def test_a_string_option_can_be_chosen_with_a_rejection(reviewer_browser, make_breakpoint):
    """Issue 9, defect 12: the option and the reviewer's approve/reject are two choices."""
    bp = make_breakpoint(payload={"question": "When?", "options": ["Ship now", "Ship Monday"]})
    page = reviewer_browser.get(review_url(bp.pk)).content.decode()
    assert 'name="option"' in page and 'value="reject"' in page

    confirm = reviewer_browser.post(
        action_url("release", bp.pk), {"option": "1", "decision": "reject", "comment": "Not today"}
    ).content.decode()
    assert _confirm_button(confirm) == "Send rejection with option “Ship Monday”"
    assert 'name="option" value="1"' in confirm  # carried to the confirmed post
    assert Breakpoint.objects.get(pk=bp.pk).status == "waiting"

    _release(reviewer_browser, bp, option="1", decision="reject", comment="Not today")
    bp.refresh_from_db()
    assert bp.status == "released"
    assert (bp.result["approved"], bp.result["option"]) == (False, "Ship Monday")
    assert bp.result["allResponses"][0]["approved"] is False
    feedback = Feedback.objects.get(breakpoint=bp)
    assert (feedback.approved, feedback.option) == (False, "Ship Monday")


VERDICT_OPTIONS = [
    {"label": "Deploy", "approved": True},
    {"label": "Hold", "approved": False},
    "Ask me later",
]


def test_a_verdict_options_verdict_is_what_is_released(reviewer_browser, make_breakpoint):
    """The reviewer picks "Hold" (approved: false) and no approve/reject: it rejects."""
    bp = make_breakpoint(payload={"question": "Deploy?", "options": VERDICT_OPTIONS})
    page = reviewer_browser.get(review_url(bp.pk)).content.decode()
    assert 'data-bpm-verdict="rejects"' in page and 'data-bpm-verdict="approves"' in page

    confirm = reviewer_browser.post(
        action_url("release", bp.pk), {"option": "1", "comment": ""}
    ).content.decode()
    assert _confirm_button(confirm) == "Send rejection with option “Hold”"
    shown = unescape(re.sub(r"<[^>]+>", "", confirm))  # the highlighted result JSON
    assert '"approved": false' in shown and '"option": "Hold"' in shown

    _release(reviewer_browser, bp, option="1", comment="")
    bp.refresh_from_db()
    assert bp.status == "released"
    assert (bp.result["approved"], bp.result["option"]) == (False, "Hold")
    assert Feedback.objects.get(breakpoint=bp).approved is False


def test_a_verdict_option_cannot_be_contradicted_in_the_console(reviewer_browser, make_breakpoint):
    bp = make_breakpoint(payload={"question": "Deploy?", "options": VERDICT_OPTIONS})
    for confirm in ("", "yes"):
        response = reviewer_browser.post(
            action_url("release", bp.pk),
            {"option": "1", "decision": "approve", "comment": "", "confirm": confirm},
        )
        assert response.status_code == 200  # the review page again, with why
        html = response.content.decode()
        assert "contradicts option “Hold”" in html
        assert 'name="confirm" value="yes"' not in html
    assert Breakpoint.objects.get(pk=bp.pk).status == "waiting"
    assert not Feedback.objects.filter(breakpoint=bp).exists()


def test_a_string_option_still_needs_approve_or_reject(reviewer_browser, make_breakpoint):
    bp = make_breakpoint(payload={"question": "Deploy?", "options": VERDICT_OPTIONS})
    response = reviewer_browser.post(
        action_url("release", bp.pk), {"option": "2", "comment": "", "confirm": "yes"}
    )
    assert response.status_code == 200
    assert "does not decide it" in response.content.decode()
    assert Breakpoint.objects.get(pk=bp.pk).status == "waiting"


def test_unknown_option_is_refused(reviewer_browser, make_breakpoint):
    bp = make_breakpoint(payload={"question": "When?", "options": ["Ship now"]})
    response = reviewer_browser.post(
        action_url("release", bp.pk), {"option": "7", "decision": "approve", "confirm": "yes"}
    )
    assert response.status_code == 200  # the form again, with the error
    assert Breakpoint.objects.get(pk=bp.pk).status == "waiting"


def test_stale_release_shows_a_message_and_leaves_the_state(reviewer_browser, make_breakpoint):
    """Two reviewers on the same page: the second release is refused politely."""
    bp = make_breakpoint()
    step1 = reviewer_browser.post(
        action_url("release", bp.pk), {"decision": "approve", "comment": "ok"}
    )
    assert step1.status_code == 200
    other = ReviewerFactory(username="bob")
    feedback_add(
        breakpoint_id=bp.pk, actor=Actor.for_user(other), comment="No", release=True, approved=False
    )

    response = reviewer_browser.post(
        action_url("release", bp.pk),
        {"decision": "approve", "comment": "ok", "confirm": "yes"},
        follow=True,
    )
    assert response.status_code == 200
    assert (
        any("already released" in m for m in messages(response))
        or b"already released" in response.content
    )
    bp.refresh_from_db()
    assert bp.result["respondedBy"] == "bob" and bp.result["approved"] is False
    assert Feedback.objects.filter(breakpoint=bp).count() == 1


def test_stale_release_of_a_cancelled_breakpoint(reviewer_browser, make_breakpoint):
    bp = make_breakpoint()
    breakpoint_cancel(breakpoint_id=bp.pk, actor=Actor.for_agent("agent-a"))
    response = reviewer_browser.post(
        action_url("release", bp.pk), {"decision": "approve", "confirm": "yes"}, follow=True
    )
    assert response.status_code == 200
    assert b"already cancelled" in response.content
    assert Breakpoint.objects.get(pk=bp.pk).status == "cancelled"


def test_finished_breakpoints_are_read_only(reviewer_browser, console_reviewer, make_breakpoint):
    bp = make_breakpoint()
    feedback_add(
        breakpoint_id=bp.pk, actor=Actor.for_user(console_reviewer), comment="ok", release=True
    )
    page = reviewer_browser.get(review_url(bp.pk))
    assert b"read-only" in page.content
    assert b"Review and release" not in page.content
    assert b"Result sent to the agent" in page.content
    late = reviewer_browser.post(action_url("comment", bp.pk), {"comment": "too late"}, follow=True)
    assert b"takes no more comments" in late.content
    assert Feedback.objects.filter(breakpoint=bp).count() == 1


def test_admin_expires_through_the_confirmation(admin_browser, make_breakpoint):
    bp = make_breakpoint()
    confirm = admin_browser.get(action_url("expire", bp.pk))
    assert confirm.status_code == 200 and b"Expire now" in confirm.content
    response = admin_browser.post(action_url("expire", bp.pk), {"reason": "Superseded by run 44"})
    assert response.status_code == 302
    bp.refresh_from_db()
    assert bp.status == "expired"
    assert unsealed(bp.result, via="console") == {
        "approved": False,
        "feedback": "Superseded by run 44",
        "respondedBy": "adam",
    }
    assert Event.objects.filter(breakpoint=bp, type="expired", actor="adam").exists()


def test_expiring_a_finished_breakpoint_is_a_message(admin_browser, make_breakpoint):
    bp = make_breakpoint()
    breakpoint_cancel(breakpoint_id=bp.pk, actor=Actor.for_agent("agent-a"))
    response = admin_browser.post(action_url("expire", bp.pk), {"reason": "x"}, follow=True)
    assert response.status_code == 200
    assert b"already cancelled" in response.content
    assert Breakpoint.objects.get(pk=bp.pk).status == "cancelled"


def test_admin_bulk_expire_action(admin_browser, make_breakpoint):
    waiting = [make_breakpoint(), make_breakpoint()]
    done = make_breakpoint()
    breakpoint_cancel(breakpoint_id=done.pk, actor=Actor.for_agent("agent-a"))
    response = admin_browser.post(
        QUEUE_URL,
        {"action": "expire_selected", "_selected_action": [b.pk for b in [*waiting, done]]},
        follow=True,
    )
    assert response.status_code == 200
    assert b"Expired 2 breakpoint(s)" in response.content
    assert set(Breakpoint.objects.values_list("status", flat=True)) == {"expired", "cancelled"}


def test_routed_breakpoint_lets_other_reviewers_comment_only(reviewer_browser, make_breakpoint):
    bp = make_breakpoint(payload={"question": "Schema change?", "expert": "dba-team"})
    ReviewerFactory(username="dba").groups.create(name="dba-team")
    page = reviewer_browser.get(review_url(bp.pk))
    assert b"Only members of dba-team" in page.content
    assert b"Review and release" not in page.content
    response = reviewer_browser.post(
        action_url("release", bp.pk), {"decision": "approve"}, follow=True
    )
    assert b"Only members of dba-team" in response.content
    assert Breakpoint.objects.get(pk=bp.pk).status == "waiting"


def test_missing_breakpoint_redirects_with_a_message(reviewer_browser, db):
    response = reviewer_browser.get(review_url("bp_nope"), follow=True)
    assert response.status_code == 200
    assert b"doesn" in response.content and b"exist" in response.content


def test_release_keeps_the_reviewers_queue_filters(reviewer_browser, make_breakpoint):
    bp = make_breakpoint(tags=["billing"])
    filters = "_changelist_filters=tag%3Dbilling%26status__exact%3Dwaiting"
    url = f"{action_url('release', bp.pk)}?{filters}"
    response = reviewer_browser.post(url, {"decision": "approve", "confirm": "yes"})
    assert response.status_code == 302
    assert response["Location"] == f"{QUEUE_URL}?tag=billing&status__exact=waiting"


def test_ids_that_look_like_admin_escapes_work_end_to_end(reviewer_browser, db):
    """Ids are url-safe base64: '_3D' or '_5F' in one must not be read as an admin escape."""
    bp = BreakpointFactory(id="bp_3Dab_5F-x_2F")
    assert reviewer_browser.get(review_url(bp.pk)).status_code == 200
    response = reviewer_browser.post(action_url("comment", bp.pk), {"comment": "hi"})
    assert response["Location"] == review_url(bp.pk)
    _release(reviewer_browser, bp, decision="approve")
    assert Breakpoint.objects.get(pk=bp.pk).status == "released"
    queue = reviewer_browser.get(QUEUE_URL + "?status__exact=released").content.decode()
    assert review_url(bp.pk) in queue


def test_a_vote_on_a_collect_all_breakpoint_keeps_it_waiting(make_breakpoint):
    """With several expert seats, one reviewer's release is a vote, said so on every step."""
    from django.contrib.auth.models import Group

    bp = make_breakpoint(
        payload={"question": "Go?", "expert": ["tech-lead", "ops-lead"], "strategy": "collect-all"}
    )
    tina = ReviewerFactory(username="tina")
    tina.groups.add(Group.objects.get_or_create(name="tech-lead")[0])
    ReviewerFactory(username="oscar").groups.add(Group.objects.get_or_create(name="ops-lead")[0])
    client = session_client(tina)

    step1 = client.post(action_url("release", bp.pk), {"decision": "approve", "comment": "fine"})
    assert b"Your vote" in step1.content and b"collect-all" in step1.content
    done = client.post(
        action_url("release", bp.pk),
        {"decision": "approve", "comment": "fine", "confirm": "yes"},
        follow=True,
    )
    assert b"other reviewers still have to respond" in done.content
    assert Breakpoint.objects.get(pk=bp.pk).status == "waiting"


def test_admin_cancels_through_the_confirmation_with_a_reason(admin_browser, make_breakpoint):
    bp = make_breakpoint()
    assert action_url("cancel", bp.pk).encode() in admin_browser.get(review_url(bp.pk)).content
    page = admin_browser.get(action_url("cancel", bp.pk))
    assert page.status_code == 200
    assert b"Cancel the breakpoint" in page.content
    assert Breakpoint.objects.get(pk=bp.pk).status == "waiting"  # the page alone changes nothing

    response = admin_browser.post(
        action_url("cancel", bp.pk), {"reason": "Superseded by run 43"}, follow=True
    )
    assert any("Cancelled" in m for m in messages(response))
    bp.refresh_from_db()
    assert bp.status == "cancelled"
    assert unsealed(bp.result, via="console") == {
        "approved": False,
        "feedback": "Superseded by run 43",
        "respondedBy": "adam",
    }
    assert Event.objects.filter(breakpoint=bp, type="cancelled", actor="adam").exists()


def test_cancelling_a_finished_breakpoint_is_a_message(admin_browser, make_breakpoint):
    bp = make_breakpoint()
    breakpoint_cancel(breakpoint_id=bp.pk, actor=Actor.for_agent("agent-a"))
    response = admin_browser.post(action_url("cancel", bp.pk), {"reason": "late"}, follow=True)
    assert response.status_code == 200
    assert any("already cancelled" in m for m in messages(response))
    assert b'id="bpm-cancel"' not in admin_browser.get(review_url(bp.pk)).content


def test_reviewers_cannot_cancel_in_the_console(reviewer_browser, make_breakpoint):
    bp = make_breakpoint()
    assert b'id="bpm-cancel"' not in reviewer_browser.get(review_url(bp.pk)).content
    assert reviewer_browser.get(action_url("cancel", bp.pk)).status_code == 403
    assert reviewer_browser.post(action_url("cancel", bp.pk), {"reason": "x"}).status_code == 403
    assert Breakpoint.objects.get(pk=bp.pk).status == "waiting"


def _confirm_button(html: str) -> str:
    match = re.search(
        r'<button type="submit" name="confirm" value="yes"[^>]*>([^<]*)</button>', html
    )
    assert match, html
    return match.group(1)


@pytest.mark.parametrize(
    ("data", "label"),
    [
        ({"decision": "approve", "comment": ""}, "Send approval"),
        ({"decision": "reject", "comment": "Not yet"}, "Send rejection"),
        (
            {"option": "1", "decision": "approve", "comment": ""},
            "Send approval with option “Ship Monday”",
        ),
    ],
)
def test_the_confirm_button_says_what_it_sends(reviewer_browser, make_breakpoint, data, label):
    bp = make_breakpoint(payload={"question": "When?", "options": ["Ship now", "Ship Monday"]})
    html = reviewer_browser.post(action_url("release", bp.pk), data).content.decode()
    assert _confirm_button(html) == label
    assert "Confirm and release" not in html


def test_a_vote_that_does_not_decide_is_recorded_not_sent(make_breakpoint, expert_member):

    bp = make_breakpoint(
        payload={"question": "Go?", "expert": ["tech-lead", "ops-lead"], "strategy": "collect-all"}
    )
    tina = expert_member("tina", "tech-lead")
    expert_member("oscar", "ops-lead")
    html = (
        session_client(tina)
        .post(action_url("release", bp.pk), {"decision": "reject", "comment": "No"})
        .content.decode()
    )
    assert _confirm_button(html) == "Record vote"


@pytest.mark.parametrize(
    "decision, said",
    [("approve", "was approved."), ("reject", "was rejected."), ("option", "was rejected with")],
)
def test_the_message_after_a_release_says_what_was_decided(
    reviewer_browser, make_breakpoint, decision, said
):
    """“Deploy?” was rejected. — not "Released “Deploy?”: rejected." (issue 31)."""
    bp = make_breakpoint(
        payload={"question": "Deploy?", "options": [{"label": "hold", "approved": False}]}
    )
    data = {"option": "0"} if decision == "option" else {"decision": decision}

    response = _release(reviewer_browser, bp, comment="ok", **data)

    [message] = messages(reviewer_browser.get(response["Location"]))
    assert message.startswith(f"“Deploy?” {said}")
    assert message.endswith("The agent receives the result on its next poll.")
