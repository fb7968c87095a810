"""The request bodies of the sources and triggers API: documented exactly where JSON
Schema can say it (the *_SCHEMA dicts), and checked here before any service (types, NUL,
unknown keys).

triggers.services.config judges the rest (names taken, JMESPath that does not parse,
a rule's params for its action); its details keep the keys used here ("name",
"conditions[1]", "params.selector"). JMESPath and templates are strings no JSON Schema
can tell valid: the schema names their formats ("jmespath", "jmespath-template") for
clients and fuzzers to supply valid ones.
"""

import re
from collections.abc import Mapping
from typing import Any

from rest_framework import serializers

from core.limits import (
    MAX_CONDITIONS,
    MAX_EVENT_TYPE_LENGTH,
    MAX_EXPRESSION_DEPTH,
    MAX_EXPRESSION_FANOUT,
    MAX_EXPRESSION_LENGTH,
    MAX_FUNCTION_NESTING,
    MAX_SOURCE_NAME_LENGTH,
    MAX_TTL_SECONDS,
    MAX_WEBHOOK_SECRET_LENGTH,
)
from core.storable import storable_problem
from triggers.models import SourceKind, TriggerAction
from web.api.fields import StrictBody, StrictBooleanField, StrictCharField, unknown_keys
from web.api.schema import EnvelopedListSchema

# A slug as the services take it; fullmatch (a trailing newline is no slug).
NAME_PATTERN = r"^[a-z0-9]+([-_][a-z0-9]+)*$"
NAME = re.compile(NAME_PATTERN[1:-1])
NAME_PROBLEM = f"Lowercase letters, digits, - and _ (a slug), at most {MAX_SOURCE_NAME_LENGTH}."
MIN_SECRET_LENGTH = 16
NAME_SCHEMA = {"type": "string", "maxLength": MAX_SOURCE_NAME_LENGTH, "pattern": NAME_PATTERN}
TEMPLATE = {
    "type": "string",
    "format": "jmespath-template",
    "maxLength": MAX_EXPRESSION_LENGTH,
    "description": "Text in which each {{ expression }} is replaced by that JMESPath "
    "expression's value over the event's payload.",
}
EXPRESSION = {
    "type": "string",
    "format": "jmespath",
    "minLength": 1,
    "maxLength": MAX_EXPRESSION_LENGTH,
    "description": "A JMESPath expression over the event's payload; it holds when its value "
    f"is not false, null, empty text, [] or {{}}. At most {MAX_EXPRESSION_DEPTH} levels deep, "
    f"{MAX_EXPRESSION_FANOUT} projections, filters, flattens and multi-selects, function "
    f"calls {MAX_FUNCTION_NESTING} deep (a 400 names the limit); when it runs, a budget of "
    "steps per expression and of time per rule and event (past it: the rule's error).",
}
SELECTOR = {
    "type": "object",
    "additionalProperties": False,
    # "At least one, not empty" is said in words and enforced with a 400 (not as anyOf of
    # partial schemas, which generators turn into models that lose these properties).
    "minProperties": 1,
    "description": "Which waiting breakpoints (at most 100, oldest first): all it names must "
    "match; it names at least one of key, runId, agentId (not empty) or tags (not an empty "
    "list), else 400. key is a rule pattern: deploy.*, wait-for-ci(tags contains 'ci').",
    "properties": {
        "key": TEMPLATE,
        "runId": TEMPLATE,
        "agentId": TEMPLATE,
        "tags": {"type": "array", "items": TEMPLATE},
    },
}


def _params(required: list[str], properties: dict[str, Any]) -> dict[str, Any]:
    shape = {"type": "object", "additionalProperties": False, "properties": properties}
    return {**shape, "required": required} if required else shape


PARAMS: dict[str, dict[str, Any]] = {
    TriggerAction.RELEASE: _params(
        ["selector"],
        {
            "selector": SELECTOR,
            "approved": {"type": "boolean", "default": True},
            "feedback": TEMPLATE,
        },
    ),
    TriggerAction.CANCEL: _params(["selector"], {"selector": SELECTOR, "reason": TEMPLATE}),
    TriggerAction.CREATE: _params(
        ["question"],
        {
            "question": {**TEMPLATE, "minLength": 1},
            **{key: TEMPLATE for key in ("title", "expert", "breakpointId", "agentId", "runId")},
            "tags": {"type": "array", "items": TEMPLATE},
            "ttlSeconds": {"type": "integer", "minimum": 1, "maximum": MAX_TTL_SECONDS},
        },
    ),
    TriggerAction.FORWARD: {**_params([], {}), "maxProperties": 0},
}
PARAMS_REQUIRED = {TriggerAction.RELEASE, TriggerAction.CANCEL, TriggerAction.CREATE}


def name_problems(field: str, value: Any) -> dict[str, list[str]]:
    if isinstance(value, str) and not NAME.fullmatch(value):
        return {field: [NAME_PROBLEM]}
    return {}


# --- event sources -------------------------------------------------------------------


class SourceCreateSerializer(StrictBody):
    name = StrictCharField(max_length=MAX_SOURCE_NAME_LENGTH, trim_whitespace=False)
    kind = serializers.ChoiceField(choices=SourceKind.choices)
    secret = StrictCharField(
        required=False,
        trim_whitespace=False,
        min_length=MIN_SECRET_LENGTH,
        max_length=MAX_WEBHOOK_SECRET_LENGTH,
        help_text="Generated when left out. Either way it is in the create answer only.",
    )
    enabled = StrictBooleanField(required=False, default=True)

    def extra_problems(self, data: Mapping, errors: Mapping) -> dict[str, list[str]]:
        return name_problems("name", data.get("name"))


class SourcePatchSerializer(StrictBody):
    enabled = StrictBooleanField(help_text="false pauses the source: its URL answers 404.")


SOURCE_CREATE_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name", "kind"],
    "properties": {
        "name": {**NAME_SCHEMA, "description": "Unique; the source's URL is /api/events/<name>."},
        "kind": {"type": "string", "enum": list(SourceKind.values)},
        "secret": {
            "type": "string",
            "minLength": MIN_SECRET_LENGTH,
            "maxLength": MAX_WEBHOOK_SECRET_LENGTH,
            "description": "Generated when left out. Either way it is in this answer only. "
            "standard-webhooks: a whsec_ secret (base64) or any text.",
        },
        "enabled": {"type": "boolean", "default": True},
    },
}


# --- trigger rules -------------------------------------------------------------------


class TriggerCreateSerializer(StrictBody):
    """As sent: the service validates names, expressions and params (the schema says how)."""

    name = StrictCharField(max_length=MAX_SOURCE_NAME_LENGTH, trim_whitespace=False)
    source = StrictCharField(  # type: ignore[assignment]
        required=False, allow_null=True, max_length=MAX_SOURCE_NAME_LENGTH, trim_whitespace=False
    )
    eventType = StrictCharField(
        required=False, default="*", max_length=MAX_EVENT_TYPE_LENGTH, trim_whitespace=False
    )
    conditions = serializers.JSONField(required=False)
    action = serializers.ChoiceField(choices=TriggerAction.choices)
    params = serializers.JSONField(required=False, default=None)

    def extra_problems(self, data: Mapping, errors: Mapping) -> dict[str, list[str]]:
        errors = name_problems("name", data.get("name"))
        errors.update(name_problems("source", data.get("source")))
        conditions = data.get("conditions", [])
        if not isinstance(conditions, list) or len(conditions) > MAX_CONDITIONS:
            errors["conditions"] = [f"A list of at most {MAX_CONDITIONS} JMESPath expressions."]
        elif problem := storable_problem(conditions):
            errors["conditions"] = [problem]
        if data.get("action") in TriggerAction.values:
            errors.update(params_problems(data["action"], data.get("params")))
        return errors


def params_problems(action: str, params: Any) -> dict[str, list[str]]:
    """What the service lets through but a rule cannot use: keys its action does not
    read, a ttl that is a boolean, NUL anywhere (the service judges the rest)."""
    if params is None:
        required = action in PARAMS_REQUIRED
        return {"params": ["Required for this action."]} if required else {}
    if not isinstance(params, dict):
        return {"params": ["Must be an object."]}
    if problem := storable_problem(params):
        return {"params": [problem]}
    errors = unknown_keys(params, set(PARAMS[action]["properties"]), prefix="params")
    if isinstance(params.get("ttlSeconds"), bool):
        errors["params.ttlSeconds"] = [f"A whole number from 1 to {MAX_TTL_SECONDS}."]
    return errors


def _params_schema() -> dict[str, Any]:
    """Every action's params as one object. Which keys an action takes is said in words and
    refused with a 400, not as a oneOf by action: generators (openapi-python-client) make
    of such branches models without the body's other fields."""
    properties: dict[str, Any] = {}
    for shape in PARAMS.values():
        for key, value in shape["properties"].items():
            # No default: a generated client would send approved: true with every action.
            properties.setdefault(key, {k: v for k, v in value.items() if k != "default"})
    return {
        "type": "object",
        "additionalProperties": False,
        "properties": properties,
        "description": "By action; a key the action does not take is refused with 400. "
        "release: selector (required), approved (default true), feedback; cancel: selector "
        "(required), reason; create: question (required), title, tags, expert, ttlSeconds, "
        "breakpointId, agentId, runId; forward: none (leave params out). Text values are "
        "templates.",
    }


TRIGGER_CREATE_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name", "action"],
    "properties": {
        "name": {**NAME_SCHEMA, "description": "Unique; the rule's URL is /api/triggers/<name>."},
        "source": {
            **NAME_SCHEMA,
            "nullable": True,
            "description": "An existing event source's name; left out or null: any source.",
        },
        "eventType": {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_EVENT_TYPE_LENGTH,
            "default": "*",
            "description": "The event type, or a glob (workflow_run, merge_request*, *).",
        },
        "conditions": {
            "type": "array",
            "maxItems": MAX_CONDITIONS,
            "items": EXPRESSION,
            "description": "Every one must hold: \"workflow_run.conclusion == 'success'\".",
        },
        "action": {"type": "string", "enum": list(TriggerAction.values)},
        "params": _params_schema(),
    },
}


class DryRunSerializer(StrictBody):
    type = StrictCharField(max_length=MAX_EVENT_TYPE_LENGTH, trim_whitespace=False)
    payload = serializers.JSONField()
    source = StrictCharField(  # type: ignore[assignment]
        required=False, allow_null=True, max_length=MAX_SOURCE_NAME_LENGTH, trim_whitespace=False
    )

    def extra_problems(self, data: Mapping, errors: Mapping) -> dict[str, list[str]]:
        payload = data.get("payload")
        if "payload" in data and not isinstance(payload, dict):
            return {"payload": ["Must be an object (the event's JSON body)."]}
        problem = storable_problem(payload) if isinstance(payload, dict) else None
        return {"payload": [problem]} if problem else name_problems("source", data.get("source"))


DRY_RUN_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["type", "payload"],
    "properties": {
        "type": {"type": "string", "minLength": 1, "maxLength": MAX_EVENT_TYPE_LENGTH},
        "payload": {"type": "object", "description": "The event's JSON body."},
        "source": {
            **NAME_SCHEMA,
            "nullable": True,
            "description": "The source it would come from; default: the rule's.",
        },
    },
}


SOURCE_PATCH_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["enabled"],
    "properties": {
        "enabled": {"type": "boolean", "description": "false pauses: its URL answers 404."}
    },
}


def documented(schema: dict[str, Any]) -> dict[str, Any]:
    """An operation's request body as this JSON Schema, inline: spectacular's enum hook
    leaves it be (as a component, its `action` and `kind` enums would be renamed)."""
    return {"application/json": schema}


class BodyRequiredSchema(EnvelopedListSchema):
    """Every body these views take is required (spectacular says so of serializers only,
    not of the inline schemas above); a `list` answers {"results": [...]}."""

    def _get_request_body(self, direction="request"):
        body = super()._get_request_body(direction)
        if body is not None:
            body["required"] = True
        return body
