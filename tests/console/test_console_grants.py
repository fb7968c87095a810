"""Grants in the console: "Approve, and allow this" on the review page (offered only where
the grants service would give one), a confirmation that says what the grant covers, the
release and the grant written together or neither; the grants page and its Revoke."""

import re
from html import unescape

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.test.utils import CaptureQueriesContext

from audit.models import GrantEvent
from breakpoints.models import Breakpoint, Feedback
from core.actors import Actor
from grants.models import Grant
from grants.services import grant_revoke
from tests.support.console import (
    XSS,
    action_url,
    assert_inert,
    messages,
    review_url,
    session_client,
)
from tests.support.factories import ReviewerFactory
from tests.support.grants import KEY, create, granted, payload

GRANTS_URL = "/admin/grants/grant/"


def revoke_url(grant_id: str) -> str:
    return f"{GRANTS_URL}{grant_id}/revoke/"


def text(response) -> str:
    """The page's text, tags removed and whitespace folded, as a reader sees it."""
    html = re.sub(r"<[^>]+>", "", response.content.decode())
    return re.sub(r"\s+", " ", unescape(html))


def confirm(client, bp, **data):
    """Step one of a release: the confirmation page."""
    response = client.post(action_url("release", bp.pk), {"decision": "approve", **data})
    assert response.status_code == 200, response
    return response


# --- the offer -------------------------------------------------------------------------


def test_the_review_page_offers_each_grant_for_a_breakpoint_with_a_run(reviewer_browser):
    bp = create(run_id="r-42")

    page = reviewer_browser.get(review_url(bp.pk))

    html = page.content.decode()
    assert 'id="bpm-grant"' in html
    for value in ("run", "hour", "calls"):
        assert f'name="grant" value="{value}"' in html
    assert 'name="grant_uses"' in html and 'min="1"' in html and 'max="1000"' in html
    # No grant unless the reviewer chooses one.
    assert re.search(r'<input type="radio" name="grant" value=""[^>]* checked>', html)
    shown = text(page)
    assert "for the rest of this run" in shown and "for 1 hour" in shown
    assert "for the next N calls" in shown


def test_without_a_run_the_rest_of_the_run_is_not_offered_and_the_page_says_why(
    reviewer_browser,
):
    bp = create()

    page = reviewer_browser.get(review_url(bp.pk))

    html = page.content.decode()
    assert 'name="grant" value="hour"' in html
    assert 'name="grant" value="run"' not in html
    assert "This breakpoint has no runId" in text(page)


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"payload": payload(presentAlwaysApprove=False)}, "presentAlwaysApprove to false"),
        ({"payload": {"question": "Deploy?"}}, "no key of its own"),
        ({"payload": payload(preventSelfReview=True), "requested_by": "someone-else"}, None),
    ],
    ids=["present-always-approve-false", "fallback-key", "four-eyes"],
)
def test_the_offer_is_withheld_with_the_services_reason(reviewer_browser, fields, reason):
    ReviewerFactory(username="someone-else")
    bp = create(run_id="r-1", **fields)

    page = reviewer_browser.get(review_url(bp.pk))

    assert 'id="bpm-grant"' not in page.content.decode()
    shown = text(page)
    assert "“Approve, and allow this” is not offered here." in shown
    assert (reason or "Four eyes (preventSelfReview)") in shown


def test_a_voting_breakpoint_is_offered_no_grant(reviewer_browser, console_reviewer):
    # A quorum of one seat the reviewer holds: the reviewer may vote, a grant is not theirs.
    console_reviewer.groups.add(Group.objects.get_or_create(name="ops-lead")[0])
    bp = create(payload=payload(expert=["ops-lead"], strategy="collect-all"))

    page = reviewer_browser.get(review_url(bp.pk))

    assert 'id="bpm-grant"' not in page.content.decode()
    assert "A grant is one person's say" in text(page)


# --- the confirmation and the release ---------------------------------------------------


def test_the_confirmation_names_what_the_grant_covers_and_writes_nothing(reviewer_browser):
    bp = create(run_id="r-42")

    response = confirm(reviewer_browser, bp, grant="calls", grant_uses="2")

    shown = text(response)
    assert (
        f"Breakpoints of agent agent-a with the key {KEY} in any run are approved when they "
        "are created, without asking anyone: the next 2 of them, and until" in shown
    )
    assert "(24 hours from now)" in shown
    assert "It never applies under four eyes (preventSelfReview), to another agent" in shown
    html = response.content.decode()
    assert '<input type="hidden" name="grant" value="calls">' in html
    assert '<input type="hidden" name="grant_uses" value="2">' in html
    assert "Send approval and give the grant" in html
    assert not Grant.objects.exists() and not Feedback.objects.exists()


def test_the_rest_of_the_run_names_the_run_and_lasts_eight_hours(reviewer_browser):
    bp = create(run_id="r-42")

    shown = text(confirm(reviewer_browser, bp, grant="run"))

    assert f"with the key {KEY} in run r-42 are approved" in shown
    assert "(8 hours from now)" in shown and "the next" not in shown
    assert "to another key or another run" in shown


def test_every_expiry_is_capped_by_the_setting(reviewer_browser, settings):
    settings.BPM_GRANT_MAX_SECONDS = 1800
    bp = create(run_id="r-42")

    assert "(30 minutes from now)" in text(confirm(reviewer_browser, bp, grant="run"))
    assert "(30 minutes from now)" in text(confirm(reviewer_browser, bp, grant="hour"))


def test_confirming_releases_and_gives_the_grant_in_one_step(reviewer_browser):
    bp = create(run_id="r-42")
    confirm(reviewer_browser, bp, grant="calls", grant_uses="2")

    response = reviewer_browser.post(
        action_url("release", bp.pk),
        {
            "decision": "approve",
            "comment": "",
            "grant": "calls",
            "grant_uses": "2",
            "confirm": "yes",
        },
        follow=True,
    )

    bp.refresh_from_db()
    assert bp.status == "released" and bp.result["approved"] is True
    grant = Grant.objects.get()
    assert (grant.scope, grant.agent_id, grant.key, grant.run_id) == ("key", "agent-a", KEY, None)
    assert (grant.uses_granted, grant.uses_left, grant.granted_by) == (2, 2, "rita")
    assert grant.breakpoint_id == bp.pk and grant.expires_at is not None
    assert GrantEvent.objects.filter(grant_id=grant.pk, type="created").count() == 1
    [message] = messages(response)
    assert (
        f"Grant {grant.pk} approves the breakpoints of agent “agent-a” with the key “{KEY}” "
        "in any run, the next 2 and until " in message
    )
    # The grant works: the next one is approved at creation, by it.
    later = create()
    assert later.status == "released" and later.result["respondedBy"] == f"grant:{grant.pk}"


def test_a_run_grant_from_the_console_covers_its_run(reviewer_browser):
    bp = create(run_id="r-42")
    reviewer_browser.post(
        action_url("release", bp.pk),
        {"decision": "approve", "grant": "run", "confirm": "yes"},
    )
    grant = Grant.objects.get()
    assert (grant.scope, grant.run_id, grant.uses_granted) == ("run", "r-42", None)
    assert create(run_id="r-42").status == "released"
    assert create(run_id="r-43").status == "waiting"


def test_a_rejection_with_a_grant_is_refused_with_the_services_message(reviewer_browser):
    bp = create(run_id="r-42")

    response = reviewer_browser.post(
        action_url("release", bp.pk), {"decision": "reject", "grant": "hour"}
    )

    assert response.status_code == 200
    assert "Only an approval (release: true, approved) may carry a grant." in text(response)
    assert Breakpoint.objects.get(pk=bp.pk).status == "waiting"
    assert not Grant.objects.exists()


def test_a_refused_grant_writes_neither_the_grant_nor_the_decision(reviewer_browser):
    """Posted straight to the confirmed step (a stale page, a crafted form): the service
    refuses the run grant of a breakpoint without a run, and the approval with it."""
    bp = create()

    response = reviewer_browser.post(
        action_url("release", bp.pk), {"decision": "approve", "grant": "run", "confirm": "yes"}
    )

    assert response.status_code == 200
    assert "This breakpoint has no runId" in text(response)
    assert Breakpoint.objects.get(pk=bp.pk).status == "waiting"
    assert not Grant.objects.exists() and not Feedback.objects.exists()
    assert not GrantEvent.objects.exists()


def test_a_four_eyes_grant_posted_anyway_is_refused_and_nothing_is_written(reviewer_browser):
    ReviewerFactory(username="someone-else")
    bp = create(payload=payload(preventSelfReview=True), requested_by="someone-else")

    response = reviewer_browser.post(
        action_url("release", bp.pk),
        {"decision": "approve", "grant": "hour", "confirm": "yes"},
        follow=True,
    )

    assert any("Four eyes (preventSelfReview)" in m for m in messages(response))
    assert Breakpoint.objects.get(pk=bp.pk).status == "waiting"
    assert not Grant.objects.exists() and not Feedback.objects.exists()


@pytest.mark.parametrize("uses", ["0", "1001", "", "two"])
def test_the_number_of_calls_is_checked(reviewer_browser, uses):
    bp = create()

    response = reviewer_browser.post(
        action_url("release", bp.pk),
        {"decision": "approve", "grant": "calls", "grant_uses": uses, "confirm": "yes"},
    )

    assert response.status_code == 200
    assert 'id="bpm-grant"' in response.content.decode()  # the review page, with the error
    assert "errorlist" in response.content.decode()
    assert Breakpoint.objects.get(pk=bp.pk).status == "waiting"
    assert not Grant.objects.exists()


def test_back_to_edit_keeps_the_chosen_grant(reviewer_browser):
    bp = create()

    page = reviewer_browser.post(
        review_url(bp.pk),
        {"decision": "approve", "grant": "calls", "grant_uses": "7", "edit": "1"},
    )

    html = page.content.decode()
    assert re.search(r'<input type="radio" name="grant" value="calls"[^>]* checked>', html)
    assert re.search(r'<input type="number" name="grant_uses" value="7"', html)
    assert not Grant.objects.exists()


def test_an_approval_without_a_grant_gives_none(reviewer_browser):
    bp = create()
    response = confirm(reviewer_browser, bp, grant="")
    assert 'id="bpm-grant-preview"' not in response.content.decode()
    reviewer_browser.post(action_url("release", bp.pk), {"decision": "approve", "confirm": "yes"})
    assert Breakpoint.objects.get(pk=bp.pk).status == "released"
    assert not Grant.objects.exists()


# --- the grants page -------------------------------------------------------------------


@pytest.fixture
def two_granters(console_reviewer):
    """rita's grant and olga's, each from an approval of its own."""
    olga = ReviewerFactory(username="olga")
    mine = granted(console_reviewer, create(run_id="r-1"), uses=3)
    theirs = granted(olga, create(agent_id="agent-b"), expiresInSeconds=600)
    return mine, theirs


def test_a_reviewer_lists_the_grants_they_gave(reviewer_browser, two_granters):
    mine, theirs = two_granters

    page = reviewer_browser.get(GRANTS_URL)

    assert page.status_code == 200
    html = page.content.decode()
    assert mine.pk in html and theirs.pk not in html
    shown = text(page)
    assert "3 of 3" in shown and "agent-a" in shown and KEY in shown
    assert f'href="{review_url(mine.breakpoint_id)}"' in html
    assert f'href="{revoke_url(mine.pk)}"' in html


def test_an_admin_lists_every_grant(admin_browser, two_granters):
    mine, theirs = two_granters

    html = admin_browser.get(GRANTS_URL).content.decode()

    assert mine.pk in html and theirs.pk in html
    assert "olga" in html and "rita" in html
    assert "<h1>Grants</h1>" in html


def test_a_reviewers_list_is_titled_as_their_own(reviewer_browser, two_granters):
    assert "<h1>Your grants</h1>" in reviewer_browser.get(GRANTS_URL).content.decode()


def test_the_list_shows_live_grants_unless_the_filter_asks_for_ended(
    reviewer_browser, console_reviewer
):
    live = granted(console_reviewer, create(), uses=3)
    ended = granted(console_reviewer, create(payload=payload("deploy.db")), uses=3)
    grant_revoke(actor=Actor.for_user(console_reviewer), grant_id=ended.pk)

    assert ended.pk not in reviewer_browser.get(GRANTS_URL).content.decode()
    shown = reviewer_browser.get(GRANTS_URL + "?state=ended").content.decode()
    assert ended.pk in shown and live.pk not in shown
    assert "revoked" in shown and revoke_url(ended.pk) not in shown
    every = reviewer_browser.get(GRANTS_URL + "?state=all").content.decode()
    assert ended.pk in every and live.pk in every


def test_the_list_costs_the_same_queries_for_one_grant_or_many(reviewer_browser, console_reviewer):
    def page_queries() -> int:
        with CaptureQueriesContext(connection) as queries:
            page = reviewer_browser.get(GRANTS_URL)
        assert page.status_code == 200
        return len(queries)

    granted(console_reviewer, create(payload=payload("deploy.k0")), uses=2)
    page_queries()  # the session and the site's caches warmed
    one = page_queries()
    for index in range(1, 12):
        granted(console_reviewer, create(payload=payload(f"deploy.k{index}")), uses=2)

    assert page_queries() == one
    assert reviewer_browser.get(GRANTS_URL).content.decode().count("bpm-revoke") == 12


def test_an_unknown_state_lists_live_grants(reviewer_browser, console_reviewer):
    live = granted(console_reviewer, create(), uses=3)
    ended = granted(console_reviewer, create(payload=payload("deploy.db")), uses=3)
    grant_revoke(actor=Actor.for_user(console_reviewer), grant_id=ended.pk)

    html = reviewer_browser.get(GRANTS_URL + "?state=bogus").content.decode()

    assert live.pk in html and ended.pk not in html


def test_the_grants_page_is_in_the_consoles_sections(reviewer_browser):
    assert f'href="{GRANTS_URL}"' in reviewer_browser.get("/admin/sections/").content.decode()


def test_revoke_asks_for_confirmation_then_revokes(reviewer_browser, two_granters):
    mine, _ = two_granters

    page = reviewer_browser.get(revoke_url(mine.pk))
    assert page.status_code == 200
    shown = text(page)
    assert "in run" not in shown and "3 more of them" in shown
    assert "csrfmiddlewaretoken" in page.content.decode()
    mine.refresh_from_db()
    assert mine.revoked_at is None  # a GET revokes nothing

    response = reviewer_browser.post(revoke_url(mine.pk), follow=True)

    mine.refresh_from_db()
    assert mine.status == "revoked" and mine.revoked_by == "rita"
    assert f"Revoked grant {mine.pk}" in messages(response)[0]
    assert GrantEvent.objects.filter(grant_id=mine.pk, type="revoked", actor="rita").exists()
    assert create().status == "waiting"


def test_revoke_is_refused_for_another_reviewers_grant(reviewer_browser, two_granters):
    _, theirs = two_granters

    for response in (
        reviewer_browser.get(revoke_url(theirs.pk), follow=True),
        reviewer_browser.post(revoke_url(theirs.pk), follow=True),
    ):
        assert any("Only the reviewer who granted it, or an admin" in m for m in messages(response))
    theirs.refresh_from_db()
    assert theirs.revoked_at is None


def test_an_admin_revokes_any_grant(admin_browser, two_granters):
    _, theirs = two_granters
    admin_browser.post(revoke_url(theirs.pk))
    theirs.refresh_from_db()
    assert theirs.revoked_by == "adam"


def test_revoke_needs_csrf(console_reviewer, two_granters):
    mine, _ = two_granters
    client = session_client(console_reviewer)
    client.handler.enforce_csrf_checks = True
    assert client.post(revoke_url(mine.pk)).status_code == 403
    mine.refresh_from_db()
    assert mine.revoked_at is None


def test_agent_text_is_escaped_on_every_grants_page(reviewer_browser, console_reviewer):
    # Keys and agent ids are dotted kebab-case; a run id and the values are free text.
    bp = create(run_id=f"r-{XSS}")
    grant = granted(
        console_reviewer, bp, scope="run", uses=2, values={XSS: {"prefix": f"/srv/{XSS}"}}
    )

    for url in (GRANTS_URL, revoke_url(grant.pk), f"{GRANTS_URL}{grant.pk}/change/"):
        page = reviewer_browser.get(url)
        assert page.status_code == 200, url
        html = page.content.decode()
        assert_inert(html)
        assert "&lt;script&gt;" in html

    other = create(run_id=f"r-{XSS}", payload=payload("deploy.other"))
    page = confirm(reviewer_browser, other, grant="run").content.decode()
    assert_inert(page)
    assert "in run r-&lt;script&gt;" in re.sub(r"</?code>", "", page)
