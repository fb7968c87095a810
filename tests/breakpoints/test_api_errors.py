"""The one error contract: envelope, status codes, X-Request-ID, and path forms."""

import re

import pytest
from django.test import override_settings

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
