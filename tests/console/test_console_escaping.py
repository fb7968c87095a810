"""Whatever an agent sends, no script of its own ever runs in the console."""

import pytest

from breakpoints.services import feedback_add
from core.actors import Actor
from tests.support.console import (
    QUEUE_URL,
    XSS,
    XSS_IMG,
    XSS_SCRIPT,
    action_url,
    assert_inert,
    review_url,
)


@pytest.fixture
def hostile_breakpoint(make_breakpoint):
    payload = {
        "question": f"Approve? {XSS}",
        "title": f"Title {XSS}",
        "tags": [XSS_SCRIPT, XSS_IMG],
        "previousFeedback": f"Earlier {XSS}",
        "attempt": 3,
        "expert": [XSS_IMG],
        "options": [f"Ship {XSS_SCRIPT}", XSS_IMG],
        XSS_SCRIPT: {"nested": XSS},
        "context": {
            "runId": XSS_IMG,
            "files": [
                {
                    "path": "plan.md",
                    "format": "markdown",
                    "content": f"# Plan\n\n{XSS}\n\n[x](javascript:alert(1))",
                },
                {"path": "notes.txt", "format": "text", "content": XSS},
                {"path": "main.js", "format": "code", "language": "javascript", "content": XSS},
                {"path": "odd.code", "format": "code", "language": XSS_IMG, "content": XSS},
                {"path": "report.html", "format": "html", "content": f"<h1>Report</h1>{XSS}"},
                {"path": f"{XSS_SCRIPT}.md", "format": "markdown"},
            ],
        },
    }
    return make_breakpoint(payload=payload, run_id=XSS_IMG[:100])


def test_review_page_renders_hostile_payload_inert(reviewer_browser, hostile_breakpoint):
    response = reviewer_browser.get(review_url(hostile_breakpoint.pk))
    assert response.status_code == 200
    html = response.content.decode()
    assert_inert(html)
    # The text is still there for the reviewer to read, escaped.
    assert "Approve? &lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html


def test_html_file_only_inside_a_sandboxed_srcdoc_iframe(reviewer_browser, hostile_breakpoint):
    html = reviewer_browser.get(review_url(hostile_breakpoint.pk)).content.decode()
    page = assert_inert(html)
    assert len(page.iframes) == 1
    srcdoc = page.iframes[0]["srcdoc"]
    assert "<h1>Report</h1>" in srcdoc and XSS in srcdoc  # the agent's HTML, unmodified...
    assert "Content-Security-Policy" in srcdoc  # ...behind a no-network CSP
    assert "<h1>Report</h1>" not in html  # never inlined in the page itself


def test_markdown_is_sanitized_not_escaped(reviewer_browser, hostile_breakpoint):
    html = reviewer_browser.get(review_url(hostile_breakpoint.pk)).content.decode()
    assert "<h1>Plan</h1>" in html
    assert 'href="javascript:' not in html


def test_queue_renders_hostile_fields_inert(reviewer_browser, hostile_breakpoint):
    response = reviewer_browser.get(QUEUE_URL)
    html = response.content.decode()
    assert_inert(html)
    assert "Title &lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_confirmation_page_renders_hostile_option_and_comment_inert(
    admin_browser, hostile_breakpoint
):
    # An admin: the payload routes it to an expert seat that resolves to nobody.
    response = admin_browser.post(
        action_url("release", hostile_breakpoint.pk),
        {"option": "0", "decision": "approve", "comment": f"reviewer wrote {XSS}"},
    )
    assert response.status_code == 200
    assert_inert(response.content.decode())


def test_feedback_and_events_render_inert(console_admin, hostile_breakpoint, admin_browser):
    feedback_add(
        breakpoint_id=hostile_breakpoint.pk,
        actor=Actor.for_user(console_admin),
        comment=XSS,
        release=True,
        approved=False,
    )
    for url in (
        review_url(hostile_breakpoint.pk),
        QUEUE_URL + "?status__exact=released",
        "/admin/breakpoints/feedback/",
        "/admin/audit/event/",
    ):
        response = admin_browser.get(url)
        assert response.status_code == 200, url
        assert_inert(response.content.decode())


def test_expert_names_and_votes_render_inert(admin_browser, console_admin, make_breakpoint):
    """Expert names come from the agent: on the seats panel, the queue badge and its title."""
    bp = make_breakpoint(
        payload={
            "question": "Routed to a hostile name?",
            "expert": [XSS_SCRIPT, XSS_IMG],
            "strategy": "quorum",
        }
    )
    # An admin answers for a seat that resolves to nobody; the vote's text is shown too.
    feedback_add(
        breakpoint_id=bp.pk,
        actor=Actor.for_user(console_admin),
        comment=f"vote {XSS}",
        release=True,
        approved=False,
    )
    review = admin_browser.get(review_url(bp.pk)).content.decode()
    assert_inert(review)
    assert '<strong class="bpm-seat__name">&lt;script&gt;alert(1)&lt;/script&gt;</strong>' in review
    assert "resolves to nobody" in review
    queue = admin_browser.get(QUEUE_URL).content.decode()
    assert_inert(queue)
    assert "unresolved expert" in queue
    assert "&lt;script&gt;alert(1)&lt;/script&gt;, &lt;img src=x onerror=alert(1)&gt;" in queue


def test_rule_notes_tags_and_evaluated_keys_render_inert(admin_browser, console_admin):
    from policies import autoapproval

    actor = Actor.for_user(console_admin)
    rule = autoapproval.rule_create(actor=actor, pattern="confirm.*", note=f"note {XSS}")
    autoapproval.always_break_on_add(actor=actor, tag=XSS_IMG, note=f"why {XSS}")
    for url in (
        "/admin/policies/autoapprovalrule/",
        f"/admin/policies/autoapprovalrule/{rule.pk}/change/",
        "/admin/policies/alwaysbreakontag/",
        "/admin/policies/autoapprovalrule/evaluate/?key=confirm.x&tags=" + XSS_SCRIPT,
    ):
        response = admin_browser.get(url)
        assert response.status_code == 200, url
        assert_inert(response.content.decode())
    response = admin_browser.post(
        "/admin/policies/autoapprovalrule/add/", {"pattern": XSS, "action": "auto-approve"}
    )
    assert response.status_code == 200
    assert_inert(response.content.decode())
