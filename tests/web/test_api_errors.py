"""The one error contract: envelope, status codes, X-Request-ID, and path forms."""

import base64
import re
from datetime import timedelta
from datetime import timezone as dt_timezone
from urllib.parse import urlencode

import pytest
from django.test import Client, override_settings

from audit.models import Event
from breakpoints.models import Breakpoint, Feedback
from policies.models import AutoApprovalRule

URL = "/api/breakpoints"
UUID_HEX = re.compile(r"^[0-9a-f]{32}$")


def assert_envelope(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"}
    error = body["error"]
    assert set(error) == {"code", "message", "details"}
    assert error["code"] == code
    assert isinstance(error["message"], str) and error["message"]
    assert isinstance(error["details"], dict)
    return error


# --- 401 ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "method, path",
    [
        ("get", URL),
        ("post", URL),
        ("get", "/api/breakpoints/bp_x"),
        ("get", "/api/breakpoints/bp_x/status"),
        ("get", "/api/breakpoints/bp_x/events"),
        ("post", "/api/breakpoints/bp_x/cancel"),
        ("post", "/api/breakpoints/bp_x/feedback"),
        ("post", "/api/breakpoints/bp_x/expire"),
    ],
)
def test_every_api_endpoint_without_credentials_is_401_envelope(client, db, method, path):
    response = getattr(client, method)(path, content_type="application/json")

    assert_envelope(response, 401, "not_authenticated")
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_unknown_bearer_token_is_401(client, db):
    response = client.get(URL, HTTP_AUTHORIZATION="Bearer bpm_notARealToken")

    assert_envelope(response, 401, "not_authenticated")


# --- 403 ------------------------------------------------------------------------------------


def test_user_without_role_gets_403_envelope(nobody_client):
    assert_envelope(nobody_client.get(URL), 403, "permission_denied")


@pytest.mark.parametrize(
    "method, suffix",
    [
        ("get", ""),
        ("get", "/status"),
        ("get", "/events"),
        ("post", "/cancel"),
        ("post", "/feedback"),
        ("post", "/expire"),
    ],
)
def test_user_without_role_gets_403_on_every_object_endpoint(
    nobody_client, make_breakpoint, method, suffix
):
    bp = make_breakpoint()

    response = getattr(nobody_client, method)(
        f"{URL}/{bp.pk}{suffix}", {"comment": "x"}, format="json"
    )

    assert_envelope(response, 403, "permission_denied")


def test_agent_on_reviewer_endpoint_gets_403_envelope(agent_client, make_breakpoint):
    bp = make_breakpoint()

    response = agent_client.post(f"{URL}/{bp.pk}/feedback", {"comment": "x"}, format="json")

    assert_envelope(response, 403, "permission_denied")


# --- 404 ------------------------------------------------------------------------------------


def test_unknown_breakpoint_is_404_envelope(reviewer_client):
    assert_envelope(reviewer_client.get(f"{URL}/bp_missing"), 404, "not_found")


@pytest.mark.parametrize(
    "path",
    ["/api/nothing-here", "/api/breakpoints/bp_x/unknown-action", "/api/v2/breakpoints", "/api/"],
)
def test_unknown_api_path_is_404_envelope(reviewer_client, path):
    assert_envelope(reviewer_client.get(path), 404, "not_found")


def test_unknown_api_path_is_404_envelope_even_without_credentials(client, db):
    assert_envelope(client.get("/api/nothing-here"), 404, "not_found")


@pytest.mark.parametrize(
    "method, suffix",
    [
        ("get", ""),
        ("get", "/status"),
        ("get", "/events"),
        ("post", "/cancel"),
        ("post", "/feedback"),
        ("post", "/expire"),
    ],
)
def test_breakpoint_id_with_a_nul_character_is_404_not_500(admin_client, method, suffix):
    response = getattr(admin_client, method)(f"{URL}/bp_%00x{suffix}", format="json")

    assert_envelope(response, 404, "not_found")


def test_tag_filter_with_a_nul_character_is_400_not_500(reviewer_client):
    response = reviewer_client.get(f"{URL}?tag=a%00b")

    error = assert_envelope(response, 400, "validation_error")
    assert "tag" in error["details"]


# --- 405 ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "method, path",
    [
        ("put", URL),
        ("delete", URL),
        ("delete", "/api/breakpoints/{id}"),
        ("patch", "/api/breakpoints/{id}"),
        ("get", "/api/breakpoints/{id}/cancel"),
        ("post", "/api/breakpoints/{id}/status"),
        ("get", "/api/breakpoints/{id}/feedback"),
    ],
)
def test_wrong_method_is_405_envelope(admin_client, make_breakpoint, method, path):
    bp = make_breakpoint()

    response = getattr(admin_client, method)(path.format(id=bp.pk), format="json")

    assert_envelope(response, 405, "method_not_allowed")


# --- 400 ------------------------------------------------------------------------------------


def test_malformed_json_is_400_envelope(agent_client):
    response = agent_client.generic("POST", URL, b'{"payload": ', content_type="application/json")

    assert_envelope(response, 400, "validation_error")


def test_validation_error_message_names_the_field(agent_client):
    response = agent_client.post(URL, {"payload": {"strategy": "vote"}}, format="json")

    error = assert_envelope(response, 400, "validation_error")
    assert "payload.strategy" in error["message"]
    assert "payload.strategy" in error["details"]


def test_non_numeric_content_length_is_400_envelope(agent_client):
    response = agent_client.generic(
        "POST", URL, b"{}", content_type="application/json", CONTENT_LENGTH="lots"
    )

    assert_envelope(response, 400, "validation_error")


# --- 409 ------------------------------------------------------------------------------------


def test_invalid_state_envelope_carries_current_status(
    agent_client, reviewer_client, make_breakpoint
):
    bp = make_breakpoint()
    assert agent_client.post(f"{URL}/{bp.pk}/cancel", format="json").status_code == 200

    response = reviewer_client.post(
        f"{URL}/{bp.pk}/feedback", {"comment": "late", "release": True}, format="json"
    )

    error = assert_envelope(response, 409, "invalid_state")
    assert error["details"]["currentStatus"] == "cancelled"


def test_idempotency_conflict_envelope(agent_client):
    agent_client.post(URL, {"payload": {"a": 1}}, format="json", HTTP_IDEMPOTENCY_KEY="k")

    response = agent_client.post(
        URL, {"payload": {"a": 2}}, format="json", HTTP_IDEMPOTENCY_KEY="k"
    )

    assert_envelope(response, 409, "idempotency_conflict")


# --- 413 ------------------------------------------------------------------------------------


@override_settings(BPM_MAX_BODY_BYTES=1000)
def test_body_over_the_limit_is_413_envelope_on_any_api_endpoint(reviewer_client, make_breakpoint):
    bp = make_breakpoint()

    response = reviewer_client.post(
        f"{URL}/{bp.pk}/feedback", {"comment": "x" * 5000}, format="json"
    )

    error = assert_envelope(response, 413, "payload_too_large")
    assert error["details"] == {"limit": 1000}
    assert response["X-Request-ID"]


# --- X-Request-ID ---------------------------------------------------------------------------


def test_request_id_is_echoed_when_the_caller_sends_one(agent_client):
    response = agent_client.get(URL, HTTP_X_REQUEST_ID="trace-abc.123:xyz")

    assert response.status_code == 200
    assert response["X-Request-ID"] == "trace-abc.123:xyz"


def test_request_id_is_generated_when_missing(agent_client):
    first = agent_client.get(URL)
    second = agent_client.get(URL)

    assert UUID_HEX.match(first["X-Request-ID"])
    assert first["X-Request-ID"] != second["X-Request-ID"]


@pytest.mark.parametrize("bad", ["has spaces", "x" * 129, "<script>", "a\tb"])
def test_malformed_request_id_is_replaced_by_a_new_one(agent_client, bad):
    response = agent_client.get(URL, HTTP_X_REQUEST_ID=bad)

    assert response["X-Request-ID"] != bad
    assert UUID_HEX.match(response["X-Request-ID"])


def test_request_id_is_echoed_on_errors_too(client, db):
    unauthenticated = client.get(URL, HTTP_X_REQUEST_ID="req-401")
    unknown = client.get("/api/nothing", HTTP_X_REQUEST_ID="req-404")

    assert unauthenticated.status_code == 401
    assert unauthenticated["X-Request-ID"] == "req-401"
    assert unknown.status_code == 404
    assert unknown["X-Request-ID"] == "req-404"


def test_request_id_is_on_non_api_responses(client, db):
    response = client.get("/healthz", HTTP_X_REQUEST_ID="probe-1")

    assert response["X-Request-ID"] == "probe-1"


# --- trailing slash --------------------------------------------------------------------------


@pytest.mark.parametrize("slash", ["", "/"])
@pytest.mark.parametrize("suffix", ["", "/status", "/events"])
def test_read_paths_work_with_and_without_trailing_slash(
    agent_client, make_breakpoint, slash, suffix
):
    bp = make_breakpoint()

    response = agent_client.get(f"{URL}/{bp.pk}{suffix}{slash}")

    assert response.status_code == 200


@pytest.mark.parametrize("slash", ["", "/"])
def test_list_and_create_work_with_and_without_trailing_slash(agent_client, slash):
    created = agent_client.post(URL + slash, {"payload": {}}, format="json")
    listed = agent_client.get(URL + slash)

    assert created.status_code == 201
    assert listed.status_code == 200
    assert [r["breakpointId"] for r in listed.json()["results"]] == [created.json()["breakpointId"]]


@pytest.mark.parametrize("slash", ["", "/"])
def test_write_paths_work_with_and_without_trailing_slash(
    agent_client, reviewer_client, admin_client, make_breakpoint, slash
):
    commented, cancelled, expired = make_breakpoint(), make_breakpoint(), make_breakpoint()

    assert (
        reviewer_client.post(
            f"{URL}/{commented.pk}/feedback{slash}", {"comment": "x"}, format="json"
        ).status_code
        == 201
    )
    assert (
        agent_client.post(f"{URL}/{cancelled.pk}/cancel{slash}", format="json").status_code == 200
    )
    assert admin_client.post(f"{URL}/{expired.pk}/expire{slash}", format="json").status_code == 200


# --- hostile input is 400, never 500 ----------------------------------------------------
# A lone surrogate is written as the JSON escape: Python reads it into a str that no
# database (nor UTF-8) can hold.

LONE_SURROGATE_BODIES = {
    "payload value": (b'{"payload": {"question": "Deploy? \\ud800"}}', "payload"),
    "payload key": (b'{"payload": {"\\udfff": 1}}', "payload"),
    "nested payload": (
        b'{"payload": {"context": {"files": [{"path": "a.md", "content": "x\\udc00"}]}}}',
        "payload",
    ),
    "tags": (b'{"payload": {}, "tags": ["deploy", "\\ud800"]}', "tags"),
    "high half at the end": (b'{"payload": {"note": "\\ud83d"}}', "payload"),
    "a top-level key": (b'{"payload": {}, "\\ud800": 1}', "non_field_errors"),
}


@pytest.mark.parametrize(
    "body, field", LONE_SURROGATE_BODIES.values(), ids=LONE_SURROGATE_BODIES.keys()
)
def test_a_lone_surrogate_anywhere_in_a_create_body_is_400_and_nothing_is_stored(
    agent_client, body, field
):
    response = agent_client.generic("POST", URL, body, content_type="application/json")

    error = assert_envelope(response, 400, "validation_error")
    assert "surrogate" in error["message"].lower()
    assert list(error["details"]) == [field]
    assert not Breakpoint.objects.exists()
    assert not Event.objects.exists()


def test_a_surrogate_pair_is_one_character_and_is_stored(agent_client):
    response = agent_client.generic(
        "POST",
        URL,
        b'{"payload": {"title": "Ship \\ud83d\\ude80"}}',
        content_type="application/json",
    )

    assert response.status_code == 201, response.content
    assert response.json()["payload"]["title"] == "Ship \U0001f680"


def test_a_lone_surrogate_in_feedback_cancel_and_rule_bodies_is_400(
    agent_client, reviewer_client, admin_client, make_breakpoint
):
    bp = make_breakpoint()
    events_before = Event.objects.count()

    for client, path, body in [
        (reviewer_client, f"{URL}/{bp.pk}/feedback", b'{"comment": "ok \\ud800", "release": true}'),
        (agent_client, f"{URL}/{bp.pk}/cancel", b'{"reason": "\\udbff"}'),
        (admin_client, "/api/rules", b'{"pattern": "deploy.\\ud800"}'),
    ]:
        response = client.generic("POST", path, body, content_type="application/json")
        assert_envelope(response, 400, "validation_error")

    bp.refresh_from_db()
    assert bp.status == "waiting"
    assert not Feedback.objects.exists()
    assert not AutoApprovalRule.objects.exists()
    assert Event.objects.count() == events_before


@pytest.mark.parametrize("name", ["createdAfter", "createdBefore"])
@pytest.mark.parametrize(
    "value",
    [
        "2026-01-01T00:00:00+16:00",
        "2026-01-01T00:00:00-16:00",
        "2026-01-01T00:00:00+23:59",
        "0001-01-01T00:00:00+01:00",  # before year 1 in UTC
        "9999-12-31T23:59:59-01:00",  # after year 9999 in UTC
    ],
)
def test_a_created_filter_beyond_what_the_database_takes_is_400(
    reviewer_client, make_breakpoint, name, value
):
    make_breakpoint()

    response = reviewer_client.get(URL, {name: value})

    error = assert_envelope(response, 400, "validation_error")
    assert name in error["details"]


def test_a_created_filter_with_any_real_offset_is_that_instant(reviewer_client, make_breakpoint):
    bp = make_breakpoint()
    created = bp.created_at.astimezone(dt_timezone(timedelta(hours=-15, minutes=-59)))

    at_or_after = reviewer_client.get(URL, {"createdAfter": created.isoformat()})
    before = reviewer_client.get(URL, {"createdBefore": created.isoformat()})

    assert [r["breakpointId"] for r in at_or_after.json()["results"]] == [bp.pk]
    assert before.json()["results"] == []


@pytest.mark.parametrize(
    "position",
    [
        "\x00",  # bz0xJnA9JTAw, the probe's cursor
        "not a date",
        "2026-01-01 00:00:00",  # no zone: not a cursor this server wrote
        "2026-01-01 00:00:00+16:00",
        "2026-13-01 00:00:00+00:00",
    ],
)
def test_a_cursor_whose_position_is_not_a_created_at_is_400(reviewer_client, position):
    cursor = base64.b64encode(urlencode({"o": 1, "p": position}).encode()).decode()

    response = reviewer_client.get(URL, {"cursor": cursor})

    error = assert_envelope(response, 400, "validation_error")
    assert "cursor" in error["details"]


def test_the_probes_nul_cursor_is_400(reviewer_client):
    response = reviewer_client.get(f"{URL}?cursor=bz0xJnA9JTAw")

    error = assert_envelope(response, 400, "validation_error")
    assert error["details"] == {"cursor": ["Invalid cursor."]}


def test_cursors_the_server_wrote_page_forward_and_back(reviewer_client, make_breakpoint):
    ids = [make_breakpoint().pk for _ in range(5)]

    first = reviewer_client.get(URL, {"pageSize": 2}).json()
    second = reviewer_client.get(first["next"]).json()
    back = reviewer_client.get(second["previous"]).json()

    assert [r["breakpointId"] for r in first["results"] + second["results"]] == ids[::-1][:4]
    assert back["results"] == first["results"]


# --- unknown paths answer the 404 envelope whatever the method ------------------------


@pytest.mark.parametrize("method", ["post", "put", "patch", "delete"])
@pytest.mark.parametrize("path", ["/api/nope", "/api/breakpoints/x/nope", "/api/v2/breakpoints"])
@pytest.mark.parametrize("authorized", [True, False], ids=["bearer", "anonymous"])
def test_an_unknown_api_path_with_a_write_method_is_404_envelope_not_a_csrf_page(
    agent_token, method, path, authorized
):
    # A real client: no CSRF cookie and no exemption from the CSRF check (the test
    # client's default skips it, which hid this).
    client = Client(enforce_csrf_checks=True)
    headers = {"Authorization": f"Bearer {agent_token}"} if authorized else {}

    response = getattr(client, method)(
        path, b"{}", content_type="application/json", headers=headers
    )

    assert_envelope(response, 404, "not_found")
    assert not Breakpoint.objects.exists()
