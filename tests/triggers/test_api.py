"""The triggers admin API: /api/event-sources, /api/triggers (with the dry run) and
/api/events. Admins only; every write through triggers.services; refusals are 400
envelopes with details by field, never a 500 or a stored row; a dry run changes nothing."""

import json
import time
from datetime import timedelta

import jsonschema
import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from audit.models import Event
from breakpoints.models import Breakpoint, Feedback
from core.actors import Actor
from core.exceptions import InvalidInput
from notifications.models import Delivery
from notifications.services import webhook_add
from tests.support.api import assert_error
from triggers import services
from triggers.models import EventSource, EventStatus, ExternalEvent, TriggerRule
from triggers.verification import sign_generic

SOURCES, TRIGGERS, EVENTS = "/api/event-sources", "/api/triggers", "/api/events"
SELECTOR = {"key": "wait-for-ci", "runId": "{{ workflow_run.head_sha }}"}
CI_GREEN = {
    "name": "ci-green",
    "source": "github",
    "eventType": "workflow_run",
    "conditions": ["workflow_run.conclusion == 'success'"],
    "action": "release",
    "params": {"selector": SELECTOR, "feedback": "CI passed: {{ workflow_run.html_url }}"},
}
GREEN = {"workflow_run": {"head_sha": "abc123", "conclusion": "success", "html_url": "u/1"}}


@pytest.fixture
def github(admin) -> EventSource:
    return services.source_add(actor=admin, name="github", kind="github")


@pytest.fixture
def ci_green(admin, github) -> TriggerRule:
    body = {**CI_GREEN, "event_type": CI_GREEN["eventType"]}
    del body["eventType"]
    return services.rule_add(actor=admin, **body)


def waiting_for_ci(make_breakpoint, run_id: str = "abc123") -> Breakpoint:
    return make_breakpoint(
        run_id=run_id, payload={"breakpointId": "wait-for-ci", "question": "CI green?"}
    )


def stored_event(source: EventSource, type_: str = "push", **fields) -> ExternalEvent:
    fields.setdefault("payload", {"ref": "main"})
    return ExternalEvent.objects.create(
        source=source,
        type=type_,
        delivery_id=fields.pop("delivery_id", f"d-{time.monotonic_ns()}"),
        next_attempt_at=timezone.now(),
        **fields,
    )


# --- who may call ---------------------------------------------------------------------------

CALLS = [
    ("get", SOURCES, None),
    ("post", SOURCES, {"name": "gh", "kind": "github"}),
    ("get", f"{SOURCES}/github", None),
    ("patch", f"{SOURCES}/github", {"enabled": False}),
    ("get", TRIGGERS, None),
    ("post", TRIGGERS, CI_GREEN),
    ("get", f"{TRIGGERS}/ci-green", None),
    ("delete", f"{TRIGGERS}/ci-green", None),
    ("post", f"{TRIGGERS}/ci-green/test", {"type": "workflow_run", "payload": GREEN}),
    ("get", EVENTS, None),
    ("get", f"{EVENTS}/evt_x", None),
]


@pytest.mark.parametrize(("method", "url", "body"), CALLS)
@pytest.mark.parametrize("who", ["reviewer_client", "agent_client", "nobody_client"])
def test_only_admins_may_call(request, ci_green, method, url, body, who):
    client = request.getfixturevalue(who)

    response = getattr(client, method)(url, body, format="json")

    assert_error(response, 403, "permission_denied")
    assert TriggerRule.objects.count() == 1
    assert EventSource.objects.get().enabled is True


@pytest.mark.parametrize(("method", "url", "body"), CALLS)
def test_anonymous_calls_are_401(ci_green, method, url, body):
    response = getattr(APIClient(), method)(url, body, format="json")

    assert_error(response, 401, "not_authenticated")
    assert "WWW-Authenticate" in response


# --- event sources --------------------------------------------------------------------------


def test_a_generated_secret_is_in_the_create_answer_only(admin_client):
    response = admin_client.post(SOURCES, {"name": "github", "kind": "github"}, format="json")

    assert response.status_code == 201, response.content
    created = response.json()
    source = EventSource.objects.get()
    assert created["secret"] == source.secret and len(source.secret) >= 32
    assert created["url"] == "/api/events/github"
    assert (created["kind"], created["enabled"], created["createdBy"]) == ("github", True, "root-admin")  # fmt: skip
    listed = admin_client.get(SOURCES).json()["results"]
    read = admin_client.get(f"{SOURCES}/github").json()
    patched = admin_client.patch(f"{SOURCES}/github", {"enabled": True}, format="json").json()
    for answer in (*listed, read, patched):
        assert "secret" not in answer
        assert source.secret not in json.dumps(answer)
    assert set(read) == {"name", "kind", "enabled", "createdBy", "createdAt", "url"}


def test_a_given_secret_is_kept_and_a_source_may_start_paused(admin_client):
    secret = "my-own-secret-0123456789"
    response = admin_client.post(
        SOURCES,
        {"name": "ci-script", "kind": "generic-hmac", "secret": secret, "enabled": False},
        format="json",
    )

    assert response.status_code == 201, response.content
    assert (response.json()["secret"], response.json()["enabled"]) == (secret, False)
    assert EventSource.objects.get().enabled is False


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "GitHub", "kind": "github"}, "name"),
        ({"name": "github\n", "kind": "github"}, "name"),
        ({"name": "a" * 65, "kind": "github"}, "name"),
        ({"name": 7, "kind": "github"}, "name"),
        ({"name": "gh", "kind": "bitbucket"}, "kind"),
        ({"name": "gh", "kind": "github", "secret": "short"}, "secret"),
        ({"name": "gh", "kind": "github", "secret": "x" * 201}, "secret"),
        ({"name": "gh", "kind": "github", "secret": "nul\x00-0123456789abc"}, "secret"),
        ({"name": "gh", "kind": "github", "enabled": "no"}, "enabled"),
        ({"name": "gh", "kind": "github", "url": "x"}, "non_field_errors"),
        ({"kind": "github"}, "name"),
    ],
)
def test_a_bad_source_is_refused_on_its_field(admin_client, body, field):
    error = assert_error(admin_client.post(SOURCES, body, format="json"), 400)

    assert field in error["details"], error
    assert not EventSource.objects.exists()


def test_a_taken_name_is_a_conflict(admin_client, github):
    response = admin_client.post(SOURCES, {"name": "github", "kind": "gitlab"}, format="json")

    assert assert_error(response, 409, "conflict")["details"] == {"name": ["Taken."]}
    assert EventSource.objects.get().kind == "github"


def test_pausing_a_source_makes_its_url_404_until_resumed(admin_client):
    admin_client.post(
        SOURCES, {"name": "script", "kind": "generic-hmac", "secret": "s" * 32}, format="json"
    )

    paused = admin_client.patch(f"{SOURCES}/script", {"enabled": False}, format="json")
    refused = send_generic("script", {"type": "build.done"}, secret="s" * 32)
    resumed = admin_client.patch(f"{SOURCES}/script/", {"enabled": True}, format="json")
    accepted = send_generic("script", {"type": "build.done"}, secret="s" * 32)

    assert (paused.status_code, paused.json()["enabled"]) == (200, False)
    assert_error(refused, 404, "not_found")
    assert (resumed.status_code, resumed.json()["enabled"]) == (200, True)
    assert accepted.status_code == 202, accepted.content
    assert ExternalEvent.objects.get().type == "build.done"


@pytest.mark.parametrize(
    "body", [{}, {"enabled": "false"}, {"enabled": True, "secret": "x" * 20}, [], "x"]
)
def test_a_patch_changes_enabled_only(admin_client, github, body):
    response = admin_client.patch(f"{SOURCES}/github", body, format="json")

    assert_error(response, 400)
    assert EventSource.objects.get().enabled is True


def test_unknown_sources_are_404_and_sources_are_never_deleted(admin_client, github):
    assert_error(admin_client.get(f"{SOURCES}/nope"), 404, "not_found")
    patch = admin_client.patch(f"{SOURCES}/nope", {"enabled": False}, format="json")
    assert_error(patch, 404, "not_found")
    for method in ("delete", "put"):
        assert_error(getattr(admin_client, method)(f"{SOURCES}/github"), 405, "method_not_allowed")
    assert EventSource.objects.filter(name="github").exists()


def send_generic(name: str, body: dict, *, secret: str) -> object:
    raw = json.dumps(body).encode()
    timestamp = int(time.time())
    return APIClient().post(
        f"{EVENTS}/{name}",
        data=raw,
        content_type="application/json",
        HTTP_X_BPM_SIGNATURE=sign_generic(secret, raw, timestamp),
        HTTP_X_BPM_TIMESTAMP=str(timestamp),
        HTTP_X_BPM_EVENT_ID=f"e-{time.monotonic_ns()}",
    )


# --- trigger rules --------------------------------------------------------------------------


def test_admin_adds_reads_lists_and_removes_a_rule(admin_client, github):
    created = admin_client.post(TRIGGERS, CI_GREEN, format="json")

    assert created.status_code == 201, created.content
    rule = created.json()
    assert set(rule) == {"id", "name", "source", "eventType", "conditions", "action", "params", "owner", "enabled", "createdAt"}  # fmt: skip
    assert rule["name"] == "ci-green" and rule["source"] == "github"
    assert (rule["eventType"], rule["conditions"]) == ("workflow_run", CI_GREEN["conditions"])
    assert (rule["params"], rule["owner"], rule["enabled"]) == (CI_GREEN["params"], "root-admin", True)  # fmt: skip
    assert admin_client.get(f"{TRIGGERS}/ci-green").json() == rule
    assert admin_client.get(TRIGGERS).json() == {"results": [rule]}

    assert admin_client.delete(f"{TRIGGERS}/ci-green").status_code == 204
    assert not TriggerRule.objects.exists()
    assert_error(admin_client.get(f"{TRIGGERS}/ci-green"), 404, "not_found")
    assert_error(admin_client.delete(f"{TRIGGERS}/ci-green"), 404, "not_found")


def test_a_rule_for_any_source_and_type_by_default(admin_client):
    body = {"name": "fwd", "action": "forward"}

    rule = admin_client.post(TRIGGERS, body, format="json").json()

    assert (rule["source"], rule["eventType"], rule["conditions"], rule["params"]) == (None, "*", [], {})  # fmt: skip


def rule_with(**changes) -> dict:
    body = {**CI_GREEN, **changes}
    return {key: value for key, value in body.items() if value is not ...}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (rule_with(name="CI Green"), "name"),
        (rule_with(name=None), "name"),
        (rule_with(source="gitlab"), "source"),
        (rule_with(source=5), "source"),
        (rule_with(eventType=""), "eventType"),
        (rule_with(eventType=["push"]), "eventType"),
        (rule_with(conditions="a == b"), "conditions"),
        (rule_with(conditions=["ok", "a ==="]), "conditions[1]"),
        (rule_with(conditions=[7]), "conditions[0]"),
        (rule_with(conditions=["a"] * 21), "conditions"),
        (rule_with(conditions=["'nul\x00'"]), "conditions"),
        (rule_with(action="approve"), "action"),
        (rule_with(params=...), "params"),
        (rule_with(params=[]), "params"),
        (rule_with(params={"feedback": "x"}), "params.selector"),
        (rule_with(params={"selector": {"color": "x"}}), "params.selector"),
        (rule_with(params={"selector": {"runId": 5}}), "params.selector"),
        (rule_with(params={"selector": {"tags": ["{{ a === }}"]}}), "params.selector"),
        (rule_with(params={"selector": SELECTOR, "approved": "yes"}), "params.approved"),
        (rule_with(params={"selector": SELECTOR, "feedback": "{{ a === }}"}), "params.feedback"),
        (rule_with(params={"selector": SELECTOR, "reason": "x"}), "params"),
        (rule_with(params={"selector": SELECTOR, "feedback": "a\x00"}), "params"),
        (rule_with(action="create", params={"title": "x"}), "params.question"),
        (
            rule_with(action="create", params={"question": "q", "ttlSeconds": True}),
            "params.ttlSeconds",
        ),  # fmt: skip
        (
            rule_with(action="create", params={"question": "q", "ttlSeconds": 0}),
            "params.ttlSeconds",
        ),  # fmt: skip
        (rule_with(action="create", params={"question": "q", "tags": "a"}), "params.tags"),
        (rule_with(action="forward", params={"url": "x"}), "params"),
        (rule_with(extra=1), "non_field_errors"),
    ],
)
def test_a_bad_rule_is_refused_on_its_field(admin_client, github, body, field):
    error = assert_error(admin_client.post(TRIGGERS, body, format="json"), 400)

    assert field in error["details"], error
    assert not TriggerRule.objects.exists()


def test_a_taken_rule_name_is_a_conflict(admin_client, ci_green):
    error = assert_error(admin_client.post(TRIGGERS, CI_GREEN, format="json"), 409, "conflict")

    assert error["details"] == {"name": ["Taken."]}


@pytest.mark.parametrize("body", [b"[1]", b'"x"', b"{", b'{"name": "\\ud800"}', b"[" * 5000])
def test_hostile_bodies_are_400(admin_client, body):
    for url in (TRIGGERS, SOURCES, f"{TRIGGERS}/x/test"):
        response = admin_client.post(url, data=body, content_type="application/json")
        assert_error(response, 400)


# --- the dry run ----------------------------------------------------------------------------


def dry_run(client, rule: str, payload: dict, type_: str = "workflow_run", **extra):
    body = {"type": type_, "payload": payload, **extra}
    return client.post(f"{TRIGGERS}/{rule}/test", body, format="json")


def nothing_written(before: dict) -> bool:
    return counts() == before


def counts() -> dict:
    return {
        "events": ExternalEvent.objects.count(),
        "waiting": Breakpoint.objects.filter(status="waiting").count(),
        "breakpoints": Breakpoint.objects.count(),
        "feedback": Feedback.objects.count(),
        "audit": Event.objects.count(),
        "deliveries": Delivery.objects.count(),
    }


def test_a_dry_run_says_what_would_be_released_and_changes_nothing(
    admin_client, ci_green, make_breakpoint
):
    mine, other = waiting_for_ci(make_breakpoint), waiting_for_ci(make_breakpoint, "def456")
    before = counts()

    response = dry_run(admin_client, "ci-green", GREEN)

    assert response.status_code == 200, response.content
    answer = response.json()
    assert answer == {
        "rule": "ci-green",
        "action": "release",
        "enabled": True,
        "sourceMatches": True,
        "typeMatches": True,
        "matched": True,
        "unmet": [],
        "actions": [
            {
                "action": "release",
                "breakpointId": mine.pk,
                "approved": True,
                "feedback": "CI passed: u/1",
                "outcome": "would release",
            }
        ],
        "error": None,
    }
    assert nothing_written(before)
    mine.refresh_from_db(), other.refresh_from_db()
    assert (mine.status, other.status, mine.result) == ("waiting", "waiting", None)


def test_a_dry_run_reports_unmet_conditions_and_other_types_and_sources(admin_client, ci_green):
    services.source_add(actor=Actor.for_user(ci_green.owner), name="gitlab", kind="gitlab")
    red = {"workflow_run": {"head_sha": "abc123", "conclusion": "failure"}}

    answer = dry_run(admin_client, "ci-green", red, type_="push", source="gitlab").json()

    assert (answer["matched"], answer["unmet"], answer["actions"]) == (False, CI_GREEN["conditions"], [])  # fmt: skip
    assert (answer["typeMatches"], answer["sourceMatches"]) == (False, False)


def test_a_dry_run_of_a_create_rule_shows_the_breakpoint_it_would_post(admin_client, admin):
    services.rule_add(
        actor=admin,
        name="on-deploy",
        action="create",
        params={"question": "Deploy {{ sha }}?", "tags": ["{{ env }}"], "runId": "{{ sha }}"},
    )
    before = counts()

    answer = dry_run(admin_client, "on-deploy", {"sha": "f00", "env": "prod"}).json()

    assert answer["sourceMatches"] is True  # a rule for any source
    assert answer["actions"] == [
        {
            "action": "create",
            "payload": {"question": "Deploy f00?"},
            "tags": ["prod"],
            "runId": "f00",
            "outcome": "would create",
        }
    ]
    assert nothing_written(before)


def test_a_dry_run_of_a_forward_rule_sends_nothing(admin_client, admin):
    webhook_add(url="https://hooks.example/in", event_types=["trigger.fired"], secret=None)
    services.rule_add(actor=admin, name="fwd", action="forward")
    before = counts()

    answer = dry_run(admin_client, "fwd", {"a": 1}).json()

    assert answer["actions"] == [{"action": "forward", "outcome": "would forward"}]
    assert nothing_written(before)


def test_a_condition_failing_on_the_sample_is_the_answers_error(admin_client, admin):
    services.rule_add(
        actor=admin, name="odd", action="forward", conditions=["length(missing) > `1`"]
    )

    answer = dry_run(admin_client, "odd", {"a": 1}).json()

    assert answer["error"] and "length" in answer["error"]
    assert answer["matched"] is False


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"payload": {}}, "type"),
        ({"type": "push"}, "payload"),
        ({"type": "push", "payload": [1]}, "payload"),
        ({"type": "push", "payload": {"a": "\x00"}}, "payload"),
        ({"type": "push", "payload": {}, "source": "nope"}, "source"),
        ({"type": "push", "payload": {}, "source": "Not A Name"}, "source"),
        ({"type": "push", "payload": {}, "delivery": "x"}, "non_field_errors"),
    ],
)
def test_a_bad_sample_is_400(admin_client, ci_green, body, field):
    error = assert_error(admin_client.post(f"{TRIGGERS}/ci-green/test", body, format="json"), 400)

    assert field in error["details"], error
    assert not ExternalEvent.objects.exists()


def test_a_dry_run_of_an_unknown_rule_is_404(admin_client):
    assert_error(dry_run(admin_client, "nope", {}), 404, "not_found")


# --- external events ------------------------------------------------------------------------


@pytest.fixture
def events(github) -> list[ExternalEvent]:
    """Five events, oldest first, a minute apart; the newest is processed."""
    other = EventSource.objects.create(name="gitlab", kind="gitlab")
    now = timezone.now()
    made = []
    for n, (source, type_) in enumerate(
        [
            (github, "push"),
            (other, "push"),
            (github, "workflow_run"),
            (github, "push"),
            (other, "merge_request"),
        ]  # fmt: skip
    ):
        event = stored_event(source, type_, payload={"n": n})
        ExternalEvent.objects.filter(pk=event.pk).update(received_at=now - timedelta(minutes=5 - n))
        made.append(event)
    results = [{"rule": "ci-green", "action": "release", "matched": True, "actions": []}]
    ExternalEvent.objects.filter(pk=made[-1].pk).update(
        status=EventStatus.PROCESSED, processed_at=now, results=results
    )
    return made


def test_the_list_is_newest_first_without_payloads(admin_client, events):
    page = admin_client.get(EVENTS).json()

    assert [event["id"] for event in page["results"]] == [e.pk for e in reversed(events)]
    newest = page["results"][0]
    assert set(newest) == {"id", "source", "type", "deliveryId", "receivedAt", "status", "processedAt", "results", "error"}  # fmt: skip
    assert (newest["source"], newest["type"], newest["status"]) == ("gitlab", "merge_request", "processed")  # fmt: skip
    assert newest["results"][0]["rule"] == "ci-green" and newest["processedAt"]
    assert page["results"][1]["processedAt"] is None


def test_the_list_pages_with_a_cursor(admin_client, events):
    first = admin_client.get(EVENTS, {"pageSize": 2}).json()
    second = admin_client.get(first["next"]).json()
    third = admin_client.get(second["next"]).json()

    seen = [e["id"] for page in (first, second, third) for e in page["results"]]
    assert seen == [e.pk for e in reversed(events)]
    assert third["next"] is None


@pytest.mark.parametrize(
    ("query", "indexes"),
    [
        ({"source": "github"}, [3, 2, 0]),
        ({"type": "push"}, [3, 1, 0]),
        ({"source": "github", "type": "push"}, [3, 0]),
        ({"status": "processed"}, [4]),
        ({"status": "pending", "source": "gitlab"}, [1]),
        ({"source": "nope"}, []),
        ({"source": "", "type": ""}, [4, 3, 2, 1, 0]),  # empty: not given
    ],
)
def test_the_list_filters(admin_client, events, query, indexes):
    page = admin_client.get(EVENTS, query).json()

    assert [event["id"] for event in page["results"]] == [events[n].pk for n in indexes]


@pytest.mark.parametrize(
    "query",
    [
        {"status": "done"},
        {"source": "a" * 65},
        {"type": "t" * 101},
        {"type": "a\x00b"},
        {"cursor": "nonsense"},
        {"pageSize": "0"},
    ],
)
def test_bad_filters_are_400(admin_client, events, query):
    assert_error(admin_client.get(EVENTS, query), 400)


def test_the_detail_has_the_payload(admin_client, events):
    response = admin_client.get(f"{EVENTS}/{events[2].pk}")

    assert response.status_code == 200, response.content
    assert response.json()["payload"] == {"n": 2}
    assert response.json()["type"] == "workflow_run"
    assert_error(admin_client.get(f"{EVENTS}/evt_nope"), 404, "not_found")


def test_the_list_does_not_grow_queries_with_its_rows(
    admin_client, github, django_assert_max_num_queries
):
    for _ in range(30):
        stored_event(github)

    with django_assert_max_num_queries(4):
        response = admin_client.get(EVENTS, {"pageSize": 30})

    assert len(response.json()["results"]) == 30


@pytest.mark.parametrize("method", ["get", "post"])
def test_a_nul_in_the_path_is_not_found(admin_client, github, method):
    response = getattr(admin_client, method)(f"{EVENTS}/git%00hub")

    assert_error(response, 404, "not_found")


def test_receiving_still_works_beside_the_list_and_the_detail(admin_client, github):
    response = admin_client.post(f"{EVENTS}/github", data=b"{}", content_type="application/json")

    # The ingest path ignores the token: the signature is missing, so it is refused.
    assert_error(response, 401, "not_authenticated")
    assert not ExternalEvent.objects.exists()


# --- the schema -----------------------------------------------------------------------------


@pytest.fixture
def schema(client, db) -> dict:
    response = client.get("/api/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    return json.loads(response.content)


def test_the_schema_documents_every_operation(schema):
    paths = schema["paths"]
    documented = {path: set(item) & {"get", "post", "patch", "delete"} for path, item in paths.items()}  # fmt: skip

    assert documented["/api/event-sources"] == {"get", "post"}
    assert documented["/api/event-sources/{name}"] == {"get", "patch"}
    assert documented["/api/triggers"] == {"get", "post"}
    assert documented["/api/triggers/{name}"] == {"get", "delete"}
    assert documented["/api/triggers/{name}/test"] == {"post"}
    assert documented["/api/events"] == {"get"}
    assert documented["/api/events/{ref}"] == {"get", "post"}
    assert paths["/api/events/{ref}"]["post"]["security"] == [{}]  # the signature, no token
    for path in ("/api/event-sources", "/api/triggers", "/api/triggers/{name}/test"):
        assert paths[path]["post"]["requestBody"]["required"] is True


@pytest.mark.parametrize(
    ("body", "valid"),
    [
        (CI_GREEN, True),
        ({"name": "fwd", "action": "forward"}, True),
        (
            {"name": "q", "action": "create", "params": {"question": "{{ a }}", "ttlSeconds": 60}},
            True,
        ),  # fmt: skip
        ({"name": "fwd", "action": "forward", "params": {"url": "x"}}, False),
        ({**CI_GREEN, "params": {"selector": {}}}, False),
        ({**CI_GREEN, "name": "CI"}, False),
        ({**CI_GREEN, "extra": 1}, False),
    ],
)
def test_the_documented_rule_body_agrees_with_the_api(schema, admin_client, github, body, valid):
    documented = schema["paths"]["/api/triggers"]["post"]["requestBody"]["content"]
    validator = jsonschema.Draft4Validator(documented["application/json"]["schema"])

    response = admin_client.post(TRIGGERS, body, format="json")

    assert validator.is_valid(body) is valid
    assert (response.status_code == 201) is valid, response.content


@pytest.mark.parametrize(
    ("body", "rule"),
    [
        ({**CI_GREEN, "params": {"feedback": "x"}}, "release: selector (required)"),
        ({"name": "q", "action": "create", "params": {"ttlSeconds": 60}}, "question (required)"),
        ({"name": "fwd", "action": "forward", "params": {"question": "x"}}, "forward: none"),
    ],
)
def test_the_rules_between_fields_are_in_words_and_the_400(
    schema, admin_client, github, body, rule
):
    """Which params an action takes is no oneOf by action (generated clients lost the body's
    other fields with it): the body fits the schema, its description says the rule, the
    API refuses it with 400 by field."""
    documented = schema["paths"]["/api/triggers"]["post"]["requestBody"]["content"]
    body_schema = documented["application/json"]["schema"]
    validator = jsonschema.Draft4Validator(body_schema)

    response = admin_client.post(TRIGGERS, body, format="json")

    assert validator.is_valid(body)
    assert "oneOf" not in body_schema
    assert rule in body_schema["properties"]["params"]["description"]
    assert any(key.startswith("params") for key in assert_error(response, 400)["details"])


# --- regressions: bugs found in triggers.services while writing this API -----------------


def test_rule_add_refuses_a_selector_value_that_is_not_text(admin):
    """A rule saved with {"runId": 5} raised TypeError in select_waiting on every event of
    its type (the worker's evaluation failed whole: no other rule acted; a dry run, 500)."""
    with pytest.raises(InvalidInput):
        services.rule_add(
            actor=admin, name="bad", action="release", params={"selector": {"runId": 5}}
        )


def test_source_add_refuses_a_name_with_a_trailing_newline(admin):
    """`$` matches before a final newline: "github\\n" was stored as a source name (and a
    rule name), whose URL is /api/events/github%0A."""
    with pytest.raises(InvalidInput):
        services.source_add(actor=admin, name="github\n", kind="github")


def test_an_event_with_a_number_out_of_range_is_400(admin):
    """parse_event_body: json.loads reads 1e400 as inf (no parse_constant call) and the
    insert failed: PostgreSQL "Token Infinity is invalid" (DataError), SQLite the
    JSON_VALID check (IntegrityError, taken for a redelivery and re-raised): a 500."""
    services.source_add(actor=admin, name="script", kind="generic-hmac", secret="s" * 32)
    raw, timestamp = b'{"type": "build.done", "size": 1e400}', int(time.time())
    client = APIClient(raise_request_exception=False)

    response = client.post(
        f"{EVENTS}/script",
        data=raw,
        content_type="application/json",
        HTTP_X_BPM_SIGNATURE=sign_generic("s" * 32, raw, timestamp),
        HTTP_X_BPM_TIMESTAMP=str(timestamp),
        HTTP_X_BPM_EVENT_ID="e-1",
    )

    assert_error(response, 400)


def test_an_event_sending_a_key_twice_is_400_naming_it_and_stores_nothing(admin):
    """parse_event_body: `{"conclusion": "failure", ..., "conclusion": "success"}` is read
    differently by different parsers (Python keeps the last): a rule must not act on one
    reading of it (issue 47)."""
    services.source_add(actor=admin, name="script", kind="generic-hmac", secret="s" * 32)
    raw = b'{"run": {"conclusion": "failure", "sha": "abc", "conclusion": "success"}}'
    timestamp = int(time.time())

    response = APIClient(raise_request_exception=False).post(
        f"{EVENTS}/script",
        data=raw,
        content_type="application/json",
        HTTP_X_BPM_SIGNATURE=sign_generic("s" * 32, raw, timestamp),
        HTTP_X_BPM_TIMESTAMP=str(timestamp),
        HTTP_X_BPM_EVENT_ID="e-dup",
    )

    error = assert_error(response, 400)
    assert "run.conclusion" in error["message"]
    assert not ExternalEvent.objects.exists()
