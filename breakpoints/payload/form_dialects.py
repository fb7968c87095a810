"""A form's JSON Schema dialect: draft-07, 2019-09 and 2020-12 (or none declared) are taken,
and read as 2020-12 once, here, for every check (breakpoints.payload.form_schema).

Most MCP servers (those built on the TypeScript SDK) publish their input schemas as
draft-07; an agent or a gateway copies one into payload.form as it is. What differs is
translated, and only that: `definitions` becomes `$defs` (each `$ref` to it rewritten),
a tuple `items: [...]` becomes `prefixItems` (its `additionalItems` then `items`), and
`dependencies` becomes `dependentRequired` (lists of names) and `dependentSchemas`
(schemas). Under draft-07 a `$ref` replaces its siblings (they are ignored), so only
their annotations are kept. A form without `$schema` is read as 2020-12, with the same
unambiguous translations. The form is stored as sent; the translation is what is checked.
"""

from collections.abc import Mapping
from typing import Any

DIALECT = "https://json-schema.org/draft/2020-12/schema"
DRAFT_2019_09 = "https://json-schema.org/draft/2019-09/schema"
DRAFT_07 = "http://json-schema.org/draft-07/schema"
_DIALECTS = {
    DIALECT: DIALECT,
    DRAFT_2019_09: DRAFT_2019_09,
    DRAFT_07: DRAFT_07,
    "https://json-schema.org/draft-07/schema": DRAFT_07,
}
ACCEPTED = "JSON Schema draft 2020-12, 2019-09 or draft-07"

_ONE_SCHEMA = frozenset(
    {
        "additionalProperties",
        "additionalItems",
        "items",
        "contains",
        "propertyNames",
        "not",
        "if",
        "then",
        "else",
        "unevaluatedItems",
        "unevaluatedProperties",
        "contentSchema",
    }
)
_SCHEMA_LISTS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems", "items"})
_SCHEMA_MAPS = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
)
# What a draft-07 $ref keeps of its siblings: annotations, and the definitions it may hold.
_KEPT_BESIDE_REF = frozenset(
    {"$ref", "$schema", "$id", "$comment", "title", "description", "default", "examples"}
    | {"readOnly", "writeOnly", "deprecated", "definitions", "$defs"}
)
_OLD_DEFS_PREFIX = "#/definitions/"


def dialect_of(form: Mapping[str, Any]) -> str | None:
    """The dialect `form` declares (2020-12 when it declares none), or None when it is not
    one of those accepted."""
    declared = form.get("$schema", DIALECT)
    if not isinstance(declared, str):
        return None
    return _DIALECTS.get(declared.removesuffix("#"))


def as_2020_12(form: Mapping[str, Any]) -> Mapping[str, Any]:
    """`form` read as JSON Schema 2020-12 (itself when nothing needs translating); its
    dialect is one dialect_of accepts."""
    dialect = dialect_of(form) or DIALECT
    if dialect == DIALECT and not _has_old_keywords(form):
        return form
    translated = _translated(form, draft_07=dialect == DRAFT_07)
    translated["$schema"] = DIALECT
    return translated


def _has_old_keywords(form: Mapping[str, Any]) -> bool:
    """Whether a form read as 2020-12 holds what only an older draft means."""
    pending: list[Any] = [form]
    while pending:
        node = pending.pop()
        if isinstance(node, list):
            pending.extend(node)
        elif isinstance(node, Mapping):
            if "definitions" in node or "dependencies" in node:
                return True
            if isinstance(node.get("items"), list):
                return True
            pending.extend(value for key, value in node.items() if key not in _DATA)
    return False


_DATA = frozenset({"enum", "const", "default", "examples"})


def _translated(node: Any, *, draft_07: bool) -> Any:
    """A schema (and every schema inside it) with the older keywords as 2020-12's."""
    if not isinstance(node, Mapping):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _SCHEMA_MAPS and isinstance(value, Mapping):
            out[key] = {name: _translated(item, draft_07=draft_07) for name, item in value.items()}
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = [_translated(item, draft_07=draft_07) for item in value]
        elif key in _ONE_SCHEMA:
            out[key] = _translated(value, draft_07=draft_07)
        elif key == "dependencies" and isinstance(value, Mapping):
            out[key] = {name: _translated(item, draft_07=draft_07) for name, item in value.items()}
        else:
            out[key] = value
    if draft_07 and "$ref" in out:
        out = {key: value for key, value in out.items() if key in _KEPT_BESIDE_REF}
    _rename_definitions(out)
    _tuple_items(out)
    _split_dependencies(out)
    return out


def _rename_definitions(schema: dict[str, Any]) -> None:
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith(_OLD_DEFS_PREFIX):
        schema["$ref"] = "#/$defs/" + ref.removeprefix(_OLD_DEFS_PREFIX)
    if "definitions" in schema and "$defs" not in schema:
        schema["$defs"] = schema.pop("definitions")


def _tuple_items(schema: dict[str, Any]) -> None:
    """`items: [...]` (a schema per position) is 2020-12's `prefixItems`, and the schema of
    the items after them, `additionalItems`, its `items`."""
    if not isinstance(schema.get("items"), list) or "prefixItems" in schema:
        return
    schema["prefixItems"] = schema.pop("items")
    if "additionalItems" in schema:
        schema["items"] = schema.pop("additionalItems")


def _split_dependencies(schema: dict[str, Any]) -> None:
    """`dependencies`: a list of names is `dependentRequired`, a schema `dependentSchemas`."""
    dependencies = schema.get("dependencies")
    if not isinstance(dependencies, Mapping):
        return
    del schema["dependencies"]
    required = {name: value for name, value in dependencies.items() if isinstance(value, list)}
    schemas = {name: value for name, value in dependencies.items() if name not in required}
    for keyword, moved in (("dependentRequired", required), ("dependentSchemas", schemas)):
        present = schema.get(keyword, {})
        if moved and isinstance(present, Mapping):  # else check_schema names what is wrong
            schema[keyword] = {**moved, **present}
