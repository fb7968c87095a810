"""External events in the console (admins only): event sources (secret shown once, paused
and resumed, never deleted), trigger rules (JSON typed in textareas, refusals on their
field, removed through the service) and the events received, read-only, with links to
the breakpoints their rules acted on. Lists cost a fixed number of queries; what senders
wrote is always escaped."""

import json

import pytest
from django.contrib.admin.utils import quote
from django.utils import timezone

from breakpoints.models import Breakpoint
from core.actors import Actor
from tests.support.console import SECTIONS_URL, XSS, messages, review_url
from tests.support.factories import AdminFactory
from triggers import services
from triggers.models import EventSource, EventStatus, ExternalEvent, TriggerRule

SOURCES_URL = "/admin/triggers/eventsource/"
RULES_URL = "/admin/triggers/triggerrule/"
EVENTS_URL = "/admin/triggers/externalevent/"
SELECTOR = {"key": "wait-for-ci", "runId": "{{ workflow_run.head_sha }}"}
CI_PARAMS = {"selector": SELECTOR, "feedback": "CI passed: {{ workflow_run.html_url }}"}
CI_CONDITIONS = ["workflow_run.conclusion == 'success'"]


@pytest.fixture
def actor(console_admin) -> Actor:
    return Actor.for_user(console_admin)


@pytest.fixture
def github(actor) -> EventSource:
    return services.source_add(actor=actor, name="github", kind="github")


@pytest.fixture
def ci_green(actor, github) -> TriggerRule:
    return services.rule_add(
        actor=actor,
        name="ci-green",
        source="github",
        action="release",
        event_type="workflow_run",
        conditions=CI_CONDITIONS,
        params=CI_PARAMS,
    )


def stored_event(source: EventSource, n: int = 0, **fields) -> ExternalEvent:
    fields.setdefault("payload", {"n": n})
    return ExternalEvent.objects.create(
        source=source,
        type=fields.pop("type", "push"),
        delivery_id=f"d-{n}",
        next_attempt_at=timezone.now(),
        **fields,
    )


# --- access ---------------------------------------------------------------------------------

URLS = [SOURCES_URL, SOURCES_URL + "add/", RULES_URL, RULES_URL + "add/", EVENTS_URL]


@pytest.mark.parametrize("url", URLS)
def test_reviewers_cannot_open_the_screens(reviewer_browser, url):
    assert reviewer_browser.get(url).status_code == 403


def test_the_sections_list_them_for_admins_only(admin_browser, reviewer_browser):
    admin_page = admin_browser.get(SECTIONS_URL).content.decode()
    reviewer_page = reviewer_browser.get(SECTIONS_URL).content.decode()

    for url in (SOURCES_URL, RULES_URL, EVENTS_URL):
        assert url in admin_page
        assert url not in reviewer_page


def test_anonymous_visitors_are_sent_to_log_in(client, db):
    response = client.get(EVENTS_URL)

    assert response.status_code == 302 and "/login/" in response["Location"]


# --- event sources --------------------------------------------------------------------------


def test_a_generated_secret_is_shown_once(admin_browser):
    response = admin_browser.post(SOURCES_URL + "add/", {"name": "github", "kind": "github"})

    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    source = EventSource.objects.get()
    html = response.content.decode()
    assert source.secret in html and "/api/events/github" in html
    assert source.created_by == "adam"
    for page in (SOURCES_URL, f"{SOURCES_URL}{source.pk}/change/"):
        answer = admin_browser.get(page)
        assert answer.status_code == 200
        assert source.secret not in answer.content.decode()


def test_a_given_secret_is_never_echoed(admin_browser):
    secret = "my-own-secret-0123456789"
    response = admin_browser.post(
        SOURCES_URL + "add/", {"name": "ci", "kind": "generic-hmac", "secret": secret}
    )

    assert response.status_code == 302 and response["Location"] == SOURCES_URL
    assert EventSource.objects.get().secret == secret
    assert any("“ci”" in message for message in messages(response))
    assert secret not in admin_browser.get(SOURCES_URL).content.decode()


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"name": "Git Hub", "kind": "github"}, "name"),
        ({"name": "github", "kind": "bitbucket"}, "kind"),
        ({"name": "github", "kind": "github", "secret": "short"}, "secret"),
        ({"name": "", "kind": "github"}, "name"),
    ],
)
def test_a_refused_source_is_a_form_error(admin_browser, data, field):
    response = admin_browser.post(SOURCES_URL + "add/", data)

    assert response.status_code == 200
    assert response.context["form"].errors[field]
    assert not EventSource.objects.exists()


def test_a_taken_name_is_a_form_error(admin_browser, github):
    response = admin_browser.post(SOURCES_URL + "add/", {"name": "github", "kind": "gitlab"})

    assert response.context["form"].errors["name"] == ["Taken."]
    assert EventSource.objects.get().kind == "github"


def test_admin_pauses_and_resumes_a_source(admin_browser, github):
    change = f"{SOURCES_URL}{github.pk}/change/"
    assert admin_browser.get(change).status_code == 200

    paused = admin_browser.post(change, {})
    github.refresh_from_db()
    assert paused.status_code == 302 and github.enabled is False

    admin_browser.post(SOURCES_URL, {"action": "resume_selected", "_selected_action": [github.pk]})
    github.refresh_from_db()
    assert github.enabled is True
    admin_browser.post(SOURCES_URL, {"action": "pause_selected", "_selected_action": [github.pk]})
    github.refresh_from_db()
    assert github.enabled is False


def test_sources_are_never_deleted(admin_browser, github):
    response = admin_browser.post(f"{SOURCES_URL}{github.pk}/delete/", {"post": "yes"})

    assert response.status_code == 403
    assert EventSource.objects.filter(pk=github.pk).exists()


# --- trigger rules --------------------------------------------------------------------------


def rule_form(**fields) -> dict:
    data = {
        "name": "ci-green",
        "source": "github",
        "event_type": "workflow_run",
        "conditions": json.dumps(CI_CONDITIONS),
        "action": "release",
        "params": json.dumps(CI_PARAMS),
    }
    data.update(fields)
    return data


def test_admin_adds_the_ci_gate_rule(admin_browser, github):
    page = admin_browser.get(RULES_URL + "add/")
    assert page.status_code == 200
    assert "workflow_run.head_sha" in page.content.decode()  # the example in the help text

    response = admin_browser.post(RULES_URL + "add/", rule_form())

    assert response.status_code == 302, response.context and response.context["form"].errors
    rule = TriggerRule.objects.get()
    assert (rule.source, rule.event_type, rule.conditions) == (github, "workflow_run", CI_CONDITIONS)  # fmt: skip
    assert (rule.params, rule.owner.username) == (CI_PARAMS, "adam")


def test_a_forward_rule_for_any_source_needs_no_params(admin_browser):
    response = admin_browser.post(
        RULES_URL + "add/", rule_form(source="", conditions="", params="", action="forward")
    )

    assert response.status_code == 302
    rule = TriggerRule.objects.get()
    assert (rule.source, rule.conditions, rule.params) == (None, [], {})


@pytest.mark.parametrize(
    ("fields", "field", "says"),
    [
        ({"conditions": "[1,"}, "conditions", "Not valid JSON"),
        ({"conditions": json.dumps(["ok", "a ==="])}, "conditions", "conditions[1]"),
        ({"params": json.dumps({"feedback": "x"})}, "params", "params.selector"),
        ({"params": json.dumps({"selector": {"runId": 5}})}, "params", "params.selector: runId"),
        ({"params": json.dumps({**CI_PARAMS, "color": "red"})}, "params", "Unknown field"),
        ({"params": ""}, "params", "Required"),
        ({"event_type": "x" * 101}, "event_type", "at most"),
        ({"name": "CI Green"}, "name", "slug"),
        ({"source": "nope"}, "source", "nope"),
    ],
)
def test_a_refused_rule_is_an_error_on_its_field(admin_browser, github, fields, field, says):
    response = admin_browser.post(RULES_URL + "add/", rule_form(**fields))

    assert response.status_code == 200
    errors = response.context["form"].errors
    assert says in " ".join(errors[field]), errors
    assert not TriggerRule.objects.exists()


def test_admin_removes_a_rule_through_the_service(admin_browser, ci_green):
    response = admin_browser.post(f"{RULES_URL}{ci_green.pk}/delete/", {"post": "yes"})

    assert response.status_code == 302
    assert not TriggerRule.objects.exists()


def test_the_rule_detail_shows_conditions_and_params_escaped(admin_browser, actor, github):
    rule = services.rule_add(
        actor=actor, name="hostile", action="create", params={"question": XSS}, conditions=[]
    )

    response = admin_browser.get(f"{RULES_URL}{rule.pk}/change/")

    html = response.content.decode()
    assert response.status_code == 200
    assert XSS not in html and "&lt;script&gt;" in html
    assert 'name="params"' not in html  # read-only: remove and add again


def test_the_rule_list_is_not_n_plus_1(admin_browser, actor, github, django_assert_max_num_queries):
    for n in range(30):
        services.rule_add(
            actor=Actor.for_user(AdminFactory(username=f"owner{n}")),
            name=f"rule-{n}",
            source="github" if n % 2 else None,
            action="forward",
            conditions=[f"a == '{n}'"],
        )

    with django_assert_max_num_queries(12):
        response = admin_browser.get(RULES_URL)

    html = response.content.decode()
    assert "rule-29" in html and "owner29" in html and "any" in html


# --- external events ------------------------------------------------------------------------


@pytest.fixture
def released(ci_green, make_breakpoint) -> tuple[ExternalEvent, Breakpoint]:
    """A green workflow_run evaluated by the worker: it released one breakpoint."""
    bp = make_breakpoint(
        run_id="abc123", payload={"breakpointId": "wait-for-ci", "question": "CI green?"}
    )
    payload = {"workflow_run": {"head_sha": "abc123", "conclusion": "success", "html_url": XSS}}
    event = stored_event(ci_green.source, type="workflow_run", payload=payload)
    assert services.event_evaluate(event.pk) == "processed"
    return ExternalEvent.objects.get(pk=event.pk), bp


def test_the_list_shows_what_each_rule_did(admin_browser, released):
    event, _ = released

    html = admin_browser.get(EVENTS_URL).content.decode()

    assert event.pk[:10] in html and "workflow_run" in html and "github" in html
    assert "ci-green: released" in html
    assert "bpm-badge--released" in html


def test_the_detail_links_the_breakpoints_and_escapes_the_payload(admin_browser, released):
    event, bp = released

    response = admin_browser.get(f"{EVENTS_URL}{quote(event.pk)}/change/")

    html = response.content.decode()
    assert response.status_code == 200
    assert f'href="{review_url(bp.pk)}"' in html
    assert "released" in html and "ci-green" in html
    assert XSS not in html and "&lt;script&gt;" in html  # in the payload and the feedback
    assert "head_sha" in html  # the payload, pretty-printed


def test_hostile_results_and_types_are_escaped(admin_browser, github):
    results = [
        {
            "rule": XSS,
            "action": "release",
            "matched": True,
            "actions": [{"action": XSS, "breakpointId": XSS, "outcome": XSS, "error": XSS}],
        },
        {"rule": "r2", "action": "cancel", "error": XSS},
        "not an outcome",
    ]
    event = stored_event(github, type=XSS, results=results, error=XSS)

    for url in (EVENTS_URL, f"{EVENTS_URL}{quote(event.pk)}/change/"):
        response = admin_browser.get(url)
        assert response.status_code == 200
        assert XSS not in response.content.decode()


@pytest.mark.parametrize(
    ("query", "shown", "hidden"),
    [
        ("status__exact=processed", ["d-1"], ["d-0", "d-2"]),
        ("type=workflow_run", ["d-1"], ["d-0", "d-2"]),
        ("source__id__exact={gitlab}", ["d-2"], ["d-0", "d-1"]),
        ("q=d-0", ["d-0"], ["d-1", "d-2"]),
    ],
)
def test_the_list_filters(admin_browser, github, query, shown, hidden):
    gitlab = EventSource.objects.create(name="gitlab", kind="gitlab")
    stored_event(github, 0)
    stored_event(github, 1, type="workflow_run", status=EventStatus.PROCESSED)
    stored_event(gitlab, 2)

    response = admin_browser.get(f"{EVENTS_URL}?{query.format(gitlab=gitlab.pk)}")

    assert response.status_code == 200
    delivery_ids = {event.delivery_id for event in response.context["cl"].result_list}
    assert delivery_ids == set(shown)
    assert not delivery_ids & set(hidden)


def test_search_finds_an_event_by_its_id_exactly(admin_browser, github):
    event = stored_event(github, 0)
    stored_event(github, 1)

    found = admin_browser.get(EVENTS_URL, {"q": event.pk}).context["cl"].result_list
    other_case = admin_browser.get(EVENTS_URL, {"q": event.pk.upper()}).context["cl"].result_list

    assert [row.pk for row in found] == [event.pk]
    assert list(other_case) == [] or event.pk == event.pk.upper()


def test_a_nul_in_a_filter_is_not_a_500(admin_browser, github):
    for query in ({"type": "a\x00b"}, {"q": "evt_\x00"}, {"q": "d\x00"}):
        response = admin_browser.get(EVENTS_URL, query)
        assert response.status_code in (200, 302, 400)


def test_events_are_read_only(admin_browser, released):
    event, _ = released

    assert admin_browser.get(EVENTS_URL + "add/").status_code == 403
    assert (
        admin_browser.post(f"{EVENTS_URL}{quote(event.pk)}/delete/", {"post": "yes"}).status_code
        == 403
    )
    detail = admin_browser.get(f"{EVENTS_URL}{quote(event.pk)}/change/").content.decode()
    assert 'name="type"' not in detail


def test_the_events_list_is_not_n_plus_1_and_stops_counting(
    admin_browser, github, django_assert_max_num_queries
):
    results = [{"rule": "r", "action": "forward", "matched": True, "actions": [{"action": "forward", "outcome": "would forward"}]}]  # fmt: skip
    now = timezone.now()
    ExternalEvent.objects.bulk_create(
        ExternalEvent(
            source=github,
            type="push",
            delivery_id=f"d-{n}",
            payload={"n": n},
            next_attempt_at=now,
            results=results,
        )
        for n in range(260)
    )

    with django_assert_max_num_queries(12):
        response = admin_browser.get(EVENTS_URL)

    assert len(response.context["cl"].result_list) == 50
    assert "250+ external events" in " ".join(response.content.decode().split())
