"""OpenAPI: /api/schema is a valid OpenAPI 3 document covering the contract; /api/docs serves."""

import json
from collections.abc import Iterator

import pytest
import yaml
from drf_spectacular.validation import validate_schema

CONTRACT_PATHS = {
    "/api/breakpoints": {"get", "post"},
    "/api/breakpoints/{id}": {"get"},
    "/api/breakpoints/{id}/status": {"get"},
    "/api/breakpoints/{id}/cancel": {"post"},
    "/api/breakpoints/{id}/events": {"get"},
    "/api/breakpoints/{id}/feedback": {"post"},
    "/api/breakpoints/{id}/expire": {"post"},
}


@pytest.fixture
def schema(client, db) -> dict:
    response = client.get("/api/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    return json.loads(response.content)


def test_schema_is_served_without_auth_as_openapi_3_yaml_by_default(client, db):
    response = client.get("/api/schema")

    assert response.status_code == 200
    document = yaml.safe_load(response.content)
    assert str(document["openapi"]).startswith("3.")


def test_schema_with_trailing_slash_is_served_too(client, db):
    assert client.get("/api/schema/").status_code == 200


def test_schema_validates_against_the_openapi_3_spec(schema):
    validate_schema(schema)  # raises on an invalid document
    assert schema["openapi"].startswith("3.")
    assert schema["info"]["title"] == "Breakpoint Manager API"


def test_every_contract_endpoint_is_in_the_schema_with_its_methods(schema):
    paths = schema["paths"]

    for path, methods in CONTRACT_PATHS.items():
        assert path in paths, f"{path} missing; schema has {sorted(paths)}"
        assert methods <= set(paths[path]), f"{path}: {sorted(paths[path])}"


def test_bearer_security_scheme_is_declared_and_used(schema):
    schemes = schema["components"]["securitySchemes"]
    bearer = [
        s for s in schemes.values() if s.get("type") == "http" and s.get("scheme") == "bearer"
    ]
    assert bearer, schemes
    bearer_name = next(name for name, s in schemes.items() if s in bearer)

    create = schema["paths"]["/api/breakpoints"]["post"]
    assert any(bearer_name in requirement for requirement in create["security"])


def test_breakpoint_component_has_the_contract_properties(schema):
    component = schema["components"]["schemas"]["Breakpoint"]

    properties = component["properties"]
    assert properties, "Breakpoint must not be an empty object"
    for name in (
        "breakpointId", "status", "agentId", "runId", "title", "key", "question", "payload",
        "tags", "ttlSeconds", "expiresAt", "createdAt", "updatedAt", "releasedAt",
        "expiredAt", "cancelledAt", "feedback", "result",
    ):  # fmt: skip
        assert name in properties, name


def test_status_enum_lists_the_four_states(schema):
    schemas = schema["components"]["schemas"]
    status = schemas["Breakpoint"]["properties"]["status"]
    ref = status.get("$ref") or status["allOf"][0]["$ref"]

    enum = schemas[ref.rsplit("/", 1)[-1]]["enum"]

    assert set(enum) == {"waiting", "released", "expired", "cancelled"}


def test_create_documents_201_200_and_error_responses(schema):
    responses = schema["paths"]["/api/breakpoints"]["post"]["responses"]

    assert {"200", "201", "400", "401", "403", "409", "413"} <= set(responses)
    error_ref = responses["400"]["content"]["application/json"]["schema"]["$ref"]
    error = schema["components"]["schemas"][error_ref.rsplit("/", 1)[-1]]
    assert "error" in error["properties"]


@pytest.fixture
def plain_static_storage(settings):
    """The suite runs with DEBUG off (manifest storage) but without collectstatic."""
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }


def test_docs_page_is_html_without_auth(client, db, plain_static_storage):
    response = client.get("/api/docs")

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")
    assert b"swagger-ui" in response.content.lower()
    assert b"/api/schema" in response.content


def test_docs_with_trailing_slash_is_served_too(client, db, plain_static_storage):
    assert client.get("/api/docs/").status_code == 200


def _operations(schema):
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            if method in {"get", "post", "put", "patch", "delete"}:
                yield f"{method.upper()} {path}", operation


def test_rule_list_is_an_object_with_results_not_an_array(schema):
    body = schema["paths"]["/api/rules"]["get"]["responses"]["200"]["content"]
    ref = body["application/json"]["schema"]["$ref"]

    component = schema["components"]["schemas"][ref.rsplit("/", 1)[-1]]

    assert component["type"] == "object"
    assert component["properties"]["results"]["type"] == "array"


def test_every_operation_declares_the_errors_any_request_can_get(schema):
    for name, operation in _operations(schema):
        if " /api/" not in name:  # the public keys (/.well-known/jwks.json) take no input
            continue
        responses = operation["responses"]
        assert {"400", "401", "403", "413", "429"} <= set(responses), name
        assert "Retry-After" in responses["429"]["headers"], name
        if "requestBody" in operation:
            assert "415" in responses, name


def test_the_receipt_keys_are_documented_as_a_public_jwks(schema):
    operation = schema["paths"]["/.well-known/jwks.json"]["get"]
    assert operation.get("security") in (None, [])
    body = operation["responses"]["200"]["content"]["application/json"]["schema"]
    assert body["$ref"].endswith("/Jwks")


def test_the_error_codes_are_listed_in_the_envelope(schema):
    schemas = schema["components"]["schemas"]
    code = schemas["ErrorBody"]["properties"]["code"]
    ref = code.get("$ref") or code["allOf"][0]["$ref"]

    codes = set(schemas[ref.rsplit("/", 1)[-1]]["enum"])

    assert {
        "validation_error", "not_authenticated", "permission_denied", "not_found",
        "method_not_allowed", "invalid_state", "idempotency_conflict", "payload_too_large",
        "unsupported_media_type", "throttled", "unavailable",
    } <= codes  # fmt: skip


def test_a_not_visible_entry_of_the_many_status_answer_has_no_details(schema):
    entry = schema["components"]["schemas"]["ManyStatusEntry"]["properties"]["error"]
    ref = entry.get("$ref") or entry["allOf"][0]["$ref"]

    error = schema["components"]["schemas"][ref.rsplit("/", 1)[-1]]

    assert set(error["required"]) == {"code", "message"}


def test_rule_pattern_regex_agrees_with_the_parser():
    import re

    from policies.api.rules import RULE_PATTERN_REGEX
    from policies.patterns import PatternError, parse_pattern

    for text in [
        "confirm.*",
        " *.review(tags contains 'design') ",
        "gate.*(tags contains 'prerequisites' AND expert = 'owner')",
        'g(EXPERT contains "a\\"b" and Tags Contains \'x\')',
        "",
        "a b",
        "(tags contains 'x')",
        "a(tags contains 'x')z",
        "a(tags contains 'x'ANDexpert='y')",
        "a(tags = 'x')",
        "a(expert == 'x')",
        "a(expert = 'x)",
    ]:
        try:
            parse_pattern(text)
            parsed = True
        except PatternError:
            parsed = False
        assert bool(re.match(RULE_PATTERN_REGEX, text)) == parsed, text


def _objects(node, path: str = "#") -> Iterator[tuple[str, dict]]:
    """Every JSON object of the document, with its JSON pointer."""
    if isinstance(node, dict):
        yield path, node
        children = node.items()
    else:
        children = enumerate(node) if isinstance(node, list) else []
    for key, value in children:
        yield from _objects(value, f"{path}/{key}")


def test_no_rule_between_fields_is_written_as_a_union(schema):
    """Code generators build a model from `properties` or from a union, not both: an
    anyOf/oneOf beside an object's properties, a branch that only adds `required`, a `not`
    or a boolean enum lost whole operations and fields (openapi-python-client). Rules between
    fields are in descriptions and the 400s; a union only offers complete alternatives."""
    problems = []
    for path, node in _objects(schema):
        branches = node.get("anyOf", []) + node.get("oneOf", [])
        if "not" in node or (branches and "properties" in node):
            problems.append(path)
        elif any("type" not in branch and "$ref" not in branch for branch in branches):
            problems.append(path)
        elif isinstance(node.get("enum"), list) and any(v is True for v in node["enum"]):
            problems.append(path)
    assert problems == []
