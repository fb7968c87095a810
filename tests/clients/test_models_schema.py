"""The SDK's models (clients/python) against the server's own OpenAPI schema: no drift.

The schema is generated in-process, exactly as `/api/schema` serves it. For each SDK model,
its wire fields, required fields, nullable fields, types and enum values must equal the
component's; every breakpoint endpoint must be decoded by the model its answer documents;
and every error code the API can answer has its exception class (or is knowingly left to
ApiError). The `drift` check is itself tested against edited copies of the schema, so it
cannot pass by seeing nothing.
"""

import copy
import dataclasses
import types
import typing
from datetime import datetime
from typing import Any, Literal, Union

import pytest
from bpm_client import errors
from bpm_client import models as sdk
from drf_spectacular.generators import SchemaGenerator

import tests.conftest as api_fixtures
from accounts.tokens import token_create_for_agent
from web.api.schema import ERROR_CODES

# SDK model -> its component in the schema.
MODELS: dict[type[sdk.Model], str] = {
    sdk.Breakpoint: "Breakpoint",
    sdk.Status: "Status",
    sdk.StatusEntry: "ManyStatusEntry",
    sdk.ManyStatus: "ManyStatus",
    sdk.BreakpointResult: "BreakpointResult",
    sdk.TimeoutPolicy: "TimeoutPolicy",
    sdk.ResponseVote: "ResponseVote",
    sdk.Approver: "Approver",
    sdk.Feedback: "Feedback",
    sdk.Expert: "Expert",
    sdk.AutoApproval: "AutoApproval",
    sdk.ExpectedDecision: "ExpectedDecision",
    sdk.NotVisible: "NotVisible",
    sdk.Event: "Event",
    sdk.EventList: "EventList",
    sdk.BreakpointPage: "PaginatedBreakpointList",
    sdk.StatusOnly: "StatusOnly",
    sdk.FeedbackCreated: "FeedbackCreated",
    sdk.Grant: "Grant",
    sdk.ErrorBody: "ErrorBody",
    sdk.DecidedBreakpoint: "DecidedBreakpoint",
    sdk.DecisionOutcome: "DecisionOutcome",
    sdk.DecisionOutcomes: "DecisionOutcomes",
    sdk.BreakpointGroup: "BreakpointGroup",
    sdk.BreakpointGroups: "BreakpointGroups",
    sdk.RuleReplay: "RuleReplay",
    sdk.ReplayedRule: "ReplayedRule",
    sdk.RejectedButWouldApprove: "RejectedButWouldApprove",
}
ENUMS = {
    "StatusEnum": sdk.StatusName,
    "StrategyEnum": sdk.Strategy,
    "TypeEnum": sdk.EventType,
    "ErrorBodyCodeEnum": sdk.ErrorCode,
}
# Codes the API can answer that the SDK leaves to plain ApiError (with its `code`): each
# answers a request the SDK never makes (an undocumented method, an Accept other than
# JSON, a body that is not JSON, a body trickled slower than BPM_BODY_READ_SECONDS); a
# dedicated class would never be raised.
LEFT_TO_API_ERROR = {
    "method_not_allowed",
    "not_acceptable",
    "unsupported_media_type",
    "request_timeout",
}

Shape = frozenset[Any]  # the alternatives a value may take: "str", ("list", Shape), ...


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    return SchemaGenerator().get_schema(request=None, public=True)


# --- shapes, from both sides ------------------------------------------------------------


def schema_shape(node: dict[str, Any], components: dict[str, Any]) -> Shape:
    """What values a schema property allows, as a set of alternatives."""
    nullable = {"null"} if node.get("nullable") else set()
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        target = components[name]
        if "enum" in target:  # drf-spectacular's NullEnum is [null]
            values = frozenset(v for v in target["enum"] if v is not None)
            shape = {("enum", values)} if values else set()
            return frozenset(shape | nullable | ({"null"} if None in target["enum"] else set()))
        return frozenset({("model", name)} | nullable)
    for combinator in ("allOf", "oneOf", "anyOf"):
        if combinator in node:
            parts = [schema_shape(part, components) for part in node[combinator]]
            return frozenset().union(*parts) | nullable
    kind = node.get("type")
    if kind == "array":
        return frozenset({("list", schema_shape(node["items"], components))} | nullable)
    if kind == "string" and "enum" in node:
        return frozenset({("enum", frozenset(node["enum"]))} | nullable)
    simple = {"integer": "int", "boolean": "bool", "number": "float", "object": "dict"}
    if kind == "string":
        name = "datetime" if node.get("format") == "date-time" else "str"
    else:
        name = simple.get(kind, "any")  # no type at all: any value
    return frozenset({name} | nullable)


def hint_shape(hint: Any) -> Shape:
    """What values a model's type hint allows, in the same terms as schema_shape."""
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        return frozenset().union(*(hint_shape(option) for option in typing.get_args(hint)))
    if origin is list:
        return frozenset({("list", hint_shape(typing.get_args(hint)[0]))})
    if origin is dict:
        return frozenset({"dict"})
    if origin is Literal:
        return frozenset({("enum", frozenset(typing.get_args(hint)))})
    if isinstance(hint, type) and issubclass(hint, sdk.Model):
        return frozenset({("model", MODELS[hint])})
    names: dict[Any, str] = {type(None): "null", str: "str", int: "int", bool: "bool"}
    names.update({float: "float", datetime: "datetime", Any: "any"})
    return frozenset({names[hint]})


def _required(field: dataclasses.Field[Any]) -> bool:
    return field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING


def drift(model: type[sdk.Model], schema: dict[str, Any]) -> list[str]:
    """Every difference between `model` and its schema component (empty: none)."""
    components = schema["components"]["schemas"]
    component = components[MODELS[model]]
    properties = component.get("properties", {})
    fields = model.wire_fields()
    hints = typing.get_type_hints(model)
    problems = []
    if set(fields) != set(properties):
        problems.append(f"fields: SDK {sorted(fields)} != schema {sorted(properties)}")
    required = {key for key, field in fields.items() if _required(field)}
    if required != set(component.get("required", [])):
        problems.append(f"required: SDK {sorted(required)} != schema {sorted(component.get('required', []))}")  # fmt: skip
    for key in sorted(set(fields) & set(properties)):
        expected = schema_shape(properties[key], components)
        actual = hint_shape(hints[fields[key].name])
        if "null" in expected and "null" not in actual:
            problems.append(f"{key}: nullable in the schema, not `| None` in the SDK")
        if key not in required and fields[key].default is None and "null" not in expected:
            actual -= {"null"}  # None stands for "left out" in an optional field
        if actual != expected:
            problems.append(f"{key}: SDK {sorted(map(str, actual))} != schema {sorted(map(str, expected))}")  # fmt: skip
    return problems


# --- the checks -------------------------------------------------------------------------


@pytest.mark.parametrize("model", list(MODELS), ids=lambda model: model.__name__)
def test_sdk_model_matches_the_schema(model, schema):
    """Wire fields, required ones, nullable ones, types and enums equal the schema's."""
    assert drift(model, schema) == []


def test_every_sdk_model_is_checked():
    """A model added to the SDK must be added to MODELS (with its schema component)."""
    defined = {
        value
        for value in vars(sdk).values()
        if isinstance(value, type) and issubclass(value, sdk.Model) and value is not sdk.Model
    }
    assert defined == set(MODELS)


@pytest.mark.parametrize("component", list(ENUMS))
def test_sdk_literals_hold_the_schema_enum_values(component, schema):
    values = schema["components"]["schemas"][component]["enum"]
    assert set(typing.get_args(ENUMS[component])) == set(values)


def test_every_breakpoint_answer_is_decoded_by_its_documented_model(schema):
    """tests/conftest.py's table (checked in every API test) covers each breakpoint
    operation, with the model of the answer the schema documents."""
    checked = []
    for path, item in schema["paths"].items():
        if not path.startswith("/api/breakpoints"):
            continue
        for method in ("get", "post"):
            if method not in item:
                continue
            concrete = path.replace("{id}", "bp_x")
            model = api_fixtures.sdk_model_for(method.upper(), concrete)
            refs = {
                answer["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
                for status, answer in item[method]["responses"].items()
                if status.startswith("2")
            }
            assert model is not None, f"{method.upper()} {path} has no SDK model"
            assert refs == {MODELS[model]}, f"{method.upper()} {path}"
            checked.append(model)
    assert len(checked) == 11


def test_every_error_code_has_its_exception(schema):
    codes = set(schema["components"]["schemas"]["ErrorBodyCodeEnum"]["enum"])
    assert codes == set(ERROR_CODES)
    assert codes - set(errors.ERRORS) == LEFT_TO_API_ERROR
    assert set(errors.ERRORS) <= codes
    for code, error_class in errors.ERRORS.items():
        assert error_class.code == code


def test_answers_without_an_envelope_get_the_code_of_their_status():
    """A bare 4xx/5xx (a proxy's, say) maps to the code the server would use for it."""
    server_statuses = set(ERROR_CODES.values())
    for status, code in errors.STATUS_CODES.items():
        assert code in errors.ERRORS
        if status in server_statuses:  # not 502 or 504: only a proxy answers those
            assert ERROR_CODES[code] == status, (status, code)


# --- the checks can fail ----------------------------------------------------------------


def _edit(schema: dict[str, Any], component: str, change: Any) -> dict[str, Any]:
    edited = copy.deepcopy(schema)
    change(edited["components"]["schemas"][component])
    return edited


EDITS = {
    "a new field": ("Status", lambda c: c["properties"].update(etaMs={"type": "integer"})),
    "a field removed": ("Breakpoint", lambda c: c["properties"].pop("votes")),
    "required dropped": ("AutoApproval", lambda c: c["required"].remove("reason")),
    "became nullable": ("Status", lambda c: c["properties"]["updatedAt"].update(nullable=True)),
    "another type": ("Event", lambda c: c["properties"].update(actor={"type": "integer"})),
    "another item type": (
        "Breakpoint",
        lambda c: c["properties"]["tags"].update(items={"type": "integer"}),
    ),  # fmt: skip
    "another model": (
        "FeedbackCreated",
        lambda c: c["properties"].update(feedback={"$ref": "#/components/schemas/Expert"}),
    ),  # fmt: skip
    "an enum value added": ("StatusEnum", lambda c: c["enum"].append("paused")),
}
EDITED_MODEL = {
    "Status": sdk.Status,
    "Breakpoint": sdk.Breakpoint,
    "AutoApproval": sdk.AutoApproval,
    "Event": sdk.Event,
    "FeedbackCreated": sdk.FeedbackCreated,
    "StatusEnum": sdk.StatusOnly,
}


@pytest.mark.parametrize("edit", list(EDITS))
def test_drift_is_noticed(edit, schema):
    component, change = EDITS[edit]
    assert drift(EDITED_MODEL[component], _edit(schema, component, change)) != []


def test_an_api_answer_the_sdk_cannot_decode_fails_the_test(monkeypatch, db):
    """The check in tests/conftest.py fails a flow whose answer does not fit the model."""
    agent_client = api_fixtures.bearer_client(token_create_for_agent(agent_id="agent-a")[1])
    response = agent_client.get("/api/breakpoints")
    assert response.status_code == 200  # decoded by BreakpointPage, as it should be
    wrong = [("GET", api_fixtures.SDK_MODELS[0][1], sdk.StatusOnly)]
    monkeypatch.setattr(api_fixtures, "SDK_MODELS", wrong)
    with pytest.raises(
        pytest.fail.Exception, match="StatusOnly cannot decode GET /api/breakpoints"
    ):
        agent_client.get("/api/breakpoints")
