"""POST /api/breakpoints: the created representation, key derivation, idempotency, bad input."""

import json
import re
from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from audit.models import Event
from breakpoints.models import Breakpoint
from tests.support.api import assert_error

URL = "/api/breakpoints"


def post(client, body, **headers):
    return client.post(URL, body, format="json", **headers)


# --- success ---------------------------------------------------------------------


def test_create_returns_201_with_the_full_representation(agent_client):
    payload = {
        "question": "Approve the plan?",
        "title": "Plan Review",
        "context": {"files": [{"path": "docs/plan.md", "format": "markdown"}]},
        "options": ["ship", "hold"],
    }
    response = post(
        agent_client,
        {"runId": "run-1", "payload": payload, "tags": ["design"], "ttlSeconds": 3600},
    )

    assert response.status_code == 201
    body = response.json()
    assert re.fullmatch(r"bp-[0-9a-f]{32}", body["breakpointId"])
    assert body["status"] == "waiting"
    assert body["agentId"] == "agent-a"
    assert body["runId"] == "run-1"
    assert body["title"] == "Plan Review"
    assert body["key"] == "plan-review"
    assert body["question"] == "Approve the plan?"
    assert body["payload"] == payload
    assert body["tags"] == ["design"]
    assert body["ttlSeconds"] == 3600
    assert body["feedback"] == []
    assert body["result"] is None
    assert body["releasedAt"] is None
    assert body["expiredAt"] is None
    assert body["cancelledAt"] is None
    created_at = parse_datetime(body["createdAt"])
    expires_at = parse_datetime(body["expiresAt"])
    assert created_at.utcoffset() == timedelta(0)
    assert abs((expires_at - created_at) - timedelta(seconds=3600)) < timedelta(seconds=5)
    assert parse_datetime(body["updatedAt"]) is not None


def test_create_stores_the_row_and_a_created_event_by_the_agent(agent_client):
    response = post(agent_client, {"payload": {"title": "Plan Review"}})

    assert response.status_code == 201
    bp = Breakpoint.objects.get(pk=response.json()["breakpointId"])
    assert bp.agent_id == "agent-a"
    assert bp.status == "waiting"
    events = list(Event.objects.filter(breakpoint=bp).values_list("type", "actor"))
    assert events == [("created", "agent:agent-a")]


def test_create_without_ttl_has_no_expiry(agent_client):
    body = post(agent_client, {"payload": {"question": "Go?"}}).json()

    assert body["ttlSeconds"] is None
    assert body["expiresAt"] is None


def test_create_with_own_agent_id_is_accepted(agent_client):
    response = post(agent_client, {"agentId": "agent-a", "payload": {"question": "Go?"}})

    assert response.status_code == 201
    assert response.json()["agentId"] == "agent-a"


def test_create_also_works_with_a_trailing_slash(agent_client):
    response = agent_client.post(URL + "/", {"payload": {"question": "Go?"}}, format="json")

    assert response.status_code == 201
    assert Breakpoint.objects.filter(pk=response.json()["breakpointId"]).exists()


def test_run_id_defaults_to_payload_context_run_id(agent_client):
    body = post(agent_client, {"payload": {"context": {"runId": "run-ctx"}}}).json()

    assert body["runId"] == "run-ctx"


def test_top_level_run_id_wins_over_payload_context_run_id(agent_client):
    body = post(agent_client, {"runId": "run-top", "payload": {"context": {"runId": "run-ctx"}}})

    assert body.json()["runId"] == "run-top"


# --- key, title and tags derivation ---------------------------------------------------


def test_payload_breakpoint_id_is_the_key_even_with_a_title(agent_client):
    body = post(
        agent_client,
        {"title": "Star the repo", "payload": {"breakpointId": "confirm.star-repo"}},
    ).json()

    assert body["key"] == "confirm.star-repo"
    assert body["title"] == "Star the repo"


def test_key_is_the_slug_of_the_title_without_payload_breakpoint_id(agent_client):
    body = post(agent_client, {"payload": {"title": "Review Design Document"}}).json()

    assert body["key"] == "review-design-document"


def test_top_level_title_wins_over_payload_title_and_drives_the_key(agent_client):
    body = post(agent_client, {"title": "Outer Title", "payload": {"title": "Inner Title"}}).json()

    assert body["title"] == "Outer Title"
    assert body["key"] == "outer-title"


def test_top_level_tags_win_over_payload_tags(agent_client):
    body = post(agent_client, {"tags": ["outer"], "payload": {"tags": ["inner"]}}).json()

    assert body["tags"] == ["outer"]


def test_payload_tags_are_used_when_no_top_level_tags(agent_client):
    body = post(agent_client, {"payload": {"tags": ["inner", "design"]}}).json()

    assert body["tags"] == ["inner", "design"]


def test_payload_without_title_or_breakpoint_id_gets_a_fallback_key(agent_client):
    body = post(agent_client, {"payload": {"question": "Go?"}}).json()

    assert body["key"] == "untitled"
    assert body["title"] is None


# --- permissions ----------------------------------------------------------------------


def test_agent_posting_for_another_agent_id_gets_403_and_nothing_is_written(agent_client):
    response = post(agent_client, {"agentId": "agent-b", "payload": {"question": "Go?"}})

    assert_error(response, 403, "permission_denied")
    assert Breakpoint.objects.count() == 0
    assert Event.objects.count() == 0


def test_reviewer_cannot_create_breakpoints(reviewer_client):
    response = post(reviewer_client, {"agentId": "agent-a", "payload": {"question": "Go?"}})

    assert_error(response, 403, "permission_denied")
    assert Breakpoint.objects.count() == 0


def test_user_without_role_cannot_create_breakpoints(nobody_client):
    assert_error(post(nobody_client, {"payload": {}}), 403, "permission_denied")
    assert Breakpoint.objects.count() == 0


def test_create_without_credentials_is_401(client, db):
    response = client.post(URL, {"payload": {}}, content_type="application/json")

    assert_error(response, 401, "not_authenticated")
    assert Breakpoint.objects.count() == 0


# --- idempotency ----------------------------------------------------------------------


def test_same_idempotency_key_and_body_returns_the_first_breakpoint_with_200(agent_client):
    body = {"payload": {"question": "Go?"}, "tags": ["x"]}
    first = post(agent_client, body, HTTP_IDEMPOTENCY_KEY="key-1")
    second = post(agent_client, body, HTTP_IDEMPOTENCY_KEY="key-1")

    assert first.status_code == 201
    assert second.status_code == 200
    assert second.json()["breakpointId"] == first.json()["breakpointId"]
    assert Breakpoint.objects.count() == 1
    assert Event.objects.filter(type="created").count() == 1


def test_idempotent_replay_ignores_json_key_order_and_an_explicit_own_agent_id(agent_client):
    first = post(
        agent_client, {"payload": {"a": 1, "b": 2}, "ttlSeconds": 60}, HTTP_IDEMPOTENCY_KEY="k"
    )
    second = post(
        agent_client,
        {"ttlSeconds": 60, "agentId": "agent-a", "payload": {"b": 2, "a": 1}},
        HTTP_IDEMPOTENCY_KEY="k",
    )

    assert second.status_code == 200
    assert second.json()["breakpointId"] == first.json()["breakpointId"]
    assert Breakpoint.objects.count() == 1


def test_same_idempotency_key_with_another_body_is_409_conflict(agent_client):
    first = post(agent_client, {"payload": {"question": "Go?"}}, HTTP_IDEMPOTENCY_KEY="key-1")
    second = post(agent_client, {"payload": {"question": "Stop?"}}, HTTP_IDEMPOTENCY_KEY="key-1")

    assert first.status_code == 201
    assert_error(second, 409, "idempotency_conflict")
    assert Breakpoint.objects.count() == 1


def test_idempotency_key_older_than_24_hours_can_be_reused(agent_client):
    body = {"payload": {"question": "Go?"}}
    first = post(agent_client, body, HTTP_IDEMPOTENCY_KEY="key-1")
    Breakpoint.objects.filter(pk=first.json()["breakpointId"]).update(
        created_at=timezone.now() - timedelta(hours=24, minutes=1)
    )

    second = post(agent_client, body, HTTP_IDEMPOTENCY_KEY="key-1")

    assert second.status_code == 201
    assert second.json()["breakpointId"] != first.json()["breakpointId"]
    assert Breakpoint.objects.count() == 2


def test_stale_idempotency_key_also_accepts_a_different_body(agent_client):
    first = post(agent_client, {"payload": {"question": "Go?"}}, HTTP_IDEMPOTENCY_KEY="key-1")
    Breakpoint.objects.filter(pk=first.json()["breakpointId"]).update(
        created_at=timezone.now() - timedelta(days=2)
    )

    second = post(agent_client, {"payload": {"question": "Other?"}}, HTTP_IDEMPOTENCY_KEY="key-1")

    assert second.status_code == 201
    assert Breakpoint.objects.count() == 2


def test_idempotency_keys_are_scoped_per_agent(agent_client, other_agent_client):
    body = {"payload": {"question": "Go?"}}
    mine = post(agent_client, body, HTTP_IDEMPOTENCY_KEY="shared")
    theirs = post(other_agent_client, body, HTTP_IDEMPOTENCY_KEY="shared")

    assert mine.status_code == 201
    assert theirs.status_code == 201
    assert theirs.json()["breakpointId"] != mine.json()["breakpointId"]
    assert theirs.json()["agentId"] == "agent-b"


def test_without_idempotency_key_each_post_creates_a_breakpoint(agent_client):
    body = {"payload": {"question": "Go?"}}
    assert post(agent_client, body).status_code == 201
    assert post(agent_client, body).status_code == 201
    assert Breakpoint.objects.count() == 2


def test_overlong_idempotency_key_is_400(agent_client):
    response = post(agent_client, {"payload": {}}, HTTP_IDEMPOTENCY_KEY="k" * 256)

    assert_error(response, 400, "validation_error")
    assert Breakpoint.objects.count() == 0


# --- bad input: 400 and nothing written -------------------------------------------------


def nested(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


BAD_BODIES = {
    "missing payload": {"title": "x"},
    "payload null": {"payload": None},
    "payload is a list": {"payload": [1, 2]},
    "payload is a string": {"payload": "approve please"},
    "bad strategy": {"payload": {"strategy": "majority"}},
    "absolute posix path": {
        "payload": {"context": {"files": [{"path": "/etc/passwd", "format": "text"}]}}
    },
    "absolute windows path": {
        "payload": {"context": {"files": [{"path": "C:\\x", "format": "text"}]}}
    },
    "dot-dot path": {
        "payload": {"context": {"files": [{"path": "docs/../../secret", "format": "text"}]}}
    },
    "unknown file format": {
        "payload": {"context": {"files": [{"path": "docs/a.pdf", "format": "pdf"}]}}
    },
    "ttl zero": {"payload": {}, "ttlSeconds": 0},
    "ttl negative": {"payload": {}, "ttlSeconds": -1},
    "ttl string": {"payload": {}, "ttlSeconds": "ten"},
    "ttl boolean": {"payload": {}, "ttlSeconds": True},
    "ttl float": {"payload": {}, "ttlSeconds": 1.5},
    "ttl huge": {"payload": {}, "ttlSeconds": 10**12},
    "tags not a list": {"payload": {}, "tags": "design"},
    "tags with a non-string": {"payload": {}, "tags": ["design", 7]},
    "tags with an empty string": {"payload": {}, "tags": [" "]},
    "payload tags not a list": {"payload": {"tags": "design"}},
    "question not a string": {"payload": {"question": 42}},
    "title not a string": {"payload": {}, "title": 42},
    "run id not a string": {"payload": {}, "runId": 42},
    "breakpointId not kebab-case": {"payload": {"breakpointId": "Not Kebab"}},
    "options not a list": {"payload": {"options": "yes"}},
    "options empty": {"payload": {"options": []}},
    "NUL in a payload value": {"payload": {"question": "a\x00b"}},
    "NUL in a free-form payload value": {"payload": {"notes": {"deep": ["a\x00b"]}}},
    "NUL in a payload key": {"payload": {"a\x00": 1}},
    "NUL in a tag": {"payload": {}, "tags": ["a\x00b"]},
    "NUL in the title": {"payload": {}, "title": "a\x00b"},
    "payload nested too deeply": {"payload": {"x": nested(150)}},
}


@pytest.mark.parametrize("body", BAD_BODIES.values(), ids=BAD_BODIES.keys())
def test_bad_input_is_400_and_writes_nothing(agent_client, body):
    response = post(agent_client, body)

    error = assert_error(response, 400, "validation_error")
    assert error["details"], "details must say which field is wrong"
    assert Breakpoint.objects.count() == 0
    assert Event.objects.count() == 0


def test_validation_details_name_the_json_path_of_the_bad_file(agent_client):
    body = {"payload": {"context": {"files": [{"path": "/etc/passwd", "format": "text"}]}}}

    error = assert_error(post(agent_client, body), 400, "validation_error")

    assert "payload.context.files[0].path" in error["details"]


def test_bad_ttl_names_ttl_seconds_in_details(agent_client):
    error = assert_error(
        post(agent_client, {"payload": {}, "ttlSeconds": 0}), 400, "validation_error"
    )

    assert "ttlSeconds" in error["details"]


@pytest.mark.parametrize(
    "raw",
    [b'{"payload": {', b"not json", b'{"payload": {"a": 1},}'],
    ids=["truncated", "not json", "trailing comma"],
)
def test_malformed_json_is_400_and_writes_nothing(agent_client, raw):
    response = agent_client.generic("POST", URL, raw, content_type="application/json")

    assert_error(response, 400, "validation_error")
    assert Breakpoint.objects.count() == 0


def test_json_nested_beyond_the_parser_is_400_not_500(agent_client):
    raw = '{"payload": {"x": ' + "[" * 5000 + "]" * 5000 + "}}"

    response = agent_client.generic("POST", URL, raw, content_type="application/json")

    assert_error(response, 400, "validation_error")
    assert Breakpoint.objects.count() == 0


def test_moderately_nested_free_form_payload_is_accepted(agent_client):
    response = post(agent_client, {"payload": {"x": nested(50)}})

    assert response.status_code == 201
    assert response.json()["payload"] == {"x": nested(50)}


@pytest.mark.parametrize("raw", ["[1, 2]", '"payload"', "42", "null"])
def test_json_body_that_is_not_an_object_is_400(agent_client, raw):
    response = agent_client.generic("POST", URL, raw, content_type="application/json")

    assert_error(response, 400, "validation_error")
    assert Breakpoint.objects.count() == 0


def test_empty_body_is_400_payload_required(agent_client):
    response = agent_client.generic("POST", URL, b"", content_type="application/json")

    error = assert_error(response, 400, "validation_error")
    assert "payload" in error["details"]
    assert Breakpoint.objects.count() == 0


@override_settings(BPM_MAX_BODY_BYTES=1000)
def test_body_over_the_limit_is_413_and_writes_nothing(agent_client):
    body = {"payload": {"question": "x" * 2000}}
    assert len(json.dumps(body)) > 1000

    response = post(agent_client, body)

    error = assert_error(response, 413, "payload_too_large")
    assert error["details"]["limit"] == 1000
    assert Breakpoint.objects.count() == 0
    assert Event.objects.count() == 0


@override_settings(BPM_MAX_BODY_BYTES=1000)
def test_body_under_the_limit_is_accepted(agent_client):
    response = post(agent_client, {"payload": {"question": "x" * 500}})

    assert response.status_code == 201


# --- hostile bodies: caps, answered without quadratic work (issue 9, defect 3) ----------------

FIVE_MIB = 5 * 1024 * 1024


def _json_body(body: dict) -> bytes:
    raw = json.dumps(body).encode()
    assert FIVE_MIB // 2 < len(raw) <= FIVE_MIB, len(raw)
    return raw


def _hostile_bodies() -> dict:
    """Bodies of up to 5 MiB (the default limit) shaped to cost the server the most."""
    return {
        "100,000 distinct experts": (
            _json_body(
                {"payload": {"expert": [f"expert-{i:06d}-{'x' * 30}" for i in range(100_000)]}}
            ),
            "payload.expert",
        ),
        "200,000 options": (
            _json_body(
                {"payload": {"options": [f"option {i:06d} {'y' * 8}" for i in range(200_000)]}}
            ),
            "payload.options",
        ),
        "400,000 payload tags": (
            _json_body({"payload": {"tags": [f"t{i:06d}" for i in range(400_000)]}}),
            "payload.tags",
        ),
        "400,000 top-level tags": (
            _json_body({"payload": {}, "tags": [f"t{i:06d}" for i in range(400_000)]}),
            "tags",
        ),
        "1,700,000 free-form numbers": (
            _json_body({"payload": {"x": [0] * 1_700_000}}),
            "payload",
        ),
        "free-form object of 270,000 keys": (
            _json_body({"payload": {"x": {f"k{i:06d}": i for i in range(270_000)}}}),
            "payload",
        ),
        "2,000,000 nested lists": (
            ('{"payload": {"x": ' + "[" * 2_000_000 + "]" * 2_000_000 + "}}").encode(),
            None,
        ),
        "500,000 nested objects": (
            ('{"payload": ' + '{"a":' * 500_000 + "1" + "}" * 500_001).encode(),
            None,
        ),
    }


@pytest.mark.parametrize("name", list(_hostile_bodies()))
def test_a_hostile_body_of_up_to_5_mib_is_a_400_naming_the_field(agent_client, name):
    raw, path = _hostile_bodies()[name]

    response = agent_client.generic("POST", URL, raw, content_type="application/json")

    error = assert_error(response, 400, "validation_error")
    if path is not None:
        assert path in error["details"]
    assert Breakpoint.objects.count() == 0
    assert Event.objects.count() == 0


def test_a_hostile_body_over_5_mib_is_a_413(agent_client):
    names = [f"expert-{i:06d}-{'x' * 30}" for i in range(130_000)]
    raw = json.dumps({"payload": {"expert": names}}).encode()
    assert len(raw) > FIVE_MIB

    response = agent_client.generic("POST", URL, raw, content_type="application/json")

    assert_error(response, 413, "payload_too_large")
    assert Breakpoint.objects.count() == 0


@pytest.mark.parametrize(
    "payload, path",
    [
        ({"expert": [f"e{i}" for i in range(21)]}, "payload.expert"),
        ({"options": [f"o{i}" for i in range(21)]}, "payload.options"),
        ({"options": ["o" * 201]}, "payload.options[0]"),
    ],
    ids=["21 experts", "21 options", "201-char option"],
)
def test_a_list_over_its_cap_is_400_naming_it_and_writes_nothing(agent_client, payload, path):
    error = assert_error(post(agent_client, {"payload": payload}), 400, "validation_error")

    assert path in error["details"]
    assert Breakpoint.objects.count() == 0
    assert Event.objects.count() == 0


def test_lists_at_their_caps_are_accepted(agent_client):
    payload = {
        "expert": [f"e{i}" for i in range(20)],
        "options": [f"{i}{'o' * 198}" for i in range(10, 30)],
    }

    response = post(agent_client, {"payload": payload})

    assert response.status_code == 201, response.content
    assert len(response.json()["experts"]) == 20
    assert Breakpoint.objects.get().payload == payload


def test_auto_approve_after_n_at_its_cap_is_stored_and_one_over_is_400(agent_client):
    at_cap = {"payload": {"question": "Ship?", "breakpointId": "ship", "autoApproveAfterN": 1_000}}
    over = {"payload": {"question": "Ship?", "autoApproveAfterN": 10**30}}

    created = agent_client.post("/api/breakpoints", at_cap, format="json")
    refused = agent_client.post("/api/breakpoints", over, format="json")

    assert created.status_code == 201
    assert created.json()["payload"]["autoApproveAfterN"] == 1_000
    assert refused.status_code == 400
    assert "payload.autoApproveAfterN" in refused.json()["error"]["details"]


# --- unknown top-level keys (issue 18 item 3) -----------------------------------------------


def test_an_unknown_top_level_key_is_a_400_naming_it_and_the_close_match(agent_client):
    response = agent_client.post(
        "/api/breakpoints", {"payload": {"question": "Deploy?"}, "ttl": 60}, format="json"
    )

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "validation_error"
    assert "ttl (did you mean ttlSeconds?)" in str(error["details"])
    assert not Breakpoint.objects.exists()  # nothing half-written


@pytest.mark.parametrize(
    "key, meant",
    [("agent_id", "agentId"), ("Title", "title"), ("tag", "tags"), ("paylod", "payload")],
)
def test_close_matches_are_suggested(agent_client, key, meant):
    response = agent_client.post(
        "/api/breakpoints", {"payload": {"question": "?"}, key: "x"}, format="json"
    )

    assert response.status_code == 400
    assert f"{key} (did you mean {meant}?)" in str(response.json()["error"]["details"])


def test_the_payload_stays_free_form(agent_client):
    payload = {"question": "Deploy?", "ttl": 60, "anything": {"nested": [1, 2]}}

    response = agent_client.post("/api/breakpoints", {"payload": payload}, format="json")

    assert response.status_code == 201
    assert response.json()["payload"] == payload


def test_an_unknown_feedback_key_is_refused_before_anything_is_decided(
    agent_client, reviewer_client
):
    bp_id = agent_client.post(
        "/api/breakpoints", {"payload": {"question": "Deploy?"}}, format="json"
    ).json()["breakpointId"]

    response = reviewer_client.post(
        f"/api/breakpoints/{bp_id}/feedback",
        {"comment": "no", "release": True, "aproved": False},
        format="json",
    )

    assert response.status_code == 400
    assert "aproved (did you mean approved?)" in str(response.json()["error"]["details"])
    assert Breakpoint.objects.get(pk=bp_id).status == "waiting"


# --- near-misses of the payload's known keys: warnings, not errors (issue 31 defect 7) ------


def test_a_misspelt_payload_key_is_kept_and_answered_with_a_warning(agent_client):
    payload = {
        "questoin": "Deploy?",
        "context": {"files": [{"path": "deploy.py", "contnet": "print(1)"}]},
    }

    response = post(agent_client, {"payload": payload})

    assert response.status_code == 201
    body = response.json()
    assert body["warnings"] == [
        "payload.questoin: did you mean question?",
        "payload.context.files[0].contnet: did you mean content?",
    ]
    assert body["payload"] == payload  # stored as sent
    stored = agent_client.get(f"{URL}/{body['breakpointId']}").json()
    assert "warnings" not in stored and stored["payload"] == payload


def test_an_idempotent_replay_repeats_the_warnings(agent_client):
    body = {"payload": {"question": "Go?", "titel": "Go"}}
    first = post(agent_client, body, HTTP_IDEMPOTENCY_KEY="key-w")
    replay = post(agent_client, body, HTTP_IDEMPOTENCY_KEY="key-w")

    assert (first.status_code, replay.status_code) == (201, 200)
    assert replay.json()["warnings"] == first.json()["warnings"]
    assert first.json()["warnings"] == ["payload.titel: did you mean title?"]


@pytest.mark.parametrize(
    "payload",
    [
        {"question": "Deploy?"},
        {"question": "Deploy?", "questions": ["a", "b"]},  # the known key is there: its own
        {"question": "Deploy?", "ttl": 60, "anything": {"nested": [1, 2]}},  # nothing close
    ],
)
def test_no_warning_without_a_near_miss(agent_client, payload):
    response = post(agent_client, {"payload": payload})

    assert response.status_code == 201
    assert response.json()["warnings"] == []
