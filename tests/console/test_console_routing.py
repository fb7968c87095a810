"""Routing in the console: the seats of a routed breakpoint with their votes and what is
missing, experts that resolve to nobody flagged, and the "Assigned to me" queue filter."""

import pytest

from audit.models import Event
from breakpoints.services import feedback_add
from core.actors import Actor
from tests.support.console import QUEUE_URL, action_url, review_url, session_client

QUORUM = {
    "question": "Approve production deployment?",
    "title": "Production Deployment",
    "expert": ["tech-lead", "ops-lead", "security-lead"],
    "strategy": "quorum",
}


@pytest.fixture
def quorum_bp(make_breakpoint, three_experts):
    return make_breakpoint(payload=QUORUM)


def _seats(response) -> dict:
    panel = response.context["seats"]
    return {seat.name: seat for seat in panel.seats}


def test_review_page_shows_each_seat_and_the_strategy(reviewer_browser, quorum_bp):
    response = reviewer_browser.get(review_url(quorum_bp.pk))
    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="bpm-seats"' in html
    for name in QUORUM["expert"]:
        assert f'<strong class="bpm-seat__name">{name}</strong>' in html
    assert "Strategy <strong>quorum</strong>" in html
    assert "approved once a majority of seats approve" in html
    assert html.count("no vote yet") == 3
    assert "2 more approval(s) needed for a majority (2 of 3 seats)" in html
    assert "resolves to nobody" not in html  # every group has a member


def test_votes_and_missing_seats_after_one_expert_voted(reviewer_browser, quorum_bp, three_experts):
    feedback_add(
        breakpoint_id=quorum_bp.pk,
        actor=Actor.for_user(three_experts["tech-lead"]),
        comment="Rollback plan looks fine",
        release=True,
        approved=True,
    )
    feedback_add(
        breakpoint_id=quorum_bp.pk,
        actor=Actor.for_user(three_experts["ops-lead"]),
        comment="Not during the freeze",
        release=True,
        approved=False,
    )
    response = reviewer_browser.get(review_url(quorum_bp.pk))
    seats = _seats(response)
    assert seats["tech-lead"].decision == "approved"
    assert seats["tech-lead"].vote["respondedBy"] == "tina"
    assert seats["ops-lead"].decision == "rejected"
    assert seats["security-lead"].vote is None
    html = response.content.decode()
    assert "Rollback plan looks fine" in html and "Not during the freeze" in html
    assert "by <strong>tina</strong>" in html and "by <strong>oscar</strong>" in html
    assert html.count("no vote yet") == 1
    assert "1 more approval(s) needed" in html and "not yet voted: security-lead." in html


def test_an_expert_votes_through_the_console_and_the_breakpoint_keeps_waiting(
    quorum_bp, three_experts
):
    tina = session_client(three_experts["tech-lead"])
    tina.post(action_url("release", quorum_bp.pk), {"decision": "approve", "comment": "ok"})
    response = tina.post(
        action_url("release", quorum_bp.pk),
        {"decision": "approve", "comment": "ok", "confirm": "yes"},
        follow=True,
    )
    assert response.status_code == 200
    quorum_bp.refresh_from_db()
    assert quorum_bp.status == "waiting"
    assert [vote["seat"] for vote in quorum_bp.votes] == ["tech-lead"]
    assert _seats(response)["tech-lead"].vote["respondedBy"] == "tina"


def test_released_quorum_shows_every_vote_and_nothing_missing(
    reviewer_browser, quorum_bp, three_experts
):
    for seat in ("tech-lead", "security-lead"):
        feedback_add(
            breakpoint_id=quorum_bp.pk,
            actor=Actor.for_user(three_experts[seat]),
            comment="",
            release=True,
            approved=True,
        )
    response = reviewer_browser.get(review_url(quorum_bp.pk))
    assert response.context["bp"].status == "released"
    assert response.context["seats"].missing == ""
    assert "Still missing" not in response.content.decode()


def test_collect_all_lists_every_seat_still_to_vote(
    reviewer_browser, make_breakpoint, three_experts
):
    bp = make_breakpoint(payload={**QUORUM, "strategy": "collect-all"})
    html = reviewer_browser.get(review_url(bp.pk)).content.decode()
    assert "Every seat must vote; not yet voted: tech-lead, ops-lead, security-lead." in html


def test_expert_resolving_to_nobody_is_flagged_on_the_review_page(
    reviewer_browser, make_breakpoint, three_experts
):
    bp = make_breakpoint(payload={**QUORUM, "expert": ["tech-lead", "ghost-team"]})
    response = reviewer_browser.get(review_url(bp.pk))
    seats = _seats(response)
    assert seats["tech-lead"].resolved and seats["tech-lead"].kind_label == "group"
    assert not seats["ghost-team"].resolved
    assert "resolves to nobody — admins answer" in response.content.decode()


def test_queue_flags_breakpoints_with_unresolved_experts(
    reviewer_browser, make_breakpoint, three_experts
):
    routed = make_breakpoint(payload={"question": "Routed ok?", "expert": "tech-lead"})
    ghost = make_breakpoint(payload={"question": "Nobody home?", "expert": ["ghost-team"]})
    plain = make_breakpoint(payload={"question": "Plain?"})
    response = reviewer_browser.get(QUEUE_URL)
    rows = {bp.pk: bp for bp in response.context["cl"].result_list}
    assert rows[ghost.pk].unresolved_experts == ["ghost-team"]
    assert rows[routed.pk].unresolved_experts == []
    assert rows[plain.pk].unresolved_experts == []
    html = response.content.decode()
    assert html.count("unresolved expert</span>") == 1
    assert "ghost-team: resolves to nobody — admins answer" in html


# --- "Assigned to me" ------------------------------------------------------------------------


def test_assigned_to_me_shows_only_breakpoints_routed_to_the_user(
    make_breakpoint, three_experts, expert_member
):
    mine_by_group = make_breakpoint(payload={"question": "For tech leads?", "expert": "tech-lead"})
    mine_by_name = make_breakpoint(
        payload={"question": "For tina?", "expert": ["ops-lead", "tina"]}
    )
    make_breakpoint(payload={"question": "For ops?", "expert": "ops-lead"})
    make_breakpoint(payload={"question": "Not routed?"})
    tina = session_client(three_experts["tech-lead"])

    response = tina.get(QUEUE_URL, {"assigned": "me"})
    assert response.status_code == 200
    shown = {bp.pk for bp in response.context["cl"].result_list}
    assert shown == {mine_by_group.pk, mine_by_name.pk}
    assert b"Assigned to me" in response.content
    everything = tina.get(QUEUE_URL)
    assert len(everything.context["cl"].result_list) == 4


def test_assigned_to_me_includes_owner_breakpoints_for_project_owners(
    make_breakpoint, expert_member, settings
):
    settings.BPM_PROJECT_OWNERS = ["olivia"]
    olivia = session_client(expert_member("olivia"))
    owned = make_breakpoint(payload={"question": "Release?", "expert": "owner"})
    make_breakpoint(payload={"question": "Other?", "expert": "tech-lead"})
    response = olivia.get(QUEUE_URL, {"assigned": "me"})
    assert [bp.pk for bp in response.context["cl"].result_list] == [owned.pk]


def test_assigned_to_me_is_empty_for_a_reviewer_in_no_expert_group(
    reviewer_browser, make_breakpoint, three_experts
):
    make_breakpoint(payload={"question": "For tech leads?", "expert": "tech-lead"})
    response = reviewer_browser.get(QUEUE_URL, {"assigned": "me"})
    assert list(response.context["cl"].result_list) == []


def test_a_member_of_two_seats_votes_once_through_the_console(quorum_bp, expert_member):
    """bob holds two of the quorum's seats: his second vote is refused where he gave it,
    recorded as the API's would be, and the breakpoint keeps one vote of his."""
    bob = session_client(expert_member("bob", "tech-lead", "ops-lead"))
    confirmed = {"decision": "approve", "comment": "ok", "confirm": "yes"}
    bob.post(action_url("release", quorum_bp.pk), confirmed, follow=True)

    again = bob.post(action_url("release", quorum_bp.pk), confirmed, follow=True)

    assert "bob has already voted on this breakpoint (seat tech-lead)" in again.content.decode()
    quorum_bp.refresh_from_db()
    assert (quorum_bp.status, [v["seat"] for v in quorum_bp.votes]) == ("waiting", ["tech-lead"])
    refused = Event.objects.filter(breakpoint_id=quorum_bp.pk, type="refused")
    assert [(event.actor, event.metadata["via"]) for event in refused] == [
        ("console:bob", "console")
    ]
