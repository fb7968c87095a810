"""Reads: detail, status poll, events, the filtered/paginated list, agent scoping, query counts."""

from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
from django.db import connection
from django.utils import timezone

from breakpoints.models import Breakpoint, Feedback
from breakpoints.services import breakpoint_cancel, feedback_add
from core.actors import Actor
from tests.support.factories import BreakpointFactory

LIST = "/api/breakpoints"


def detail(bp_id: str, suffix: str = "") -> str:
    return f"/api/breakpoints/{bp_id}{suffix}"


def release(bp, reviewer, comment: str = "ok", **kw):
    return feedback_add(
        breakpoint_id=bp.pk, actor=Actor.for_user(reviewer), comment=comment, release=True, **kw
    )


def assert_not_found(response):
    assert response.status_code == 404, response.content
    assert response.json()["error"]["code"] == "not_found"


def ids(response) -> list[str]:
    assert response.status_code == 200, response.content
    return [row["breakpointId"] for row in response.json()["results"]]


def set_created(bp, when):
    Breakpoint.objects.filter(pk=bp.pk).update(created_at=when)


# --- detail ------------------------------------------------------------------------------


def test_agent_reads_its_own_breakpoint(agent_client, make_breakpoint):
    bp = make_breakpoint(tags=["design"])

    response = agent_client.get(detail(bp.pk))

    assert response.status_code == 200
    body = response.json()
    assert body["breakpointId"] == bp.pk
    assert body["status"] == "waiting"
    assert body["title"] == "Plan Review"
    assert body["key"] == "plan-review"
    assert body["question"] == "Approve the plan?"
    assert body["tags"] == ["design"]
    assert body["result"] is None


def test_detail_works_with_a_trailing_slash(agent_client, make_breakpoint):
    bp = make_breakpoint()

    assert agent_client.get(detail(bp.pk, "/")).json()["breakpointId"] == bp.pk


def test_reviewer_reads_any_agents_breakpoint_with_feedback(
    reviewer_client, reviewer, make_breakpoint
):
    bp = make_breakpoint(agent_id="agent-z")
    feedback_add(breakpoint_id=bp.pk, actor=Actor.for_user(reviewer), comment="First thought")

    body = reviewer_client.get(detail(bp.pk)).json()

    assert body["agentId"] == "agent-z"
    assert [(f["author"], f["comment"]) for f in body["feedback"]] == [("alice", "First thought")]
    assert body["feedback"][0]["id"]
    assert body["feedback"][0]["createdAt"]


def test_agent_b_cannot_read_agent_a_breakpoint(other_agent_client, make_breakpoint):
    bp = make_breakpoint(agent_id="agent-a")

    assert_not_found(other_agent_client.get(detail(bp.pk)))


def test_unknown_breakpoint_is_404(agent_client):
    assert_not_found(agent_client.get(detail("bp_does-not-exist")))


def test_user_without_role_cannot_read_a_breakpoint(nobody_client, make_breakpoint):
    bp = make_breakpoint()

    response = nobody_client.get(detail(bp.pk))

    assert response.status_code == 403
    assert response.json()["error"]["code"] == "permission_denied"


def test_released_detail_carries_the_full_result(agent_client, reviewer, make_breakpoint):
    bp = make_breakpoint(payload={"title": "Pick", "options": ["ship", "hold"]})
    release(bp, reviewer, comment="Ship it", option="ship")

    body = agent_client.get(detail(bp.pk)).json()

    assert body["status"] == "released"
    assert body["releasedAt"] is not None
    result = body["result"]
    assert result["approved"] is True
    assert result["response"] == "Ship it"
    assert result["feedback"] == "Ship it"
    assert result["option"] == "ship"
    assert result["respondedBy"] == "alice"
    assert len(result["allResponses"]) == 1
    vote = result["allResponses"][0]
    assert vote["respondedBy"] == "alice"
    assert vote["approved"] is True
    assert vote["option"] == "ship"
    assert vote["respondedAt"]


# --- status poll -------------------------------------------------------------------------


def test_status_poll_is_small_status_updated_at_result_a_poll_hint_and_an_expectation(
    agent_client, make_breakpoint
):
    """expectedDecision is null without 20 past decisions (tests/breakpoints/
    test_expected_decision.py)."""
    bp = make_breakpoint()

    response = agent_client.get(detail(bp.pk, "/status"))

    assert response.status_code == 200
    assert response.json() == {
        "status": "waiting",
        "updatedAt": response.json()["updatedAt"],
        "result": None,
        "pollAfterMs": 1000,
        "expectedDecision": None,
    }
    assert response.json()["updatedAt"]


def test_status_poll_with_trailing_slash(agent_client, make_breakpoint):
    bp = make_breakpoint()

    assert agent_client.get(detail(bp.pk, "/status/")).json()["status"] == "waiting"


def test_status_poll_shows_the_decision_once_cancelled(agent_client, make_breakpoint):
    bp = make_breakpoint()
    breakpoint_cancel(
        breakpoint_id=bp.pk, actor=Actor.for_agent("agent-a"), reason="No longer needed"
    )

    body = agent_client.get(detail(bp.pk, "/status")).json()

    assert body["status"] == "cancelled"
    assert body["result"]["approved"] is False
    assert body["result"]["feedback"] == "No longer needed"


def test_agent_b_cannot_poll_agent_a_breakpoint(other_agent_client, make_breakpoint):
    bp = make_breakpoint(agent_id="agent-a")

    assert_not_found(other_agent_client.get(detail(bp.pk, "/status")))


def test_polling_an_unknown_breakpoint_is_404(agent_client):
    assert_not_found(agent_client.get(detail("bp_nope", "/status")))


def test_reviewer_can_poll_any_breakpoint(reviewer_client, make_breakpoint):
    bp = make_breakpoint(agent_id="agent-q")

    assert reviewer_client.get(detail(bp.pk, "/status")).json()["status"] == "waiting"


# --- events ------------------------------------------------------------------------------


def test_events_list_every_transition_with_actor_in_order(agent_client, reviewer, make_breakpoint):
    bp = make_breakpoint()
    feedback_add(breakpoint_id=bp.pk, actor=Actor.for_user(reviewer), comment="Hmm")
    release(bp, reviewer, comment="Fine")

    response = agent_client.get(detail(bp.pk, "/events"))

    assert response.status_code == 200
    events = response.json()["results"]
    assert [(e["type"], e["actor"]) for e in events] == [
        ("created", "agent:agent-a"),
        ("feedback", "alice"),
        ("feedback", "alice"),
        ("released", "alice"),
    ]
    assert set(events[0]) == {"id", "type", "actor", "timestamp", "metadata"}
    assert events[-1]["metadata"]["statusFrom"] == "waiting"
    assert events[-1]["metadata"]["statusTo"] == "released"
    assert all(e["timestamp"] for e in events)


def test_agent_b_cannot_see_events_of_agent_a_breakpoint(other_agent_client, make_breakpoint):
    bp = make_breakpoint(agent_id="agent-a")

    assert_not_found(other_agent_client.get(detail(bp.pk, "/events")))


def test_events_of_an_unknown_breakpoint_is_404(reviewer_client):
    assert_not_found(reviewer_client.get(detail("bp_nope", "/events")))


def test_reviewer_sees_events_of_any_breakpoint(reviewer_client, make_breakpoint):
    bp = make_breakpoint(agent_id="agent-q")

    response = reviewer_client.get(detail(bp.pk, "/events/"))

    assert [e["type"] for e in response.json()["results"]] == ["created"]


# --- list: scoping -------------------------------------------------------------------------


def test_agent_lists_only_its_own_breakpoints(agent_client, make_breakpoint):
    mine = make_breakpoint(agent_id="agent-a")
    make_breakpoint(agent_id="agent-b")

    assert ids(agent_client.get(LIST)) == [mine.pk]


def test_agent_b_does_not_see_agent_a_breakpoints_even_when_filtering_for_them(
    other_agent_client, make_breakpoint
):
    make_breakpoint(agent_id="agent-a")

    assert ids(other_agent_client.get(LIST, {"agentId": "agent-a"})) == []


def test_reviewer_lists_every_agents_breakpoints(reviewer_client, make_breakpoint):
    a = make_breakpoint(agent_id="agent-a")
    b = make_breakpoint(agent_id="agent-b")

    assert set(ids(reviewer_client.get(LIST))) == {a.pk, b.pk}


def test_user_without_role_cannot_list(nobody_client, make_breakpoint):
    make_breakpoint()

    response = nobody_client.get(LIST)

    assert response.status_code == 403
    assert response.json()["error"]["code"] == "permission_denied"


def test_list_works_with_a_trailing_slash(reviewer_client, make_breakpoint):
    bp = make_breakpoint()

    assert ids(reviewer_client.get(LIST + "/")) == [bp.pk]


def test_list_page_shape_has_results_next_previous(reviewer_client, make_breakpoint):
    make_breakpoint()

    body = reviewer_client.get(LIST).json()

    assert set(body) >= {"results", "next", "previous"}
    assert body["next"] is None
    assert body["previous"] is None
    assert body["results"][0]["status"] == "waiting"


# --- list: filters ---------------------------------------------------------------------------


def test_list_filters_by_status(reviewer_client, reviewer, make_breakpoint):
    waiting = make_breakpoint()
    released = make_breakpoint()
    release(released, reviewer)

    assert ids(reviewer_client.get(LIST, {"status": "waiting"})) == [waiting.pk]
    assert ids(reviewer_client.get(LIST, {"status": "released"})) == [released.pk]
    assert ids(reviewer_client.get(LIST, {"status": "expired"})) == []


def test_list_with_an_unknown_status_is_400(reviewer_client):
    response = reviewer_client.get(LIST, {"status": "pending"})

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "validation_error"
    assert "status" in response.json()["error"]["details"]


def test_list_tag_filter_is_repeatable_and_all_must_match(reviewer_client, make_breakpoint):
    both = make_breakpoint(tags=["design", "urgent"])
    design_only = make_breakpoint(tags=["design"])
    make_breakpoint(tags=["urgent"])
    make_breakpoint(tags=[])

    assert set(ids(reviewer_client.get(LIST, {"tag": "design"}))) == {both.pk, design_only.pk}
    assert ids(reviewer_client.get(f"{LIST}?tag=design&tag=urgent")) == [both.pk]
    assert ids(reviewer_client.get(LIST, {"tag": "nope"})) == []


def test_list_tag_filter_matches_whole_tags_only(reviewer_client, make_breakpoint):
    make_breakpoint(tags=["design-review"])

    assert ids(reviewer_client.get(LIST, {"tag": "design"})) == []


def test_list_filters_by_agent_id(reviewer_client, make_breakpoint):
    make_breakpoint(agent_id="agent-a")
    b = make_breakpoint(agent_id="agent-b")

    assert ids(reviewer_client.get(LIST, {"agentId": "agent-b"})) == [b.pk]


def test_list_filters_by_run_id(reviewer_client, make_breakpoint):
    r1 = make_breakpoint(run_id="run-1")
    make_breakpoint(run_id="run-2")

    assert ids(reviewer_client.get(LIST, {"runId": "run-1"})) == [r1.pk]


def test_list_filters_by_created_after_and_before(reviewer_client, make_breakpoint):
    base = timezone.now() - timedelta(days=10)
    old, middle, new = make_breakpoint(), make_breakpoint(), make_breakpoint()
    set_created(old, base)
    set_created(middle, base + timedelta(days=2))
    set_created(new, base + timedelta(days=4))
    cut1 = (base + timedelta(days=1)).isoformat()
    cut2 = (base + timedelta(days=3)).isoformat()

    assert set(ids(reviewer_client.get(LIST, {"createdAfter": cut1}))) == {middle.pk, new.pk}
    assert ids(reviewer_client.get(LIST, {"createdBefore": cut1})) == [old.pk]
    assert ids(reviewer_client.get(LIST, {"createdAfter": cut1, "createdBefore": cut2})) == [
        middle.pk
    ]


def test_list_created_after_accepts_z_suffix(reviewer_client, make_breakpoint):
    bp = make_breakpoint()
    set_created(bp, timezone.now() - timedelta(hours=1))
    after = (timezone.now() - timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%SZ")

    assert ids(reviewer_client.get(LIST, {"createdAfter": after})) == [bp.pk]


def test_list_with_a_bad_date_is_400(reviewer_client):
    response = reviewer_client.get(LIST, {"createdAfter": "yesterday"})

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "validation_error"


def test_list_search_matches_title_or_question_case_insensitively(reviewer_client, make_breakpoint):
    by_title = make_breakpoint(payload={"title": "Database Migration"})
    by_question = make_breakpoint(
        payload={"title": "Other", "question": "Drop the MIGRATION table?"}
    )
    make_breakpoint(payload={"title": "Unrelated", "question": "Deploy?"})

    found = set(ids(reviewer_client.get(LIST, {"search": "migration"})))

    assert found == {by_title.pk, by_question.pk}


def test_list_search_takes_wildcards_literally(reviewer_client, make_breakpoint):
    percent = make_breakpoint(payload={"title": "Rollout at 100% of hosts"})
    make_breakpoint(payload={"title": "Rollout at 1000 hosts"})
    underscore = make_breakpoint(payload={"title": "Rename db_main"})
    make_breakpoint(payload={"title": "Rename dbxmain"})

    assert ids(reviewer_client.get(LIST, {"search": "100%"})) == [percent.pk]
    assert ids(reviewer_client.get(LIST, {"search": "db_main"})) == [underscore.pk]


def test_list_search_finds_a_title_alone_or_a_question_alone(reviewer_client, make_breakpoint):
    titled = make_breakpoint(payload={"title": "Rotate the signing keys"})
    asked = make_breakpoint(payload={"question": "Rotate the signing keys now?"})

    found = set(ids(reviewer_client.get(LIST, {"search": "ROTATE the"})))

    assert found == {titled.pk, asked.pk}


def test_list_search_does_not_match_across_title_and_question(reviewer_client, make_breakpoint):
    make_breakpoint(payload={"title": "Roll", "question": "back the release?"})
    both = make_breakpoint(payload={"title": "Rollback", "question": "Roll back the release?"})

    assert ids(reviewer_client.get(LIST, {"search": "rollback"})) == [both.pk]
    assert ids(reviewer_client.get(LIST, {"search": "roll back"})) == [both.pk]


def test_list_filters_combine(reviewer_client, make_breakpoint):
    match = make_breakpoint(agent_id="agent-a", tags=["design"], run_id="run-1")
    make_breakpoint(agent_id="agent-a", tags=["design"], run_id="run-2")
    make_breakpoint(agent_id="agent-b", tags=["design"], run_id="run-1")

    response = reviewer_client.get(
        LIST, {"agentId": "agent-a", "tag": "design", "runId": "run-1", "status": "waiting"}
    )

    assert ids(response) == [match.pk]


# --- list: ordering and pagination -------------------------------------------------------------


@pytest.fixture
def five_in_time_order(make_breakpoint):
    """Five breakpoints created a minute apart, oldest first."""
    base = timezone.now() - timedelta(hours=1)
    made = []
    for i in range(5):
        bp = make_breakpoint(payload={"title": f"Item {i}"})
        set_created(bp, base + timedelta(minutes=i))
        made.append(bp.pk)
    return made


def test_list_default_ordering_is_newest_first(reviewer_client, five_in_time_order):
    assert ids(reviewer_client.get(LIST)) == list(reversed(five_in_time_order))


def test_list_ordering_created_at_is_oldest_first(reviewer_client, five_in_time_order):
    assert ids(reviewer_client.get(LIST, {"ordering": "createdAt"})) == five_in_time_order


def test_list_ordering_minus_created_at_is_newest_first(reviewer_client, five_in_time_order):
    assert ids(reviewer_client.get(LIST, {"ordering": "-createdAt"})) == list(
        reversed(five_in_time_order)
    )


def test_list_with_an_unknown_ordering_is_400(reviewer_client):
    response = reviewer_client.get(LIST, {"ordering": "title"})

    assert response.status_code == 400
    assert "ordering" in response.json()["error"]["details"]


def test_list_paginates_with_next_and_previous_urls(reviewer_client, five_in_time_order):
    newest_first = list(reversed(five_in_time_order))

    page1 = reviewer_client.get(LIST, {"pageSize": 2}).json()
    assert [r["breakpointId"] for r in page1["results"]] == newest_first[:2]
    assert page1["previous"] is None
    assert page1["next"].startswith("http")

    page2 = reviewer_client.get(page1["next"]).json()
    assert [r["breakpointId"] for r in page2["results"]] == newest_first[2:4]
    assert page2["previous"] is not None

    page3 = reviewer_client.get(page2["next"]).json()
    assert [r["breakpointId"] for r in page3["results"]] == newest_first[4:]
    assert page3["next"] is None

    back = reviewer_client.get(page3["previous"]).json()
    assert [r["breakpointId"] for r in back["results"]] == newest_first[2:4]


def test_list_pagination_keeps_ordering_and_filters_in_next_url(
    reviewer_client, five_in_time_order
):
    page1 = reviewer_client.get(
        LIST, {"pageSize": 2, "ordering": "createdAt", "status": "waiting"}
    ).json()
    query = parse_qs(urlsplit(page1["next"]).query)

    assert query["ordering"] == ["createdAt"]
    assert query["status"] == ["waiting"]
    page2 = reviewer_client.get(page1["next"]).json()
    assert [r["breakpointId"] for r in page2["results"]] == five_in_time_order[2:4]


def test_a_search_pages_as_the_list_does_and_shows_the_same_rows(
    reviewer_client, five_in_time_order, make_breakpoint
):
    make_breakpoint(payload={"title": "Unrelated"})
    newest_first = list(reversed(five_in_time_order))
    listed = {row["breakpointId"]: row for row in reviewer_client.get(LIST).json()["results"]}

    page1 = reviewer_client.get(LIST, {"search": "item", "pageSize": 2}).json()
    page2 = reviewer_client.get(page1["next"]).json()
    page3 = reviewer_client.get(page2["next"]).json()
    back = reviewer_client.get(page3["previous"]).json()
    oldest = reviewer_client.get(LIST, {"search": "ITEM", "ordering": "createdAt"}).json()

    pages = [page1, page2, page3]
    assert [[r["breakpointId"] for r in p["results"]] for p in pages] == [
        newest_first[:2],
        newest_first[2:4],
        newest_first[4:],
    ]
    assert page3["next"] is None
    assert [r["breakpointId"] for r in back["results"]] == newest_first[2:4]
    assert [r["breakpointId"] for r in oldest["results"]] == five_in_time_order
    assert all(row == listed[row["breakpointId"]] for p in pages for row in p["results"])


def test_an_agent_searches_only_its_own(agent_client, make_breakpoint):
    mine = make_breakpoint(agent_id="agent-a", payload={"title": "Deploy web"})
    make_breakpoint(agent_id="agent-b", payload={"title": "Deploy web"})

    assert ids(agent_client.get(LIST, {"search": "deploy"})) == [mine.pk]


def test_list_agent_pages_only_through_its_own(agent_client, make_breakpoint):
    mine = [make_breakpoint(agent_id="agent-a").pk for _ in range(3)]
    for _ in range(3):
        make_breakpoint(agent_id="agent-b")

    page1 = agent_client.get(LIST, {"pageSize": 2}).json()
    page2 = agent_client.get(page1["next"]).json()

    seen = [r["breakpointId"] for r in page1["results"] + page2["results"]]
    assert sorted(seen) == sorted(mine)
    assert page2["next"] is None


def test_list_with_a_garbage_cursor_is_400(reviewer_client):
    response = reviewer_client.get(LIST, {"cursor": "not-a-cursor"})

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "validation_error"


def test_list_page_size_is_capped(reviewer_client):
    BreakpointFactory.create_batch(205)

    body = reviewer_client.get(LIST, {"pageSize": 1000}).json()

    assert len(body["results"]) == 200
    assert body["next"] is not None


# --- query counts ---------------------------------------------------------------------------


def _with_feedback(count: int, author) -> None:
    for bp in BreakpointFactory.create_batch(count):
        Feedback.objects.create(breakpoint=bp, author="alice", author_user=author, comment="c1")
        Feedback.objects.create(breakpoint=bp, author="alice", author_user=author, comment="c2")


def test_list_query_count_does_not_grow_with_rows(
    reviewer_client, reviewer, django_assert_max_num_queries
):
    reviewer_client.get(LIST)  # warm-up: the token's first use records last_used_at
    _with_feedback(5, reviewer)
    with django_assert_max_num_queries(6) as few:
        response = reviewer_client.get(LIST)
    assert len(response.json()["results"]) == 5
    assert all(len(row["feedback"]) == 2 for row in response.json()["results"])

    _with_feedback(25, reviewer)
    with django_assert_max_num_queries(6) as many:
        response = reviewer_client.get(LIST)
    assert len(response.json()["results"]) == 30
    assert all(len(row["feedback"]) == 2 for row in response.json()["results"])

    assert len(many.captured_queries) == len(few.captured_queries)


def test_agent_list_query_count_does_not_grow_with_rows(
    agent_client, reviewer, django_assert_max_num_queries
):
    agent_client.get(LIST)
    _with_feedback(5, reviewer)
    with django_assert_max_num_queries(5) as few:
        assert len(agent_client.get(LIST).json()["results"]) == 5
    _with_feedback(25, reviewer)
    with django_assert_max_num_queries(5) as many:
        assert len(agent_client.get(LIST).json()["results"]) == 30

    assert len(many.captured_queries) == len(few.captured_queries)


def test_status_poll_costs_auth_plus_one_select_regardless_of_rows(
    agent_client, reviewer, make_breakpoint, django_assert_max_num_queries
):
    bp = make_breakpoint()
    url = detail(bp.pk, "/status")
    agent_client.get(url)  # warm-up: the token's first use records last_used_at

    with django_assert_max_num_queries(2) as one_row:
        assert agent_client.get(url).json()["status"] == "waiting"

    _with_feedback(30, reviewer)
    for _ in range(3):
        feedback_add(breakpoint_id=bp.pk, actor=Actor.for_user(reviewer), comment="more")
    with django_assert_max_num_queries(2) as many_rows:
        assert agent_client.get(url).json()["status"] == "waiting"

    assert len(many_rows.captured_queries) == len(one_row.captured_queries)


def test_a_listed_page_reads_its_rows_and_their_feedback_in_one_query_on_postgresql(
    agent_client, reviewer, django_assert_num_queries
):
    """PostgreSQL reads each row's feedback in the rows' query (breakpoints.selectors
    ListedFeedback); SQLite reads the page's feedback in a second query: never one per row."""
    agent_client.get(LIST)  # warm-up: the token is verified, then trusted for a while
    _with_feedback(3, reviewer)

    with django_assert_num_queries(1 if connection.vendor == "postgresql" else 2):
        results = agent_client.get(LIST).json()["results"]

    assert [len(row["feedback"]) for row in results] == [2, 2, 2]


def test_a_listed_breakpoint_is_exactly_what_reading_it_answers(agent_client, reviewer):
    """The list reads feedback with the page (JSON from the database); the times and ids
    must come out as reading one breakpoint writes them, whole seconds included."""
    bp = BreakpointFactory(experts=["ghost"], strategy="quorum")
    for n, micro in enumerate([0, 120_000, 7]):
        row = Feedback.objects.create(
            breakpoint=bp, author="alice", author_user=reviewer, comment=f"c{n}"
        )
        created = timezone.now().replace(microsecond=micro) + timedelta(seconds=n)
        Feedback.objects.filter(pk=row.pk).update(created_at=created)
    BreakpointFactory()  # one without feedback on the same page

    listed = {row["breakpointId"]: row for row in agent_client.get(LIST).json()["results"]}

    assert len(listed) == 2
    for breakpoint_id, row in listed.items():
        assert row == agent_client.get(detail(breakpoint_id)).json()
    times = [item["createdAt"] for item in listed[bp.pk]["feedback"]]
    assert [item["comment"] for item in listed[bp.pk]["feedback"]] == ["c0", "c1", "c2"]
    assert times[0].endswith("Z") and "." not in times[0]
    assert times[1].endswith(".120000Z") and times[2].endswith(".000007Z")


AWKWARD_PAYLOAD = {
    "question": "Approve?",
    "text": 'quotes " and \\ backslash, tab\t, é ✓ 𝄞, separators \u2028 \u2029',
    "numbers": [0, -1, 1.5, 1e-7, 2**70],
    "nested": {"empty": {}, "list": [], "null": None, "bool": False},
}


def test_listed_json_columns_are_the_values_reading_one_answers(agent_client, reviewer):
    """The list passes its JSON columns through as the database wrote them: the values
    must be what reading the breakpoint answers (parsed), in compact and indented form."""
    bp = BreakpointFactory(
        payload=AWKWARD_PAYLOAD,
        tags=["a", "é"],
        result={"approved": True, "feedback": "ok \u2028", "respondedBy": "alice"},
        votes=[
            {
                "approved": True,
                "feedback": "é",
                "respondedAt": "2026-11-27T01:09:15.351729+00:00",
                "respondedBy": "alice",
            }
        ],
    )
    BreakpointFactory(result=None)  # SQL NULL beside JSON values

    response = agent_client.get(LIST)
    pretty = agent_client.get(LIST, headers={"accept": "application/json; indent=2"})

    assert "\u2028".encode() not in response.content
    assert b"\n" in pretty.content
    for answer in (response, pretty):
        listed = {row["breakpointId"]: row for row in answer.json()["results"]}
        assert len(listed) == 2
        for breakpoint_id, row in listed.items():
            assert row == agent_client.get(detail(breakpoint_id)).json()
        assert listed[bp.pk]["payload"] == AWKWARD_PAYLOAD
