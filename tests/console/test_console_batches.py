"""The queue's batches ("Approve selected", "Reject selected") and its groups."""

from datetime import timedelta
from html import unescape

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from audit.models import Event
from breakpoints.models import Breakpoint, Feedback
from breakpoints.services import breakpoint_cancel, feedback_add
from core.actors import Actor
from core.limits import MAX_BATCH_DECISIONS
from tests.support.console import QUEUE_URL, XSS, messages, session_client
from tests.support.factories import BreakpointFactory, ReviewerFactory, UserFactory
from tests.support.records import refusals

GROUPS_URL = QUEUE_URL + "groups/"
FOUR_EYES = {"question": "Deploy?", "title": "Deploy", "preventSelfReview": True}
SELF_REVIEW = "You requested this breakpoint (rita)"


def select(browser, action: str, bps, **data):
    """Step one: the queue's action on these rows (the confirmation page)."""
    ids = [bp.pk for bp in bps]
    return browser.post(QUEUE_URL, {"action": action, "_selected_action": ids, **data})


def confirm(browser, action: str, bps, comment: str = "", follow: bool = True):
    """Step two, as the confirmation page posts it."""
    data = {"action": action, "post": "yes", "comment": comment}
    data["_selected_action"] = [bp.pk for bp in bps]
    return browser.post(QUEUE_URL, data, follow=follow)


def status(bp) -> str:
    return Breakpoint.objects.get(pk=bp.pk).status


def test_confirmation_lists_what_is_decided_and_what_is_refused_and_why(
    reviewer_browser, make_breakpoint
):
    """rita requested one (four eyes), another was cancelled: both are listed as refused,
    with the service's reason; nothing is decided or recorded yet."""
    plain = make_breakpoint(payload={"question": "Ship?", "title": "Ship the fix"})
    own = make_breakpoint(requested_by="rita", payload=FOUR_EYES)
    gone = make_breakpoint(payload={"question": "Gone?", "title": "Gone"})
    breakpoint_cancel(breakpoint_id=gone.pk, actor=Actor.for_agent("agent-a"))

    page = select(reviewer_browser, "approve_selected", [plain, own, gone])

    assert page.status_code == 200
    html = unescape(page.content.decode())
    deciding, refused = html.split('id="bpm-batch-deciding"')[1].split('id="bpm-batch-refused"')
    assert "Will be approved (1)" in deciding and "Ship the fix" in deciding
    assert "Will be refused (2)" in refused
    assert SELF_REVIEW in refused
    assert "Breakpoint is cancelled; it no longer takes feedback." in refused
    assert 'name="_selected_action" value="' + plain.pk in html
    assert 'value="' + own.pk not in html.split('id="bpm-batch-form"')[1]
    assert "Approve 1" in html
    assert [status(bp) for bp in (plain, own)] == ["waiting", "waiting"]
    assert not Event.objects.filter(type__in=["refused", "feedback"]).exists()


def test_confirmed_approval_decides_each_through_the_service(reviewer_browser, make_breakpoint):
    first, second = make_breakpoint(), make_breakpoint()

    response = confirm(reviewer_browser, "approve_selected", [first, second], "Looks right")

    assert response.status_code == 200
    assert "Approved 2 breakpoints." in messages(response)[0]
    for bp in (first, second):
        stored = Breakpoint.objects.get(pk=bp.pk)
        assert (stored.status, stored.result["approved"]) == ("released", True)
        assert stored.result["feedback"] == "Looks right"
        assert stored.result["respondedBy"] == "rita"
        assert Feedback.objects.get(breakpoint_id=bp.pk).via == "console"


def test_confirmed_rejection_rejects_each_with_the_comment(reviewer_browser, make_breakpoint):
    bp = make_breakpoint()

    response = confirm(reviewer_browser, "reject_selected", [bp], "Not on a Friday")

    assert "Rejected 1 breakpoint." in messages(response)[0]
    stored = Breakpoint.objects.get(pk=bp.pk)
    assert (stored.result["approved"], stored.result["feedback"]) == (False, "Not on a Friday")


def test_one_decided_meanwhile_is_reported_and_recorded_once(reviewer_browser, make_breakpoint):
    """Between the confirmation page and the confirm, another reviewer decided one: it is
    refused (on the record once, via console), the other is decided."""
    taken, free = make_breakpoint(), make_breakpoint()
    other = Actor.for_user(ReviewerFactory(username="tina"))
    feedback_add(breakpoint_id=taken.pk, actor=other, comment="", release=True)

    response = confirm(reviewer_browser, "approve_selected", [taken, free])

    said = messages(response)
    assert "Approved 1 breakpoint." in said[0]
    assert any("was not decided: Breakpoint is released" in m for m in said[1:]), said
    assert status(free) == "released"
    (refused,) = refusals(taken)
    assert refused.metadata["via"] == "console"


def test_more_than_the_limit_is_refused_before_any_page(reviewer_browser):
    rows = BreakpointFactory.create_batch(MAX_BATCH_DECISIONS + 1)

    response = reviewer_browser.post(
        QUEUE_URL + "?status__exact=waiting",
        {"action": "approve_selected", "_selected_action": [rows[0].pk], "select_across": "1"},
        follow=True,
    )

    assert any(f"Select at most {MAX_BATCH_DECISIONS}" in m for m in messages(response))
    assert Breakpoint.objects.filter(status="waiting").count() == MAX_BATCH_DECISIONS + 1


def test_agent_text_is_escaped_on_the_confirmation(reviewer_browser, make_breakpoint):
    bp = make_breakpoint(payload={"question": XSS, "title": XSS, "breakpointId": "a.b"})

    page = select(reviewer_browser, "approve_selected", [bp]).content.decode()

    assert XSS not in page
    assert "&lt;script&gt;" in page


def test_the_confirmation_costs_no_query_per_row(reviewer_browser):
    """Rows under four eyes (someone else requested them) included: the reviewer's accounts
    are read once for all of them."""

    def rows(count: int):
        return BreakpointFactory.create_batch(
            count, requested_by="tina", prevent_self_review=True
        ) + BreakpointFactory.create_batch(count)

    few = rows(1)
    with CaptureQueriesContext(connection) as two:
        assert select(reviewer_browser, "approve_selected", few).status_code == 200
    many = [*few, *rows(15)]
    with CaptureQueriesContext(connection) as thirty:
        page = select(reviewer_browser, "approve_selected", many)
    assert "Will be approved (32)" in page.content.decode()

    assert len(thirty.captured_queries) == len(two.captured_queries)


def test_reviewers_get_the_decisions_admins_also_expire(reviewer_browser, admin_browser, db):
    BreakpointFactory()

    reviewer_page = reviewer_browser.get(QUEUE_URL).content.decode()
    admin_page = admin_browser.get(QUEUE_URL).content.decode()

    for page in (reviewer_page, admin_page):
        assert 'value="approve_selected"' in page and 'value="reject_selected"' in page
    assert 'value="expire_selected"' not in reviewer_page
    assert 'value="expire_selected"' in admin_page


def test_someone_without_a_role_cannot_decide_in_batches(make_breakpoint):
    bp = make_breakpoint()
    nobody = session_client(UserFactory(username="nobody", is_staff=True))

    response = confirm(nobody, "approve_selected", [bp], follow=False)

    assert response.status_code in (302, 403)
    assert status(bp) == "waiting"


# --- the grouped queue -------------------------------------------------------------------


def _waiting(key: str, run_id: str | None, count: int, minutes_ago: int = 0):
    rows = BreakpointFactory.create_batch(count, key=key, run_id=run_id)
    created = timezone.now() - timedelta(minutes=minutes_ago)
    Breakpoint.objects.filter(pk__in=[bp.pk for bp in rows]).update(created_at=created)
    return rows


def test_groups_count_by_key_and_run_and_open_the_filtered_queue(reviewer_browser):
    write = _waiting("mcp.filesystem.write-file", "r-42", 3, minutes_ago=5)
    _waiting("mcp.filesystem.write-file", "r-43", 1)
    loose = _waiting("mcp.filesystem.read-file", None, 2)
    BreakpointFactory(key="mcp.filesystem.write-file", run_id="r-42", status="released")

    page = reviewer_browser.get(GROUPS_URL)

    assert page.status_code == 200
    html = unescape(page.content.decode())
    rows = html.split('class="bpm-group"')[1:]
    assert len(rows) == 3
    assert "3 ×</strong> <code>mcp.filesystem.write-file</code> in run <code>r-42</code>" in rows[0]
    assert "2 ×</strong> <code>mcp.filesystem.read-file</code>" in rows[1]
    assert "without a run" in rows[1]

    link = rows[0].split('href="')[1].split('"')[0]
    queue = unescape(reviewer_browser.get(link).content.decode())
    assert sorted(bp.pk for bp in write) == sorted(
        pk for pk in (row.pk for row in Breakpoint.objects.all()) if f'value="{pk}"' in queue
    )

    link = rows[1].split('href="')[1].split('"')[0]
    queue = unescape(reviewer_browser.get(link).content.decode())
    shown = [row.pk for row in Breakpoint.objects.all() if f'value="{row.pk}"' in queue]
    assert sorted(shown) == sorted(bp.pk for bp in loose)


def test_groups_escape_agent_text(reviewer_browser):
    _waiting("k", XSS, 1)

    page = reviewer_browser.get(GROUPS_URL).content.decode()

    assert XSS not in page
    assert "&lt;script&gt;" in page


def test_groups_page_costs_the_same_however_many_groups(reviewer_browser):
    _waiting("k-0", "r-0", 2)
    with CaptureQueriesContext(connection) as one:
        reviewer_browser.get(GROUPS_URL)
    for n in range(1, 40):
        _waiting(f"k-{n}", f"r-{n}", 1)
    with CaptureQueriesContext(connection) as forty:
        page = reviewer_browser.get(GROUPS_URL)
    assert page.content.decode().count('class="bpm-group"') == 40

    assert len(forty.captured_queries) == len(one.captured_queries)


def test_the_queue_links_to_its_groups(reviewer_browser, db):
    assert b'href="' + GROUPS_URL.encode() + b'"' in reviewer_browser.get(QUEUE_URL).content


def test_groups_need_a_reviewer(db):
    nobody = session_client(UserFactory(username="nobody", is_staff=True))

    assert nobody.get(GROUPS_URL).status_code in (302, 403)


def test_a_routed_breakpoint_without_your_seat_is_listed_as_refused(
    reviewer_browser, make_breakpoint, expert_member
):
    expert_member("tina", "tech-lead")
    routed = make_breakpoint(
        payload={"question": "Merge?", "title": "Merge", "expert": "tech-lead"}
    )

    page = select(reviewer_browser, "approve_selected", [routed])

    refused = unescape(page.content.decode()).split('id="bpm-batch-refused"')[1]
    assert "Merge" in refused and "tech-lead" in refused
    assert "Will be approved (0)" in page.content.decode()
    assert 'id="bpm-batch-confirm"' not in page.content.decode()


def test_the_confirm_needs_the_csrf_token(console_reviewer, make_breakpoint):
    bp = make_breakpoint()
    browser = session_client(console_reviewer)
    browser.handler.enforce_csrf_checks = True

    response = confirm(browser, "approve_selected", [bp], follow=False)

    assert response.status_code == 403
    assert status(bp) == "waiting"
