"""Forms in draft-07, 2019-09 and 2020-12 (or none declared) are taken (issue 48 item 1).

Servers built on the TypeScript MCP SDK publish draft-07 input schemas; a gateway or an
agent copies one into payload.form as it is. The service reads it as 2020-12 once
(breakpoints.payload.form_dialects): `definitions` and their `$ref`, tuple `items`, `dependencies`.
The form is stored as sent. Through the API, on the real database.
"""

import pytest

from breakpoints.models import Breakpoint
from breakpoints.payload.form_dialects import as_2020_12
from tests.support.api import assert_error

URL = "/api/breakpoints"
DRAFT_07 = "http://json-schema.org/draft-07/schema#"
DRAFT_2019_09 = "https://json-schema.org/draft/2019-09/schema"

# The shape the TypeScript SDK's filesystem server publishes for write_file.
WRITE_FILE = {
    "$schema": DRAFT_07,
    "type": "object",
    "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
    "required": ["path", "content"],
    "additionalProperties": False,
}
OLD_KEYWORDS = {
    "type": "object",
    "definitions": {"env": {"enum": ["staging", "prod"]}},
    "properties": {
        "env": {"$ref": "#/definitions/env"},
        "pair": {
            "type": "array",
            "items": [{"type": "string"}, {"type": "integer"}],
            "additionalItems": False,
        },
        "a": {},
        "c": {},
    },
    "dependencies": {"a": ["b"], "c": {"required": ["d"]}},
}


def create(client, form, proposal=None):
    payload = {"question": "Write?", "title": "Write", "form": form}
    if proposal is not None:
        payload["proposal"] = proposal
    return client.post(URL, {"payload": payload}, format="json")


def test_a_draft_07_form_from_a_typescript_server_is_taken_and_stored_as_sent(
    agent_client, reviewer_client
):
    proposal = {"path": "/tmp/a.txt", "content": "hello"}

    response = create(agent_client, WRITE_FILE, proposal)

    assert response.status_code == 201, response.content
    body = response.json()
    assert body["payload"]["form"] == WRITE_FILE
    refused = reviewer_client.post(
        f"{URL}/{body['breakpointId']}/feedback",
        {"release": True, "values": {"path": "/tmp/a.txt", "mode": "x"}},
        format="json",
    )
    details = assert_error(refused, 400)["details"]
    assert details["/content"] == ["Required."]
    assert details["/mode"] == ["Not a field of this form."]


@pytest.mark.parametrize("dialect", [DRAFT_07, DRAFT_07.rstrip("#"), None])
def test_definitions_tuple_items_and_dependencies_are_read_as_2020_12(agent_client, dialect):
    form = {**OLD_KEYWORDS, **({"$schema": dialect} if dialect else {})}

    accepted = create(agent_client, form, {"env": "prod", "pair": ["a", 1], "a": 1, "b": 2})
    assert accepted.status_code == 201, accepted.content

    refused = create(agent_client, form, {"env": "moon", "pair": ["a", "b", 3], "a": 1, "c": 1})
    details = assert_error(refused, 400)["details"]
    assert set(details) == {
        "payload.proposal",  # 'b' is a dependency of 'a'
        "payload.proposal/env",
        "payload.proposal/pair",  # additionalItems: false
        "payload.proposal/pair/1",
        "payload.proposal/d",
    }
    assert "'b' is a dependency of 'a'" in details["payload.proposal"][0]
    assert Breakpoint.objects.count() == 1


def test_under_draft_07_a_refs_siblings_are_ignored_as_that_draft_says(agent_client):
    env = {"$ref": "#/definitions/env", "type": "integer"}
    form = {**OLD_KEYWORDS, "properties": {"env": env}}

    assert create(agent_client, {**form, "$schema": DRAFT_07}, {"env": "prod"}).status_code == 201
    refused = create(agent_client, form, {"env": "prod"})  # 2020-12: both apply
    assert "payload.proposal/env" in assert_error(refused, 400)["details"]


def test_a_2019_09_form_with_tuple_items_is_taken(agent_client):
    form = {
        "$schema": DRAFT_2019_09,
        "type": "object",
        "$defs": {"n": {"type": "integer", "minimum": 1}},
        "properties": {"xy": {"type": "array", "items": [{"$ref": "#/$defs/n"}], "maxItems": 1}},
    }

    assert create(agent_client, form, {"xy": [2]}).status_code == 201
    details = assert_error(create(agent_client, form, {"xy": [0]}), 400)["details"]
    assert "payload.proposal/xy/0" in details


def test_2019_09_recursive_references_are_refused_naming_where(agent_client):
    form = {
        "$schema": DRAFT_2019_09,
        "type": "object",
        "properties": {"tree": {"$recursiveRef": "#"}},
    }

    problems = assert_error(create(agent_client, form), 400)["details"]["payload.form"]

    assert problems == [
        "/properties/tree/$recursiveRef: Not supported in a form: use $ref to the form's own $defs."
    ]


def test_an_unknown_dialect_is_refused_naming_those_accepted(agent_client):
    form = {"type": "object", "$schema": "http://json-schema.org/draft-04/schema#"}

    (problem,) = assert_error(create(agent_client, form), 400)["details"]["payload.form"]

    assert problem.startswith("$schema: Must be JSON Schema draft 2020-12, 2019-09 or draft-07")
    assert problem.endswith("or left out.") and not problem.endswith("..")


def test_the_translation_is_2020_12s_keywords_and_leaves_data_alone():
    form = {
        "$schema": DRAFT_07,
        "type": "object",
        "definitions": {"d": {"type": "string"}},
        "properties": {
            "x": {"$ref": "#/definitions/d", "minLength": 3, "description": "kept"},
            "definitions": {"const": {"items": [1], "dependencies": {"a": ["b"]}}},
        },
    }

    assert as_2020_12(form) == {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {"d": {"type": "string"}},
        "properties": {
            "x": {"$ref": "#/$defs/d", "description": "kept"},
            "definitions": {"const": {"items": [1], "dependencies": {"a": ["b"]}}},
        },
    }
    assert form["definitions"] == {"d": {"type": "string"}}  # the form itself is untouched


def test_a_2020_12_form_needs_no_translation():
    form = {"type": "object", "$defs": {"a": {}}, "properties": {"a": {"$ref": "#/$defs/a"}}}

    assert as_2020_12(form) is form
