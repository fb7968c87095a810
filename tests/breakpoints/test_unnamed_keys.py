"""A breakpoint without a breakpointId or title has no key of its own ("untitled" is shared
by every unnamed question): no approval count, no "Always approve", never shown as "untitled".
"""

import pytest

from breakpoints.representation.contract import breakpoint_json
from breakpoints.services import breakpoint_always_approve, feedback_add
from channels.email import messages as email
from channels.jira.issues import _summary
from channels.slack import blocks as slack_blocks
from core.actors import Actor
from core.exceptions import InvalidInput
from policies.models import AutoApprovalRule


def approve(bp, reviewer) -> None:
    feedback_add(
        breakpoint_id=bp.pk, actor=Actor.for_user(reviewer), comment="", release=True, approved=True
    )


def test_unrelated_unnamed_approvals_never_auto_approve_a_third_question(
    db, make_breakpoint, reviewer
):
    """The issue's reproduction: two approved unnamed questions, then a dangerous one."""
    for question in ("Rename the README?", "Bump the patch version?"):
        approve(make_breakpoint(payload={"question": question}), reviewer)

    dangerous = make_breakpoint(payload={"question": "Drop the production database?"})

    assert dangerous.status == "waiting"
    assert dangerous.auto_approval["recommended"] is False
    assert dangerous.auto_approval["consecutiveApprovals"] == 0


def test_auto_approve_after_n_without_an_explicit_key_is_a_400(agent_client):
    response = agent_client.post(
        "/api/breakpoints",
        {"payload": {"question": "Drop the production database?", "autoApproveAfterN": 2}},
        format="json",
    )

    assert response.status_code == 400
    body = response.json()["error"]
    assert body["code"] == "validation_error"
    assert "payload.autoApproveAfterN" in body["details"]
    assert "breakpointId" in body["message"]


@pytest.mark.parametrize(
    "payload, title",
    [
        ({"question": "?", "breakpointId": "db.drop", "autoApproveAfterN": 2}, None),
        ({"question": "?", "title": "Drop the DB", "autoApproveAfterN": 2}, None),
        ({"question": "?", "autoApproveAfterN": 2}, "Drop the DB"),
        ({"question": "?", "autoApproveAfterN": -1}, None),  # disabled: nothing to count
    ],
)
def test_auto_approve_after_n_with_an_explicit_key_or_disabled_is_accepted(
    agent_client, payload, title
):
    body = {"payload": payload, **({"title": title} if title else {})}
    response = agent_client.post("/api/breakpoints", body, format="json")

    assert response.status_code == 201, response.json()


def test_a_title_that_slugs_to_nothing_is_no_key_either(agent_client):
    response = agent_client.post(
        "/api/breakpoints",
        {"title": "!!!", "payload": {"question": "?", "autoApproveAfterN": 2}},
        format="json",
    )

    assert response.status_code == 400


def test_an_explicit_untitled_key_counts_only_breakpoints_that_chose_it(
    db, make_breakpoint, reviewer
):
    for question in ("A?", "B?"):
        approve(make_breakpoint(payload={"question": question}), reviewer)

    chosen = make_breakpoint(
        payload={"question": "C?", "breakpointId": "untitled", "autoApproveAfterN": 2}
    )

    assert chosen.status == "waiting"
    assert chosen.auto_approval["consecutiveApprovals"] == 0


def test_always_approve_is_refused_without_an_explicit_key(db, make_breakpoint, reviewer):
    bp = make_breakpoint(payload={"question": "Rename the README?"})

    with pytest.raises(InvalidInput) as refused:
        breakpoint_always_approve(breakpoint_id=bp.pk, actor=Actor.for_user(reviewer))

    assert "no key of its own" in refused.value.message
    assert not AutoApprovalRule.objects.exists()
    bp.refresh_from_db()
    assert bp.status == "waiting"  # nothing half-done: not approved either


def test_the_console_does_not_offer_always_approve_without_an_explicit_key(
    db, make_breakpoint, reviewer, client
):
    unnamed = make_breakpoint(payload={"question": "Rename the README?"})
    named = make_breakpoint(payload={"question": "Rename?", "breakpointId": "docs.rename"})
    client.force_login(reviewer)

    unnamed_page = client.get(f"/admin/breakpoints/breakpoint/{unnamed.pk}/change/")
    named_page = client.get(f"/admin/breakpoints/breakpoint/{named.pk}/change/")
    forced = client.post(
        f"/admin/breakpoints/breakpoint/{unnamed.pk}/always-approve/",
        {"comment": "", "confirm": "yes"},
    )

    assert unnamed_page.status_code == named_page.status_code == 200
    assert b"bpm-always-approve" in named_page.content
    assert b"bpm-always-approve" not in unnamed_page.content
    assert b"untitled" not in unnamed_page.content
    assert b"Rename the README?" in unnamed_page.content
    assert forced.status_code == 302
    assert not AutoApprovalRule.objects.exists()
    unnamed.refresh_from_db()
    assert unnamed.status == "waiting"


def test_mail_slack_and_jira_name_an_unnamed_breakpoint_by_its_question(db, make_breakpoint):
    bp = make_breakpoint(payload={"question": "Drop the\nproduction database?"})
    data = breakpoint_json(bp)

    header = slack_blocks._header(data)["text"]["text"]
    subject = email.announce_context(data, "breakpoint.created", {})["title"]

    for shown in (header, subject, _summary(data), bp.display_name, str(bp)):
        assert "untitled" not in shown
        assert "Drop the production database?" in shown
