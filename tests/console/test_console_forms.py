"""The console answers a breakpoint's form (issue 36): the review page renders it prefilled
with the proposal, the confirm step shows what changed, the service's errors land on the
fields, and the agent gets the edited values. Agent-sent schema text is escaped."""

import html
import re

from breakpoints.models import Breakpoint
from breakpoints.services import feedback_add
from core.actors import Actor
from core.choices import Via
from tests.support.console import XSS, action_url, review_url

FORM = {
    "type": "object",
    "properties": {
        "environment": {
            "type": "string",
            "title": "Environment",
            "enum": ["staging", "prod"],
            "description": "Where it runs",
        },
        "replicas": {"type": "integer", "minimum": 1, "maximum": 10},
        "notify": {"type": "boolean", "title": "Notify the team"},
        "hosts": {"type": "array", "items": {"type": "string"}},
        "limits": {"type": "object"},
    },
    "required": ["environment", "replicas"],
}
PROPOSAL = {"environment": "prod", "replicas": 3, "notify": True, "hosts": ["a", "b"]}


def with_form(make_breakpoint, **payload):
    payload = {"question": "Deploy?", "title": "Deploy", **payload}
    return make_breakpoint(payload=payload)


def answer(**changes) -> dict:
    """The posted answer as the review page's fields send it."""
    data = {
        "decision": "approve",
        "comment": "",
        "value__environment": "prod",
        "value__replicas": "3",
        "value__notify": "on",
        "value__hosts": "a\nb",
        "value__limits": "",
    }
    data.update(changes)
    return {key: value for key, value in data.items() if value is not None}


def test_the_review_page_renders_the_form_prefilled_with_the_proposal(
    reviewer_browser, make_breakpoint
):
    bp = with_form(make_breakpoint, form=FORM, proposal=PROPOSAL)

    html = reviewer_browser.get(review_url(bp.pk)).content.decode()

    assert 'id="bpm-answer"' in html
    assert '<select name="value__environment"' in html
    assert '<option value="prod" selected>prod</option>' in html
    assert 'type="number" name="value__replicas" value="3"' in html
    assert 'min="1"' in html and 'max="10"' in html
    assert 'type="checkbox" name="value__notify"' in html and "checked" in html
    assert ">Environment:</label>" in html and "Where it runs" in html
    assert "a\nb</textarea>" in html


def test_an_edit_shows_on_the_confirm_step_and_the_agent_gets_the_edited_values(
    reviewer_browser, make_breakpoint
):
    bp = with_form(make_breakpoint, form=FORM, proposal=PROPOSAL)
    edited = answer(value__replicas="5", value__notify=None)

    confirm = reviewer_browser.post(action_url("release", bp.pk), edited).content.decode()

    assert 'id="bpm-answer-changes"' in confirm
    assert 'data-bpm-change="replicas"' in confirm
    assert 'data-bpm-change="Notify the team"' in confirm
    assert 'data-bpm-change="Environment"' not in confirm
    assert 'type="hidden" name="value__replicas" value="5"' in confirm
    # The preview of what the agent receives says the answer was edited, as the result will.
    preview = confirm.split("The agent will receive this result", 1)[1]
    shown = html.unescape(re.sub(r"<[^>]+>", "", preview))
    assert '"edited": true' in shown, shown[:2000]
    reviewer_browser.post(action_url("release", bp.pk), {**edited, "confirm": "yes"})
    result = Breakpoint.objects.get(pk=bp.pk).result
    expected = {"environment": "prod", "replicas": 5, "notify": False, "hosts": ["a", "b"]}
    assert (result["values"], result["edited"]) == (expected, True)


def test_the_services_problems_are_shown_on_the_fields(reviewer_browser, make_breakpoint):
    bp = with_form(make_breakpoint, form=FORM, proposal=PROPOSAL)

    html = reviewer_browser.post(
        action_url("release", bp.pk), answer(value__limits="[1, 2]")
    ).content.decode()

    assert 'name="confirm" value="yes"' not in html
    field = html.split('data-bpm-field="value__limits"')[1].split("</div>")[0]
    assert "is not of type" in field
    assert Breakpoint.objects.get(pk=bp.pk).status == "waiting"


def test_a_field_out_of_bounds_is_refused_on_the_page(reviewer_browser, make_breakpoint):
    bp = with_form(make_breakpoint, form=FORM, proposal=PROPOSAL)

    html = reviewer_browser.post(
        action_url("release", bp.pk), answer(value__replicas="11", confirm="yes")
    ).content.decode()

    field = html.split('data-bpm-field="value__replicas"')[1].split("</div>")[0]
    assert "less than or equal to 10" in field
    assert Breakpoint.objects.get(pk=bp.pk).status == "waiting"


def test_a_rejection_sends_no_values(reviewer_browser, make_breakpoint):
    bp = with_form(make_breakpoint, form=FORM, proposal=PROPOSAL)

    reviewer_browser.post(
        action_url("release", bp.pk), answer(decision="reject", value__replicas="99", confirm="yes")
    )

    result = Breakpoint.objects.get(pk=bp.pk).result
    assert (result["approved"], result["values"]) == (False, None)


def test_a_proposal_without_form_is_edited_as_json(reviewer_browser, make_breakpoint):
    bp = with_form(make_breakpoint, proposal={"sql": "select 1"})
    data = {"decision": "approve", "comment": "", "values_json": '{"sql": "select 2"}'}

    reviewer_browser.post(action_url("release", bp.pk), {**data, "confirm": "yes"})

    result = Breakpoint.objects.get(pk=bp.pk).result
    assert (result["values"], result["edited"]) == ({"sql": "select 2"}, True)


def test_agent_sent_titles_and_descriptions_are_escaped(reviewer_browser, make_breakpoint):
    form = {
        "type": "object",
        "properties": {"x": {"type": "string", "title": XSS, "description": XSS}},
    }
    bp = with_form(make_breakpoint, form=form, proposal={"x": XSS})

    html = reviewer_browser.get(review_url(bp.pk)).content.decode()

    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_the_history_shows_the_values_of_each_vote_escaped(
    reviewer_browser, make_breakpoint, three_experts
):
    """Collect-all: each seat approves the same edited values (an approval with others is
    refused); the history line of each vote says which, as text (an agent's strings are
    escaped)."""
    form = {"type": "object", "properties": {"note": {"type": "string"}}}
    bp = with_form(
        make_breakpoint,
        form=form,
        proposal={"note": "as proposed"},
        expert=["tech-lead", "ops-lead"],
        strategy="collect-all",
    )
    for seat, note in (("tech-lead", "<b>tina's</b>"), ("ops-lead", "<b>tina's</b>")):
        feedback_add(
            breakpoint_id=bp.pk,
            actor=Actor.for_user(three_experts[seat]),
            comment="",
            release=True,
            approved=True,
            values={"note": note},
            via=Via.CONSOLE,
        )

    page = reviewer_browser.get(review_url(bp.pk)).content.decode()
    history = page.split('id="bpm-timeline"', 1)[1]
    shown = re.findall(r'bpm-ev__values">approved values: <code>(.*?)</code>', history)

    assert (
        shown
        == [
            "{&quot;note&quot;: &quot;&lt;b&gt;tina&#x27;s&lt;/b&gt;&quot;}",
        ]
        * 2
    )
    assert Breakpoint.objects.get(pk=bp.pk).result["values"] == {"note": "<b>tina's</b>"}


def test_a_rejecting_vote_shows_no_values(reviewer_browser, make_breakpoint, reviewer):
    bp = with_form(make_breakpoint, form=FORM, proposal=PROPOSAL)
    feedback_add(
        breakpoint_id=bp.pk,
        actor=Actor.for_user(reviewer),
        comment="no",
        release=True,
        approved=False,
        via=Via.CONSOLE,
    )

    page = reviewer_browser.get(review_url(bp.pk)).content.decode()

    assert "approved values:" not in page.split('id="bpm-timeline"', 1)[1]
