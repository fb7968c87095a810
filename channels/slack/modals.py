"""The "Edit and approve" modal: a breakpoint's form as Slack input blocks, and the values
a submission carries.

Only simple fields fit a modal (breakpoints.answers.answer_form.field_kind): text, a choice of texts,
an integer or a number, a checkbox. A form with anything else (a list, an object, a proposal
without a form), or too many fields, is not rendered: the message offers "Approve as
proposed" and the console instead. Each field is an input block `bpm_value_<index>`, so the
service's problems (keyed by JSON pointer) are answered as `response_action: errors` on it.
"""

from collections.abc import Mapping
from typing import Any

from breakpoints.answers.answer_form import field_kind, form_fields, label_of
from breakpoints.payload.form_schema import FORM_KEY, PROPOSAL_KEY

EDIT_MODAL, VALUE_ACTION, BLOCK_PREFIX = "bpm_edit", "value", "bpm_value_"
SIMPLE_KINDS = frozenset({"text", "choice", "integer", "number", "boolean"})
MAX_FIELDS = 20  # a modal holds 100 blocks; a longer form is the console's
MAX_CHOICES, CHOICE_VALUE_MAX, OPTION_TEXT_MAX = 100, 150, 75
LABEL_MAX, HINT_MAX, TEXT_MAX = 2000, 2000, 3000


def editable_fields(payload: Mapping[str, Any] | None) -> list[tuple[str, Mapping, bool]] | None:
    """(name, schema, required) of each field when the whole form fits a modal, else None."""
    fields = form_fields((payload or {}).get(FORM_KEY))
    if not fields or len(fields) > MAX_FIELDS:
        return None
    for _, schema, _ in fields:
        kind = field_kind(schema)
        if kind not in SIMPLE_KINDS:
            return None
        enum = schema.get("enum") or []
        if kind == "choice" and (
            len(enum) > MAX_CHOICES or any(len(item) > CHOICE_VALUE_MAX for item in enum)
        ):
            return None
    return fields


def block_id(index: int) -> str:
    return f"{BLOCK_PREFIX}{index}"


def _plain(text: Any, limit: int) -> dict[str, str]:
    flat = " ".join(str(text).split()) or "—"
    return {"type": "plain_text", "text": flat if len(flat) <= limit else flat[: limit - 1] + "…"}


def _option(value: str) -> dict[str, Any]:
    return {"text": _plain(value, OPTION_TEXT_MAX), "value": value}


def _element(name: str, schema: Mapping[str, Any], proposed: Any) -> dict[str, Any]:
    """The input element of one field, prefilled with the proposed value when it fits."""
    kind = field_kind(schema)
    element: dict[str, Any] = {"action_id": VALUE_ACTION}
    if kind == "choice":
        element |= {"type": "static_select", "options": [_option(v) for v in schema["enum"]]}
        if proposed in schema["enum"]:
            element["initial_option"] = _option(proposed)
    elif kind == "boolean":
        element |= {"type": "checkboxes", "options": [_option("true")]}
        element["options"][0]["text"] = _plain(label_of(name, schema), OPTION_TEXT_MAX)
        if proposed is True:
            element["initial_options"] = element["options"]
    elif kind in ("integer", "number"):
        element |= {"type": "number_input", "is_decimal_allowed": kind == "number"}
        for keyword, key in (("minimum", "min_value"), ("maximum", "max_value")):
            if isinstance(schema.get(keyword), int | float):
                element[key] = str(schema[keyword])
        if isinstance(proposed, int | float) and not isinstance(proposed, bool):
            element["initial_value"] = str(proposed)
    else:
        length = schema.get("maxLength")
        element |= {"type": "plain_text_input", "max_length": TEXT_MAX}
        if isinstance(length, int) and 0 < length < TEXT_MAX:
            element["max_length"] = length
        if isinstance(proposed, str) and proposed:
            element["initial_value"] = proposed[:TEXT_MAX]
    return element


def field_blocks(payload: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The input blocks of a form that fits a modal (editable_fields), prefilled."""
    proposal = payload.get(PROPOSAL_KEY)
    proposal = proposal if isinstance(proposal, Mapping) else {}
    blocks = []
    for index, (name, schema, required) in enumerate(editable_fields(payload) or []):
        block: dict[str, Any] = {
            "type": "input",
            "block_id": block_id(index),
            "optional": field_kind(schema) == "boolean" or not required,
            "label": _plain(label_of(name, schema), LABEL_MAX),
            "element": _element(name, schema, proposal.get(name)),
        }
        if schema.get("description"):
            block["hint"] = _plain(schema["description"], HINT_MAX)
        blocks.append(block)
    return blocks


def _read(kind: str, entry: Mapping[str, Any]) -> tuple[Any, str | None]:
    """(value, problem) of one submitted input; value None when left empty."""
    if kind == "boolean":
        return bool(entry.get("selected_options")), None
    if kind == "choice":
        selected = entry.get("selected_option")
        return (selected.get("value") if isinstance(selected, Mapping) else None), None
    text = entry.get("value")
    if not isinstance(text, str) or text == "":
        return None, None
    if kind == "text":
        return text, None
    try:
        number = float(text)
        if kind == "integer":
            return (int(number), None) if number.is_integer() else (None, "A whole number.")
        return (int(number) if number.is_integer() else number), None
    except (ValueError, OverflowError):
        return None, "A number."


def submitted_values(
    payload: Mapping[str, Any], state: Any
) -> tuple[dict[str, Any], dict[str, str]]:
    """(values, problems by block id) of a submission: the proposal with each field as the
    reviewer left it (an emptied optional field left out). The service validates the rest."""
    proposal = payload.get(PROPOSAL_KEY)
    values = dict(proposal) if isinstance(proposal, Mapping) else {}
    problems: dict[str, str] = {}
    state = state if isinstance(state, Mapping) else {}
    for index, (name, schema, required) in enumerate(editable_fields(payload) or []):
        block = state.get(block_id(index))
        entry = block.get(VALUE_ACTION) if isinstance(block, Mapping) else None
        value, problem = _read(field_kind(schema), entry if isinstance(entry, Mapping) else {})
        if problem:
            problems[block_id(index)] = problem
        elif value is None:
            values.pop(name, None)
            if required:
                problems[block_id(index)] = "Required."
        else:
            values[name] = value
    return values, problems


def problems_by_block(payload: Mapping[str, Any], details: Mapping[str, Any]) -> dict[str, str]:
    """The service's problems (keyed by JSON pointer: "/replicas") on the blocks of their
    fields; those of no field on the first block."""
    names = {name: block_id(i) for i, (name, _, _) in enumerate(editable_fields(payload) or [])}
    first = block_id(0)
    answer: dict[str, str] = {}
    for pointer, messages in details.items():
        top = str(pointer).split("/")[1] if str(pointer).startswith("/") else ""
        name = top.replace("~1", "/").replace("~0", "~")
        where = names.get(name, first)
        text = " ".join(str(m) for m in messages) if isinstance(messages, list) else str(messages)
        text = text if where != first or name in names else f"{pointer}: {text}".lstrip(": ")
        answer[where] = f"{answer[where]} {text}" if where in answer else text
    return {where: text[:2000] for where, text in answer.items()}
