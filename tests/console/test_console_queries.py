"""The console stays fast: a fixed number of queries whatever the size of the queue."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from audit.models import EventType
from audit.services import event_record
from breakpoints.services import feedback_add
from core.actors import Actor
from tests.support.console import QUEUE_URL, SECTIONS_URL, review_url
from tests.support.factories import BreakpointFactory

# session, user, the user's groups (roles, cached per request), the page COUNT, the page
# of rows, the waiting badge COUNT. Not the user's and groups' permissions: the app list
# (each_context's, for the nav sidebar, which is off) is built only when read.
QUEUE_QUERIES = 6
# Plus resolving every expert name on the page at once: their groups and users, one query.
ROUTED_QUEUE_QUERIES = QUEUE_QUERIES + 1
# session, user, groups, the breakpoint, its feedback, events (exists + list), the waiting
# badge COUNT (no permission queries: the app list is built only when read).
REVIEW_QUERIES = 8


def _queue_queries(client, url: str) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200
    return [query["sql"] for query in captured.captured_queries]


@pytest.mark.parametrize(
    "url",
    [
        QUEUE_URL,
        QUEUE_URL + "?status__exact=waiting",
        QUEUE_URL + "?tag=billing&agent=agent-a&q=plan",
        QUEUE_URL + "?created_at__gte=2000-01-01T00:00:00Z",
        QUEUE_URL + "?assigned=me",
    ],
)
def test_queue_query_count_does_not_grow_with_the_queue(reviewer_browser, url):
    BreakpointFactory.create_batch(5, tags=["billing", "db"])
    few = _queue_queries(reviewer_browser, url)
    BreakpointFactory.create_batch(45, tags=["billing"])
    many = _queue_queries(reviewer_browser, url)
    assert len(few) == len(many) == QUEUE_QUERIES, many


def test_admin_queue_with_actions_has_the_same_query_count(admin_browser):
    BreakpointFactory.create_batch(50)
    assert len(_queue_queries(admin_browser, QUEUE_URL)) == QUEUE_QUERIES


def test_waiting_badge_counts_once_per_page(reviewer_browser):
    BreakpointFactory.create_batch(3)
    queries = _queue_queries(reviewer_browser, QUEUE_URL)
    waiting_counts = [q for q in queries if "COUNT(" in q.upper() and "waiting" in q]
    assert len(waiting_counts) == 1


def test_queue_rows_do_not_load_payloads(reviewer_browser):
    """Payloads can be megabytes: the queue selects only what it shows (of the result,
    only the decision's two keys, for the status badge)."""
    BreakpointFactory.create_batch(3)
    BreakpointFactory(status="released", result={"approved": False, "feedback": "x" * 5000})
    queries = _queue_queries(reviewer_browser, QUEUE_URL)
    row_query = next(
        q for q in queries if "ORDER BY" in q.upper() and "breakpoints_breakpoint" in q
    )
    assert '"payload"' not in row_query
    rows = reviewer_browser.get(QUEUE_URL).context["cl"].result_list
    assert len(rows) == 4
    assert all({"payload", "result"} <= bp.get_deferred_fields() for bp in rows)


def test_review_page_query_count_is_fixed(
    reviewer_browser, console_reviewer, make_breakpoint, rich_payload
):
    bp = make_breakpoint(payload=rich_payload)
    with CaptureQueriesContext(connection) as once:
        assert reviewer_browser.get(review_url(bp.pk)).status_code == 200
    for n in range(10):
        feedback_add(
            breakpoint_id=bp.pk, actor=Actor.for_user(console_reviewer), comment=f"note {n}"
        )
    with CaptureQueriesContext(connection) as later:
        assert reviewer_browser.get(review_url(bp.pk)).status_code == 200
    assert len(once) == len(later) == REVIEW_QUERIES, [q["sql"] for q in later.captured_queries]


def test_waiting_badge_is_on_every_console_page(reviewer_browser, make_breakpoint):
    bp = make_breakpoint()
    make_breakpoint()
    for url in (
        SECTIONS_URL,
        QUEUE_URL,
        review_url(bp.pk),
        "/admin/audit/event/",
        "/admin/breakpoints/feedback/",
    ):
        response = reviewer_browser.get(url)
        assert response.status_code == 200, url
        assert b'<span class="bpm-waiting__count">2</span>' in response.content, url


def test_waiting_badge_stops_counting_at_its_cap(reviewer_browser, make_breakpoint, monkeypatch):
    from console import context_processors

    monkeypatch.setattr(context_processors, "WAITING_BADGE_CAP", 2)
    for _ in range(3):
        make_breakpoint()

    response = reviewer_browser.get(QUEUE_URL)

    assert b'<span class="bpm-waiting__count">2+</span>' in response.content


def test_routed_queue_resolves_experts_once_per_page(reviewer_browser, expert_member):
    """The unresolved-expert badge costs one query per page, not per row."""
    expert_member("tina", "tech-lead")

    def routed(n: int) -> None:
        for i in range(n):
            experts = ["tech-lead", f"ghost-{i}"] if i % 2 else ["tech-lead"]
            BreakpointFactory(experts=experts, strategy="quorum")

    routed(5)
    few = _queue_queries(reviewer_browser, QUEUE_URL)
    routed(45)
    many = _queue_queries(reviewer_browser, QUEUE_URL)
    assert len(few) == len(many) == ROUTED_QUEUE_QUERIES, many
    assert b"unresolved expert" in reviewer_browser.get(QUEUE_URL).content


def test_routed_review_page_query_count_does_not_grow_with_votes(
    reviewer_browser, make_breakpoint, three_experts
):
    payload = {
        "question": "Deploy?",
        "expert": ["tech-lead", "ops-lead", "security-lead", "ghost"],
        "strategy": "collect-all",
    }
    bp = make_breakpoint(payload=payload)

    def vote(seat: str) -> None:
        feedback_add(
            breakpoint_id=bp.pk,
            actor=Actor.for_user(three_experts[seat]),
            comment="fine",
            release=True,
        )

    # Once someone voted, "may this person vote?" reads who voted (one person, one seat):
    # a fixed cost of the first vote, the same for every vote after it.
    vote("tech-lead")
    with CaptureQueriesContext(connection) as before:
        assert reviewer_browser.get(review_url(bp.pk)).status_code == 200
    vote("ops-lead")
    vote("security-lead")
    bp.refresh_from_db()
    assert (len(bp.votes), bp.status) == (3, "waiting")  # the ghost seat is still open
    with CaptureQueriesContext(connection) as after:
        assert reviewer_browser.get(review_url(bp.pk)).status_code == 200
    assert len(before) == len(after), [q["sql"] for q in after.captured_queries]


def test_decision_badges_are_read_with_the_rows(reviewer_browser):
    """Released rows show approved / rejected from the row query: no query per row."""

    def released(n: int) -> None:
        for i in range(n):
            BreakpointFactory(
                status="released", result={"approved": bool(i % 2), "option": f"option {i}"}
            )

    released(5)
    few = _queue_queries(reviewer_browser, QUEUE_URL)
    released(45)
    many = _queue_queries(reviewer_browser, QUEUE_URL)
    assert len(few) == len(many) == QUEUE_QUERIES, many
    assert b"Released \xc2\xb7 rejected" in reviewer_browser.get(QUEUE_URL).content


def test_review_page_query_count_does_not_grow_with_webhook_attempts(
    reviewer_browser, make_breakpoint
):
    bp = make_breakpoint()
    with CaptureQueriesContext(connection) as before:
        assert reviewer_browser.get(review_url(bp.pk)).status_code == 200
    for attempt in range(1, 31):
        event_record(
            breakpoint_id=bp.pk,
            type=EventType.NOTIFICATION,
            actor="system:webhooks",
            metadata={"deliveryId": f"msg_{attempt % 3}", "attempt": attempt, "outcome": "retry"},
        )
    with CaptureQueriesContext(connection) as after:
        assert reviewer_browser.get(review_url(bp.pk)).status_code == 200
    assert len(before) == len(after) == REVIEW_QUERIES, [q["sql"] for q in after.captured_queries]
