"""The review screen's header and history: what was decided, by whom and when; webhook
attempts folded into one line per delivery."""

import re
from datetime import timedelta

from django.contrib.admin.utils import quote
from django.utils import timezone

from audit.models import EventType
from audit.services import event_record
from breakpoints.models import Breakpoint
from breakpoints.services import breakpoint_expire, feedback_add
from core.actors import Actor
from tests.support.console import XSS, XSS_SCRIPT, assert_inert, review_url
from tests.support.factories import BreakpointFactory


def _head(client, bp) -> str:
    html = client.get(review_url(bp.pk)).content.decode()
    return html[
        html.index('<section id="bpm-head"') : html.index("</section>", html.index('id="bpm-head"'))
    ]


def _history(client, bp) -> str:
    html = client.get(review_url(bp.pk)).content.decode()
    start = html.index('<section class="bpm-card" id="bpm-timeline"')
    return html[start : html.index("</section>", start)]


def test_a_rejection_says_rejected_and_who_decided_when(
    reviewer_browser, console_reviewer, make_breakpoint
):
    bp = make_breakpoint()
    feedback_add(
        breakpoint_id=bp.pk,
        actor=Actor.for_user(console_reviewer),
        comment="Not yet",
        release=True,
        approved=False,
    )
    Breakpoint.objects.filter(pk=bp.pk).update(
        created_at=timezone.now() - timedelta(hours=3),
        released_at=timezone.now() - timedelta(minutes=7),
    )
    head = _head(reviewer_browser, bp)
    assert 'data-bpm-decision="rejected"' in head
    assert (
        '<span class="bpm-badge bpm-badge--large bpm-badge--rejected" '
        'data-bpm-decision="rejected">Released · rejected</span>'
    ) in head
    assert re.search(r"decided <time [^>]*>7m ago</time> by <strong>rita</strong>", head), head
    assert "created" not in head  # the decision, not the creation, is what matters now


def test_an_approval_with_an_option_says_the_option(
    reviewer_browser, admin_browser, make_breakpoint
):
    bp = make_breakpoint(payload={"question": "When?", "options": ["Ship now", "Ship Monday"]})
    admin_browser.post(
        f"/admin/breakpoints/breakpoint/{quote(bp.pk)}/release/",
        {"option": "1", "decision": "approve", "comment": "", "confirm": "yes"},
    )
    head = _head(reviewer_browser, bp)
    assert "bpm-badge--approved" in head and "data-bpm-decision" in head
    assert "Released · chose" in head and "“Ship Monday”" in head
    assert "by <strong>adam</strong>" in head


def test_expired_and_voted_breakpoints_say_who_ended_them(
    reviewer_browser, console_admin, make_breakpoint
):
    expired = make_breakpoint()
    breakpoint_expire(breakpoint_id=expired.pk, actor=Actor.for_user(console_admin))
    head = _head(reviewer_browser, expired)
    assert '<span class="bpm-badge bpm-badge--large bpm-badge--expired">Expired</span>' in head
    assert re.search(r"expired <time [^>]*>\d+s ago</time> by <strong>adam</strong>", head)

    voted = BreakpointFactory(
        status="released",
        released_at=timezone.now(),
        result={"approved": True, "respondedBy": ["tina", "oscar"]},
    )
    assert "by <strong>tina, oscar</strong>" in _head(reviewer_browser, voted)


def test_a_waiting_breakpoint_still_says_how_long_it_waits(reviewer_browser, make_breakpoint):
    head = _head(reviewer_browser, make_breakpoint())
    assert "waiting for" in head and "decided" not in head
    assert '<span class="bpm-badge bpm-badge--large bpm-badge--waiting">Waiting</span>' in head


def _attempts(bp, delivery_id: str, outcomes: list[str], **extra) -> None:
    for attempt, outcome in enumerate(outcomes, start=1):
        event_record(
            breakpoint_id=bp.pk,
            type=EventType.NOTIFICATION,
            actor="system:webhooks",
            metadata={
                "deliveryId": delivery_id,
                "webhookId": 4,
                "eventType": "created",
                "attempt": attempt,
                "statusCode": 200 if outcome == "delivered" else 503,
                "error": "" if outcome == "delivered" else "HTTP 503",
                "outcome": outcome,
                **extra,
            },
        )


def test_webhook_attempts_fold_into_one_line_per_delivery(reviewer_browser, make_breakpoint):
    bp = make_breakpoint()
    _attempts(bp, "msg_a", ["retry", "retry", "failed"])
    _attempts(bp, "msg_b", ["delivered"])
    _attempts(bp, "msg_c", ["retry"])
    history = _history(reviewer_browser, bp)
    # The timeline keeps the breakpoint's own story...
    assert "bpm-ev--created" in history
    assert "bpm-ev--notification" not in history
    assert "Notification</span> by" not in history
    # ...and the attempts are behind one summary, closed until asked for.
    assert '<details class="bpm-notifications" id="bpm-notifications">' in history
    assert "<summary>Webhook notifications: 1 failed, 1 delivered, 1 retrying</summary>" in history
    assert history.count('<li class="bpm-delivery">') == 3
    assert "3 attempts &middot; HTTP 503" in history
    assert "1 attempt &middot; HTTP 200" in history
    assert "created &rarr; webhook 4" in history


def test_no_webhook_summary_without_attempts(reviewer_browser, make_breakpoint):
    assert "bpm-notifications" not in _history(reviewer_browser, make_breakpoint())


def test_hostile_option_and_webhook_error_render_inert(admin_browser, make_breakpoint):
    bp = make_breakpoint(payload={"question": "Pick", "options": [f"Ship {XSS_SCRIPT}"]})
    admin_browser.post(
        f"/admin/breakpoints/breakpoint/{quote(bp.pk)}/release/",
        {"option": "0", "decision": "approve", "comment": "", "confirm": "yes"},
    )
    _attempts(bp, "msg_x", ["failed"], error=f"refused: {XSS}", eventType=XSS_SCRIPT)
    review = admin_browser.get(review_url(bp.pk)).content.decode()
    assert_inert(review)
    assert "“Ship &lt;script&gt;alert(1)&lt;/script&gt;”" in review
    assert "refused: &lt;script&gt;alert(1)&lt;/script&gt;" in review
    queue = admin_browser.get("/admin/breakpoints/breakpoint/").content.decode()
    assert_inert(queue)
    assert "“Ship &lt;script&gt;alert(1)&lt;/script&gt;”" in queue
