"""One door (issue 20): the same refusal, whichever way it comes in, with the same answer.

"Only reviewers and admins give feedback" is driven through the API, the console, Slack,
an email link, the JIRA webhook and a trigger rule; "only admins (or the system)" through
the API, the console, a trigger rule and the services. Every way ends the same: refused,
the breakpoint unchanged, and one `refused` audit event of the one shape, written by the
service that refused (breakpoints.services.refusals), whichever way it came: a permission
refusal (not a reviewer, no seat, the requester under four eyes) or a state refusal (no
longer waiting). "A comment may be empty only with a release" (the contract) is the
service's alone: a rejection without a comment is accepted every way, an empty comment
alone refused with the same message.
"""

from urllib.parse import quote, urlsplit

import pytest
from django.contrib.auth.models import Group

from breakpoints.models import Feedback
from breakpoints.services import (
    breakpoint_always_approve,
    breakpoint_delete,
    breakpoint_expire,
    feedback_add,
    release_refusal,
)
from channels.email.links import decision_urls
from console.views import ALREADY_SENT
from core.actors import ADMINS_GROUP, Actor
from core.exceptions import Forbidden
from policies.autoapproval import rule_create
from policies.foureyes import AUTOMATIC_APPROVAL_REFUSAL
from tests.support.api import assert_error
from tests.support.console import messages, session_client
from tests.support.factories import ReviewerFactory, UserFactory
from tests.support.github_events import deliver, run_event
from tests.support.jira import SECRET as JIRA_SECRET
from tests.support.jira import created_issue, move
from tests.support.jira import post as post_jira
from tests.support.records import history, refusals
from tests.support.slack import announce, interact
from triggers import actions as trigger_actions
from triggers import services as triggers
from triggers.models import TriggerRule

# standin, people, slack_route; jira, audit_route, audited; github
pytest_plugins = ["tests.support.slack", "tests.support.jira", "tests.support.github_events"]

FEEDBACK_REFUSAL = "Only reviewers and admins can give feedback."
CANCEL_REFUSAL = "Only the breakpoint's agent or an admin can cancel it."


@pytest.fixture
def nora(db):
    """An account without the reviewer role (Slack user U0NORA has her email)."""
    return UserFactory(username="nora", email="nora@example.com")


def assert_unchanged(bp) -> None:
    """Still waiting, no feedback, and no history but (maybe) the refusal."""
    bp.refresh_from_db()
    assert bp.status == "waiting"
    assert not Feedback.objects.filter(breakpoint_id=bp.pk).exists()
    assert set(history(bp.pk)) <= {"refused"}


def assert_refused_event(bp, via: str, who: str, reason: str, message: str) -> dict:
    """Exactly one refused event, of the one shape; its channel's own details."""
    (event,) = refusals(bp)
    assert event.actor == f"{via}:{who}"
    shape = {key: event.metadata.get(key) for key in ("via", "reason", "message")}
    assert shape == {"via": via, "reason": reason, "message": message}
    return {k: v for k, v in event.metadata.items() if k not in shape}


# --- only reviewers and admins give feedback ------------------------------------------------


def test_api(make_breakpoint, nora, client_for):
    bp = make_breakpoint()
    response = client_for(nora).post(
        f"/api/breakpoints/{bp.pk}/feedback", {"comment": "", "release": True}, format="json"
    )
    assert_error(response, 403, "permission_denied")
    assert_unchanged(bp)
    assert assert_refused_event(bp, "api", "nora", "permission_denied", FEEDBACK_REFUSAL) == {}


def test_console(make_breakpoint, nora):
    bp = make_breakpoint()
    response = session_client(nora).post(
        f"/admin/breakpoints/breakpoint/{quote(bp.pk)}/release/",
        {"decision": "approve", "comment": "", "confirm": "yes"},
    )
    assert response.status_code == 403  # as the API answers
    assert_unchanged(bp)
    assert assert_refused_event(bp, "console", "nora", "permission_denied", FEEDBACK_REFUSAL) == {}


@pytest.mark.parametrize("action", ["bpm_approve", "bpm_reject"])
def test_slack(standin, slack_route, make_breakpoint, client, people, action):
    bp = make_breakpoint()
    reply = announce(bp)
    clicked = standin.click_payload(reply["channel"], reply["ts"], action, "U0NORA")

    assert interact(client, clicked).status_code == 200

    assert_unchanged(bp)
    details = assert_refused_event(bp, "slack", "U0NORA", "permission_denied", FEEDBACK_REFUSAL)
    assert details == {"action": action}
    (told,) = standin.ephemerals
    assert FEEDBACK_REFUSAL in told["text"]


def test_email_link(make_breakpoint, nora, client, settings):
    settings.BPM_PUBLIC_URL = "http://testserver"
    bp = make_breakpoint()
    approve = urlsplit(decision_urls(bp.pk, nora.pk)["approve"]).path

    response = client.post(approve, {"decision": "approve", "comment": ""})

    assert response.status_code == 403
    assert FEEDBACK_REFUSAL in response.content.decode()
    assert_unchanged(bp)
    details = assert_refused_event(bp, "email", "nora", "permission_denied", FEEDBACK_REFUSAL)
    assert details == {"userId": nora.pk}


def test_jira_webhook(jira, audited, nora, client, settings):
    settings.JIRA_WEBHOOK_SECRET = JIRA_SECRET
    jira.users[nora.email] = "nora-token"
    bp = audited()
    key = created_issue(bp)

    response = post_jira(client, move(jira, key, "Approved", as_user=nora.email))

    assert response.json()["outcome"] == "refused"
    assert_unchanged(bp)
    details = assert_refused_event(bp, "jira", nora.email, "permission_denied", FEEDBACK_REFUSAL)
    assert details == {"issue": key, "status": "Approved", "approved": True}


def _rule(admin_user, owner, action: str, params: dict) -> TriggerRule:
    """A rule on GitHub workflow runs for the breakpoint of the run, acting as `owner`."""
    triggers.rule_add(
        actor=Actor.for_user(admin_user),
        name="one-door",
        source="github",
        action=action,
        event_type="workflow_run",
        conditions=[],
        params={"selector": {"runId": "{{ workflow_run.head_sha }}"}, **params},
    )
    TriggerRule.objects.filter(name="one-door").update(owner=owner)  # lost the role since
    return TriggerRule.objects.get(name="one-door")


def _fire(bp) -> dict:
    """A workflow run for the breakpoint's run; the rule's one action on it."""
    event = run_event(deliver({"workflow_run": {"head_sha": bp.run_id}}))
    [result] = event.results
    [taken] = result["actions"]
    return taken


def test_trigger_rule(github, admin_user, make_breakpoint, nora):
    bp = make_breakpoint(run_id="sha-1")
    _rule(admin_user, nora, "release", {"feedback": "CI passed"})

    taken = _fire(bp)

    assert (taken["outcome"], taken["error"]) == ("refused", FEEDBACK_REFUSAL)
    assert_unchanged(bp)
    details = assert_refused_event(bp, "trigger", "one-door", "permission_denied", FEEDBACK_REFUSAL)
    assert set(details) == {"eventId", "triggerRule"}


# --- only admins (cancel: or the agent; expire and rules: or the system) ----------------------


@pytest.fixture
def rita(db):
    return ReviewerFactory(username="rita")


@pytest.mark.parametrize("what", ["cancel", "expire"])
def test_api_refuses_a_reviewer(make_breakpoint, rita, client_for, what):
    bp = make_breakpoint()
    response = client_for(rita).post(f"/api/breakpoints/{bp.pk}/{what}", {}, format="json")
    message = assert_error(response, 403, "permission_denied")["message"]
    assert_unchanged(bp)
    assert_refused_event(bp, "api", "rita", "permission_denied", message)


@pytest.mark.parametrize("what", ["cancel", "expire"])
def test_console_refuses_a_reviewer(make_breakpoint, rita, what):
    bp = make_breakpoint()
    browser = session_client(rita)
    if what == "cancel":
        response = browser.post(
            f"/admin/breakpoints/breakpoint/{quote(bp.pk)}/cancel/", {"confirm": "yes"}
        )
        assert response.status_code == 403
    else:  # the action is not offered to a reviewer: Django says no valid action was chosen
        response = browser.post(
            "/admin/breakpoints/breakpoint/",
            {"action": "expire_selected", "_selected_action": [bp.pk]},
            follow=True,  # back to the queue, whose actions (approve, reject) do not expire
        )
        assert response.status_code == 200
        assert "expire_selected" not in response.content.decode()
    assert_unchanged(bp)


def test_trigger_rule_of_a_reviewer_cannot_cancel(github, admin_user, make_breakpoint, rita):
    bp = make_breakpoint(run_id="sha-2")
    _rule(admin_user, rita, "cancel", {"reason": "CI failed"})

    taken = _fire(bp)

    assert (taken["outcome"], taken["error"]) == ("refused", CANCEL_REFUSAL)
    assert_unchanged(bp)
    assert_refused_event(bp, "trigger", "one-door", "permission_denied", CANCEL_REFUSAL)


@pytest.mark.parametrize(
    ("who", "may"),
    [("admin", True), ("system", True), ("reviewer", False), ("agent", False)],
)
def test_expiring_and_managing_rules_admit_admins_and_the_system(
    make_breakpoint, admin_user, rita, who, may
):
    actor = {
        "admin": Actor.for_user(admin_user),
        "system": Actor.system("cli"),
        "reviewer": Actor.for_user(rita),
        "agent": Actor.for_agent("agent-a"),
    }[who]
    bp = make_breakpoint()
    attempts = [
        (lambda: breakpoint_expire(breakpoint_id=bp.pk, actor=actor), "expire breakpoints"),
        (lambda: rule_create(actor=actor, pattern="deploy*"), "rules"),
    ]
    for attempt, words in attempts:
        if may:
            attempt()
        else:
            with pytest.raises(Forbidden, match=words):
                attempt()
    bp.refresh_from_db()
    assert bp.status == ("expired" if may else "waiting")


@pytest.mark.parametrize("who", ["system", "reviewer", "agent"])
def test_deleting_admits_only_admins(make_breakpoint, rita, who):
    actor = {
        "system": Actor.system("cli"),
        "reviewer": Actor.for_user(rita),
        "agent": Actor.for_agent("agent-a"),
    }[who]
    bp = make_breakpoint()
    with pytest.raises(Forbidden, match="Only admins can delete breakpoints."):
        breakpoint_delete(breakpoint_id=bp.pk, actor=actor)
    assert_unchanged(bp)


def test_an_admin_by_group_may_delete(make_breakpoint, rita):
    rita.groups.add(Group.objects.get_or_create(name=ADMINS_GROUP)[0])
    bp = make_breakpoint()
    breakpoint_delete(breakpoint_id=bp.pk, actor=Actor.for_user(rita))
    assert not type(bp).objects.filter(pk=bp.pk).exists()


# --- a rejection may come without a comment; a comment alone may not be empty ----------------
# The contract: `comment` may be empty only when `release` is true. feedback_add holds the
# rule; no channel adds a stricter one ("a rejection needs a comment").

EMPTY_COMMENT_REFUSAL = "comment may be empty only when release is true."


def assert_rejected_without_a_comment(bp, via: str) -> None:
    """Released as a rejection whose response is empty, the one stored result of every way."""
    bp.refresh_from_db()
    assert bp.status == "released"
    result = bp.result
    assert (result["approved"], result["response"], result["feedback"]) == (False, "", "")
    (feedback,) = Feedback.objects.filter(breakpoint_id=bp.pk)
    assert (feedback.comment, feedback.approved, feedback.via) == ("", False, via)


def test_api_rejects_without_a_comment(make_breakpoint, rita, client_for):
    bp = make_breakpoint()
    response = client_for(rita).post(
        f"/api/breakpoints/{bp.pk}/feedback",
        {"comment": "", "release": True, "approved": False},
        format="json",
    )
    assert response.status_code == 201
    assert_rejected_without_a_comment(bp, "api")


def test_console_rejects_without_a_comment(make_breakpoint, rita):
    bp = make_breakpoint()
    browser = session_client(rita)
    url = f"/admin/breakpoints/breakpoint/{quote(bp.pk)}/release/"
    confirm = browser.post(url, {"decision": "reject", "comment": ""})
    assert b'name="confirm" value="yes"' in confirm.content  # the form let it through
    sent = browser.post(url, {"decision": "reject", "comment": "", "confirm": "yes"})
    assert sent.status_code == 302
    assert_rejected_without_a_comment(bp, "console")


def test_slack_rejects_without_a_comment(standin, slack_route, make_breakpoint, client, people):
    bp = make_breakpoint()
    reply = announce(bp)
    interact(client, standin.click_payload(reply["channel"], reply["ts"], "bpm_reject", "U0RITA"))
    (view_id,) = standin.views

    sent = interact(client, standin.submit_payload(view_id, "U0RITA", None))  # left empty

    assert (sent.status_code, sent.content) == (200, b"")  # the modal closes
    assert_rejected_without_a_comment(bp, "slack")


def test_email_link_rejects_without_a_comment(make_breakpoint, rita, client, settings):
    settings.BPM_PUBLIC_URL = "http://testserver"
    bp = make_breakpoint()
    reject = urlsplit(decision_urls(bp.pk, rita.pk)["reject"]).path

    response = client.post(reject, {"decision": "reject", "comment": ""})

    assert response.status_code == 200
    assert_rejected_without_a_comment(bp, "email")


def assert_rejected_with_a_note(bp, note: str) -> None:
    """JIRA and trigger rules accept a rejection without a comment too; the result's
    response is the channel's note of where it came from (they always wrote one)."""
    bp.refresh_from_db()
    result = bp.result
    assert (bp.status, result["approved"], result["response"]) == ("released", False, note)


def test_jira_webhook_rejects_without_a_comment(jira, audited, reviewer, client, settings):
    settings.JIRA_WEBHOOK_SECRET = JIRA_SECRET
    jira.users[reviewer.email] = "alice-token"
    bp = audited()
    key = created_issue(bp)

    response = post_jira(client, move(jira, key, "Rejected", as_user=reviewer.email))

    assert response.json()["outcome"] == "released"
    assert_rejected_with_a_note(bp, f"Rejected in JIRA {key}")


def test_trigger_rule_rejects_without_a_comment(github, admin_user, make_breakpoint):
    bp = make_breakpoint(run_id="sha-3")
    _rule(admin_user, admin_user, "release", {"approved": False})

    taken = _fire(bp)

    assert taken["outcome"] == "released"
    assert taken["feedback"].startswith("Released by trigger one-door on event ")
    assert_rejected_with_a_note(bp, taken["feedback"])


def test_a_comment_alone_may_not_be_empty_whichever_way(make_breakpoint, rita, client_for):
    """The API and the console (the ways to comment without deciding) refuse it alike."""
    bp = make_breakpoint()
    api = client_for(rita).post(
        f"/api/breakpoints/{bp.pk}/feedback", {"comment": " ", "release": False}, format="json"
    )
    console = session_client(rita).post(
        f"/admin/breakpoints/breakpoint/{quote(bp.pk)}/comment/", {"comment": " "}, follow=True
    )

    assert assert_error(api, 400)["message"] == EMPTY_COMMENT_REFUSAL
    assert EMPTY_COMMENT_REFUSAL in messages(console)
    assert_unchanged(bp)


# --- four eyes: the requester may not decide (preventSelfReview) ----------------------------
# The rule lives once (breakpoints.services.decisions.require_other_reviewer); each channel
# meets it through feedback_add. rita requested it (named by email, another case: stored
# as rita, accounts.requesters), so rita is refused however she answers, admins alike;
# tina, another reviewer, may release it.

SELF_REVIEW = (
    "You requested this breakpoint (rita): another reviewer must decide it "
    "(self-review is not allowed here)."
)


@pytest.fixture
def requested(make_breakpoint):
    """make a breakpoint rita requested, with self-review prevented by its payload."""

    def make(**fields):
        payload = {"question": "Deploy?", "title": "Deploy", "preventSelfReview": True}
        return make_breakpoint(requested_by="RITA@example.com", payload=payload, **fields)

    return make


def test_api_refuses_the_requester(requested, people, client_for):
    bp = requested()
    response = client_for(people["rita"]).post(
        f"/api/breakpoints/{bp.pk}/feedback", {"comment": "", "release": True}, format="json"
    )
    assert assert_error(response, 403, "permission_denied")["message"] == SELF_REVIEW
    assert_unchanged(bp)
    assert assert_refused_event(bp, "api", "rita", "permission_denied", SELF_REVIEW) == {}


def test_console_refuses_the_requester_and_says_why(requested, people):
    bp = requested()
    browser = session_client(people["rita"])
    page = browser.get(f"/admin/breakpoints/breakpoint/{quote(bp.pk)}/change/")
    assert SELF_REVIEW in page.content.decode()  # where the release buttons would be
    assert b"Review and release" not in page.content

    response = browser.post(
        f"/admin/breakpoints/breakpoint/{quote(bp.pk)}/release/",
        {"decision": "approve", "comment": "", "confirm": "yes"},
        follow=True,
    )
    assert SELF_REVIEW in messages(response)
    assert_unchanged(bp)
    assert assert_refused_event(bp, "console", "rita", "permission_denied", SELF_REVIEW) == {}


def test_slack_refuses_the_requester(standin, slack_route, requested, client, people):
    bp = requested()
    reply = announce(bp)
    clicked = standin.click_payload(reply["channel"], reply["ts"], "bpm_approve", "U0RITA")

    assert interact(client, clicked).status_code == 200

    assert_unchanged(bp)
    assert_refused_event(bp, "slack", "U0RITA", "permission_denied", SELF_REVIEW)
    (told,) = standin.ephemerals
    assert SELF_REVIEW in told["text"]


def test_email_link_refuses_the_requester(requested, people, client, settings):
    settings.BPM_PUBLIC_URL = "http://testserver"
    bp = requested()
    approve = urlsplit(decision_urls(bp.pk, people["rita"].pk)["approve"]).path

    response = client.post(approve, {"decision": "approve", "comment": ""})

    assert response.status_code == 403
    assert SELF_REVIEW in response.content.decode()
    assert_unchanged(bp)
    assert_refused_event(bp, "email", "rita", "permission_denied", SELF_REVIEW)


def test_jira_webhook_refuses_the_requester(jira, audit_route, requested, people, client, settings):
    settings.JIRA_WEBHOOK_SECRET = JIRA_SECRET
    jira.users["rita@example.com"] = "rita-token"
    bp = requested(tags=["audit"])
    key = created_issue(bp)

    response = post_jira(client, move(jira, key, "Approved", as_user="rita@example.com"))

    assert response.json()["outcome"] == "refused"
    assert_unchanged(bp)
    assert_refused_event(bp, "jira", "rita@example.com", "permission_denied", SELF_REVIEW)


def test_trigger_rule_owned_by_the_requester_is_refused(github, admin_user, requested, people):
    """A rejection: a trigger's approval is refused under four eyes whoever owns the rule
    (the next test), so the requester's own rule is refused for who it acts for."""
    bp = requested(run_id="sha-4")
    _rule(admin_user, people["rita"], "release", {"feedback": "CI failed", "approved": False})

    taken = _fire(bp)

    assert (taken["outcome"], taken["error"]) == ("refused", SELF_REVIEW)
    assert_unchanged(bp)
    assert_refused_event(bp, "trigger", "one-door", "permission_denied", SELF_REVIEW)


def test_trigger_rule_approval_is_refused_under_four_eyes_whoever_owns_it(
    github, admin_user, requested, people
):
    bp = requested(run_id="sha-4b")
    _rule(admin_user, people["tina"], "release", {"feedback": "CI passed"})

    taken = _fire(bp)

    assert (taken["outcome"], taken["error"]) == ("refused", AUTOMATIC_APPROVAL_REFUSAL)
    assert_unchanged(bp)


def test_an_admin_who_requested_it_is_refused_too(make_breakpoint, people, client_for, settings):
    settings.BPM_PREVENT_SELF_REVIEW = True  # the service's setting, no payload flag
    bp = make_breakpoint(requested_by="root")
    response = client_for(people["admin"]).post(
        f"/api/breakpoints/{bp.pk}/feedback", {"comment": "", "release": True}, format="json"
    )
    assert_error(response, 403, "permission_denied")
    assert_unchanged(bp)


def test_another_reviewer_may_decide_and_the_requester_may_comment(requested, people, client_for):
    bp = requested()
    comment = client_for(people["rita"]).post(
        f"/api/breakpoints/{bp.pk}/feedback", {"comment": "please look"}, format="json"
    )
    assert comment.status_code == 201  # a comment is not a decision

    released = client_for(people["tina"]).post(
        f"/api/breakpoints/{bp.pk}/feedback", {"comment": "", "release": True}, format="json"
    )

    assert released.status_code == 201, released.content
    bp.refresh_from_db()
    assert (bp.status, bp.result["respondedBy"], bp.result["approved"]) == (
        "released",
        "tina",
        True,
    )


def test_without_prevention_the_requester_may_decide(make_breakpoint, people, client_for):
    bp = make_breakpoint(requested_by="rita")  # no payload flag, no route, setting off
    response = client_for(people["rita"]).post(
        f"/api/breakpoints/{bp.pk}/feedback", {"comment": "", "release": True}, format="json"
    )
    assert response.status_code == 201


# --- four eyes: a person, not an account (issue 47) -------------------------------------------
# rita-2 is rita too: a second account with her email (what single sign-on made before it
# linked to the existing account, or legacy data). Her old account is deactivated, so Slack
# and JIRA (which find a person by email) find rita-2 alone; she is refused every way.


@pytest.fixture
def rita_twin(people):
    """make rita's second account (her email, another case), her first one deactivated:
    after her breakpoint is requested (two active accounts of one email name nobody)."""

    def make():
        twin = ReviewerFactory(username="rita-2", email="Rita@Example.com")
        type(twin).objects.filter(pk=people["rita"].pk).update(is_active=False)
        return twin

    return make


def test_api_refuses_the_requesters_other_account(requested, rita_twin, client_for):
    bp = requested()
    twin = rita_twin()
    response = client_for(twin).post(
        f"/api/breakpoints/{bp.pk}/feedback", {"comment": "", "release": True}, format="json"
    )
    assert assert_error(response, 403, "permission_denied")["message"] == SELF_REVIEW
    assert_unchanged(bp)
    assert_refused_event(bp, "api", "rita-2", "permission_denied", SELF_REVIEW)


def test_api_refuses_an_active_twin_and_a_case_twin(requested, people, client_for):
    """Both accounts active (no deactivation), and an account named RITA without her email."""
    bps = [requested(), requested()]
    twin = ReviewerFactory(username="rita-sso", email="rita@example.com")
    case_twin = ReviewerFactory(username="RITA", email="r@elsewhere.example")
    for bp, account in zip(bps, (twin, case_twin), strict=True):
        response = client_for(account).post(
            f"/api/breakpoints/{bp.pk}/feedback", {"comment": "", "release": True}, format="json"
        )
        assert assert_error(response, 403, "permission_denied")["message"] == SELF_REVIEW
        assert_unchanged(bp)


def test_console_refuses_the_requesters_other_account(requested, rita_twin):
    bp = requested()
    twin = rita_twin()
    browser = session_client(twin)
    page = browser.get(f"/admin/breakpoints/breakpoint/{quote(bp.pk)}/change/")
    assert SELF_REVIEW in page.content.decode()

    response = browser.post(
        f"/admin/breakpoints/breakpoint/{quote(bp.pk)}/release/",
        {"decision": "approve", "comment": "", "confirm": "yes"},
        follow=True,
    )
    assert SELF_REVIEW in messages(response)
    assert_unchanged(bp)
    assert_refused_event(bp, "console", "rita-2", "permission_denied", SELF_REVIEW)


def test_slack_refuses_the_requesters_other_account(
    standin, slack_route, requested, client, rita_twin
):
    bp = requested()
    rita_twin()
    reply = announce(bp)
    clicked = standin.click_payload(reply["channel"], reply["ts"], "bpm_approve", "U0RITA")

    assert interact(client, clicked).status_code == 200

    assert_unchanged(bp)
    assert_refused_event(bp, "slack", "U0RITA", "permission_denied", SELF_REVIEW)


def test_email_link_refuses_the_requesters_other_account(requested, rita_twin, client, settings):
    settings.BPM_PUBLIC_URL = "http://testserver"
    bp = requested()
    twin = rita_twin()
    approve = urlsplit(decision_urls(bp.pk, twin.pk)["approve"]).path

    response = client.post(approve, {"decision": "approve", "comment": ""})

    assert response.status_code == 403
    assert SELF_REVIEW in response.content.decode()
    assert_unchanged(bp)
    assert_refused_event(bp, "email", "rita-2", "permission_denied", SELF_REVIEW)


def test_jira_refuses_the_requesters_other_account(
    jira, audit_route, requested, rita_twin, client, settings
):
    settings.JIRA_WEBHOOK_SECRET = JIRA_SECRET
    jira.users["rita@example.com"] = "rita-token"
    bp = requested(tags=["audit"])
    rita_twin()
    key = created_issue(bp)

    response = post_jira(client, move(jira, key, "Approved", as_user="rita@example.com"))

    assert response.json()["outcome"] == "refused"
    assert_unchanged(bp)
    assert_refused_event(bp, "jira", "rita@example.com", "permission_denied", SELF_REVIEW)


def test_trigger_rule_owned_by_the_requesters_other_account_is_refused(
    github, admin_user, requested, rita_twin
):
    """A rejection (an approval by a trigger is refused under four eyes whoever owns it)."""
    bp = requested(run_id="sha-47")
    twin = rita_twin()
    _rule(admin_user, twin, "release", {"feedback": "CI failed", "approved": False})

    taken = _fire(bp)

    assert (taken["outcome"], taken["error"]) == ("refused", SELF_REVIEW)
    assert_unchanged(bp)


# --- a reviewer without a seat, a breakpoint no longer waiting: the same record every way ---
# rita is a reviewer, but the breakpoint is routed to tech-lead (tina's group, not hers), or
# tina released it already. Whichever way rita answers, feedback_add (or release_check,
# which asks the same before a confirmation step) refuses, and records it once, after the
# refused transaction rolled back: the same event, its channel's details aside.

NO_SEAT = "Only members of tech-lead (or admins) may release this breakpoint; you may comment."
DECIDED = "Breakpoint is released; it no longer takes feedback."
KINDS = {"no-seat": ("permission_denied", NO_SEAT), "decided": ("invalid_state", DECIDED)}
ROUTED = {"question": "Deploy?", "title": "Deploy", "expert": "tech-lead"}


@pytest.fixture(params=list(KINDS))
def kind(request) -> str:
    return request.param


def refusable(make, kind: str, **fields):
    """A breakpoint rita will be refused: routed to tech-lead, or (once settled) decided."""
    return make(payload=ROUTED, **fields) if kind == "no-seat" else make(**fields)


def settle(bp, kind: str, people) -> None:
    """For "decided": tina releases it first, through the service as any channel would."""
    if kind == "decided":
        feedback_add(
            breakpoint_id=bp.pk, actor=Actor.for_user(people["tina"]), comment="", release=True
        )


def assert_refused_once(bp, kind: str, via: str, who: str) -> dict:
    """Nothing of rita's written (only tina's release, if any), and one refused event."""
    bp.refresh_from_db()
    assert bp.status == ("waiting" if kind == "no-seat" else "released")
    authors = list(Feedback.objects.filter(breakpoint_id=bp.pk).values_list("author", flat=True))
    assert authors == ([] if kind == "no-seat" else ["tina"])
    code, message = KINDS[kind]
    return assert_refused_event(bp, via, who, code, message)


def test_api_records_the_refusal(make_breakpoint, people, client_for, kind):
    bp = refusable(make_breakpoint, kind)
    settle(bp, kind, people)

    response = client_for(people["rita"]).post(
        f"/api/breakpoints/{bp.pk}/feedback", {"comment": "", "release": True}, format="json"
    )

    code, message = KINDS[kind]
    assert assert_error(response, 403 if kind == "no-seat" else 409, code)["message"] == message
    assert assert_refused_once(bp, kind, "api", "rita") == {}


def test_console_records_the_refusal(make_breakpoint, people, kind):
    bp = refusable(make_breakpoint, kind)
    browser = session_client(people["rita"])
    url = f"/admin/breakpoints/breakpoint/{quote(bp.pk)}/release/"
    if kind == "no-seat":  # the review page says so where the buttons would be
        page = browser.get(f"/admin/breakpoints/breakpoint/{quote(bp.pk)}/change/")
        assert NO_SEAT in page.content.decode()
        assert refusals(bp) == []  # a page that asks records nothing
    settle(bp, kind, people)

    response = browser.post(
        url, {"decision": "approve", "comment": "", "confirm": "yes"}, follow=True
    )

    assert messages(response) == [NO_SEAT if kind == "no-seat" else ALREADY_SENT.format("released")]
    assert assert_refused_once(bp, kind, "console", "rita") == {}


def test_slack_records_the_refusal(standin, slack_route, make_breakpoint, client, people, kind):
    bp = refusable(make_breakpoint, kind)
    reply = announce(bp)
    settle(bp, kind, people)
    clicked = standin.click_payload(reply["channel"], reply["ts"], "bpm_approve", "U0RITA")

    assert interact(client, clicked).status_code == 200

    assert assert_refused_once(bp, kind, "slack", "U0RITA") == {"action": "bpm_approve"}
    (told,) = standin.ephemerals
    assert KINDS[kind][1] in told["text"]


def test_email_link_records_the_refusal(make_breakpoint, people, client, settings, kind):
    settings.BPM_PUBLIC_URL = "http://testserver"
    bp = refusable(make_breakpoint, kind)
    settle(bp, kind, people)
    approve = urlsplit(decision_urls(bp.pk, people["rita"].pk)["approve"]).path

    response = client.post(approve, {"decision": "approve", "comment": ""})

    assert response.status_code == (403 if kind == "no-seat" else 200)
    details = assert_refused_once(bp, kind, "email", "rita")
    assert details == {"userId": people["rita"].pk}


def test_jira_webhook_records_the_refusal(jira, audited, people, client, settings, kind):
    settings.JIRA_WEBHOOK_SECRET = JIRA_SECRET
    jira.users["rita@example.com"] = "rita-token"
    bp = refusable(audited, kind)
    key = created_issue(bp)
    settle(bp, kind, people)

    response = post_jira(client, move(jira, key, "Approved", as_user="rita@example.com"))

    assert response.json()["outcome"] == "refused"
    details = assert_refused_once(bp, kind, "jira", "rita@example.com")
    assert details == {"issue": key, "status": "Approved", "approved": True}


def test_trigger_rule_records_the_refusal(
    github, admin_user, make_breakpoint, people, kind, monkeypatch
):
    bp = refusable(make_breakpoint, kind, run_id="sha-5")
    _rule(admin_user, people["rita"], "release", {"feedback": "CI passed"})
    settle(bp, kind, people)
    # A rule acts on the waiting breakpoints it selects: "decided" is one decided between
    # its selection and its action (the race the service settles).
    monkeypatch.setattr(trigger_actions, "select_waiting", lambda selector: [bp])

    taken = _fire(bp)

    assert (taken["outcome"], taken["error"]) == ("refused", KINDS[kind][1])
    details = assert_refused_once(bp, kind, "trigger", "one-door")
    assert set(details) == {"eventId", "triggerRule"}


# --- "may this person release this?", asked before a form is shown ---------------------------


@pytest.mark.parametrize("who", ["requester", "no-seat"])
def test_the_email_page_shows_the_refusal_instead_of_the_form(
    make_breakpoint, requested, people, client, settings, who
):
    """The page would otherwise offer a form whose POST is refused; a GET records nothing."""
    settings.BPM_PUBLIC_URL = "http://testserver"
    bp = requested() if who == "requester" else make_breakpoint(payload=ROUTED)
    approve = urlsplit(decision_urls(bp.pk, people["rita"].pk)["approve"]).path

    page = client.get(approve)

    body = page.content.decode()
    assert page.status_code == 403
    assert (SELF_REVIEW if who == "requester" else NO_SEAT) in body
    assert 'data-bpm-page="form"' not in body and 'method="post"' not in body
    assert refusals(bp) == []


def test_the_email_page_shows_the_form_to_a_reviewer_with_the_seat(
    make_breakpoint, people, client, settings
):
    settings.BPM_PUBLIC_URL = "http://testserver"
    bp = make_breakpoint(payload=ROUTED)
    approve = urlsplit(decision_urls(bp.pk, people["tina"].pk)["approve"]).path

    page = client.get(approve)

    assert page.status_code == 200
    assert 'data-bpm-page="form"' in page.content.decode()


def test_release_refusal_answers_each_reason(make_breakpoint, requested, people):
    """The one question every channel asks, and its answers."""
    plain, routed, mine = make_breakpoint(), make_breakpoint(payload=ROUTED), requested()
    rita, tina, nora = (Actor.for_user(people[name]) for name in ("rita", "tina", "nora"))

    assert release_refusal(plain, rita) is None
    assert release_refusal(plain, nora) == FEEDBACK_REFUSAL
    assert release_refusal(routed, rita) == NO_SEAT
    assert release_refusal(routed, tina) is None
    assert release_refusal(mine, rita) == SELF_REVIEW
    settle(plain, "decided", people)
    plain.refresh_from_db()
    assert release_refusal(plain, rita) == DECIDED
    assert refusals(plain) == refusals(routed) == refusals(mine) == []  # a question writes nothing


@pytest.mark.django_db(transaction=True)
def test_a_refusal_inside_another_service_is_recorded_once_and_survives(make_breakpoint, people):
    """Always approve refuses through feedback_add inside its own transaction: the event is
    written after that transaction rolled back, committed, and not twice."""
    bp = make_breakpoint(payload={**ROUTED, "presentAlwaysApprove": True})

    with pytest.raises(Forbidden, match="Only members of tech-lead"):
        breakpoint_always_approve(breakpoint_id=bp.pk, actor=Actor.for_user(people["rita"]))

    assert_refused_event(bp, "console", "rita", "permission_denied", NO_SEAT)
    assert_unchanged(bp)
