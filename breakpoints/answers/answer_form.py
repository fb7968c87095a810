"""The answer to a breakpoint's form, as the console's review page and the email decision
page show it: fields built from payload.form, prefilled with payload.proposal. Slack's
modal reads the same kinds (field_kind, form_fields).

Each top-level property is one field: labelled with its `title` (else its name), its
`description` as help text; an enum is a select, a boolean a checkbox, an integer or a
number an input with the schema's bounds, an array of strings one item per line, text a
text input (a text area when the proposed text has lines or is long); anything else (an
object, a mixed array) a JSON editor. A proposal without a form is one JSON editor. The
service validates the answer (breakpoints.payload.form_schema); its problems, keyed by JSON pointer, are
shown on the fields. Labels and help text come from the agent: Django escapes them like
any other text.
"""

import json
from collections.abc import Mapping
from typing import Any

from django import forms

from breakpoints.payload.form_schema import FORM_KEY, PROPOSAL_KEY, has_form

PREFIX = "value__"
WHOLE = "values_json"  # the JSON editor of a proposal without a form
MAX_SELECT_CHOICES = 200
LONG_TEXT_CHARS = 80  # a proposed text longer than this is edited in a text area
MAX_TEXT_ROWS = 16
# A phone's keyboard leaves the agent's values as typed: no capital letter at the start, no
# "correction" of a path or an identifier.
VERBATIM = {"autocapitalize": "off", "autocorrect": "off", "spellcheck": "false"}


class JSONField(forms.CharField):
    """Any JSON value, edited as text."""

    widget = forms.Textarea(attrs={"rows": 4, "class": "bpm-json"})

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, str) and self.initial is not value:
            return value
        return json.dumps(value, indent=2, ensure_ascii=False) if value is not None else ""

    def to_python(self, value: Any) -> Any:
        text = super().to_python(value)
        if not text:
            return None
        try:
            return json.loads(text)
        except ValueError as exc:
            raise forms.ValidationError(f"Not JSON: {exc}") from exc


class TextField(forms.CharField):
    """A text property: one line, or a text area when the proposed text has lines or is
    long. A browser sends a text area's line breaks as CRLF; they are read back as "\n"
    unless the proposal itself has CRLF, so a text approved as shown is not an edit."""

    def __init__(self, *, proposed: Any = None, **kwargs: Any) -> None:
        text = proposed if isinstance(proposed, str) else ""
        if "\n" in text or len(text) > LONG_TEXT_CHARS:
            rows = min(max(text.count("\n") + 2, 3), MAX_TEXT_ROWS)
            kwargs["widget"] = forms.Textarea(attrs={"rows": rows, "class": "bpm-text"})
        self.keeps_crlf = "\r\n" in text
        super().__init__(strip=False, **kwargs)

    def to_python(self, value: Any) -> Any:
        text = super().to_python(value)
        if isinstance(text, str) and not self.keeps_crlf:
            return text.replace("\r\n", "\n")
        return text


class LinesField(forms.CharField):
    """An array of strings, one per line."""

    widget = forms.Textarea(attrs={"rows": 3})

    def prepare_value(self, value: Any) -> Any:
        return "\n".join(str(item) for item in value) if isinstance(value, list) else value

    def to_python(self, value: Any) -> Any:
        text = super().to_python(value) or ""
        return [line.strip() for line in text.splitlines() if line.strip()]


def field_kind(schema: Mapping[str, Any]) -> str:
    """How a property is answered: choice (an enum of texts), boolean, integer, number,
    text, lines (an array of texts) or json (whatever a form field cannot show)."""
    kind, enum = schema.get("type"), schema.get("enum")
    if isinstance(enum, list) and 0 < len(enum) <= MAX_SELECT_CHOICES:
        if all(isinstance(item, str) for item in enum):
            return "choice"
    if kind in ("boolean", "integer", "number"):
        return str(kind)
    if kind == "string" and enum is None:
        return "text"
    items = schema.get("items")
    if kind == "array" and isinstance(items, Mapping) and items.get("type") == "string":
        return "lines"
    return "json"


def form_fields(form: Any) -> list[tuple[str, Mapping[str, Any], bool]]:
    """(name, schema, required) of each top-level property of a form: the required ones
    first, in the order of `required`, then the others by name.

    Not the order of `properties`: PostgreSQL's jsonb keeps an object's keys in an order of
    its own, so every page and channel would show the fields differently on SQLite and
    PostgreSQL. An array keeps its order everywhere."""
    if not isinstance(form, Mapping):
        return []
    properties = form.get("properties")
    if not isinstance(properties, Mapping):
        return []
    listed = form.get("required")
    if not isinstance(listed, list):
        listed = []
    names = dict.fromkeys(name for name in listed if isinstance(name, str))
    required = [name for name in names if name in properties]
    others = sorted(str(name) for name in properties if name not in set(required))
    return [
        (str(name), _schema(properties[name]), index < len(required))
        for index, name in enumerate([*required, *others])
    ]


def _schema(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def label_of(name: str, schema: Mapping[str, Any]) -> str:
    return str(schema.get("title") or name)


def _field(schema: Mapping[str, Any], required: bool, proposed: Any) -> forms.Field:
    """The form field of one property's schema (`proposed`: its proposed value)."""
    kind = field_kind(schema)
    field = _field_of(kind, schema, required, proposed)
    field.widget.attrs.update(_keyboard(kind, schema))
    return field


def _keyboard(kind: str, schema: Mapping[str, Any]) -> dict[str, str]:
    """What a phone's keyboard offers for a field: text as typed; digits alone for a number
    that cannot be negative (a keypad without a minus sign)."""
    if kind in ("text", "lines", "json"):
        return VERBATIM
    low = schema.get("minimum")
    if kind in ("integer", "number") and isinstance(low, int | float) and low >= 0:
        return {"inputmode": "numeric" if kind == "integer" else "decimal"}
    return {}


def _field_of(kind: str, schema: Mapping[str, Any], required: bool, proposed: Any) -> forms.Field:
    if kind == "choice":
        enum = schema["enum"]
        choices = [("", "—")] * (not required) + [(item, item) for item in enum]
        return forms.ChoiceField(choices=choices, required=required)
    if kind == "boolean":
        return forms.BooleanField(required=False)
    low, high = schema.get("minimum"), schema.get("maximum")
    if kind == "integer":
        return forms.IntegerField(required=required, min_value=low, max_value=high)
    if kind == "number":
        return forms.FloatField(required=required, min_value=low, max_value=high)
    if kind == "text":
        return TextField(required=required, max_length=schema.get("maxLength"), proposed=proposed)
    if kind == "lines":
        return LinesField(required=required)
    return JSONField(required=required)


class AnswerForm(forms.Form):
    """The answer's fields for a breakpoint's payload (see the module's docstring)."""

    def __init__(self, *args: Any, payload: Mapping[str, Any], **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.form_schema = payload.get(FORM_KEY)
        self.proposal = payload.get(PROPOSAL_KEY)
        self.names: dict[str, str] = {}  # field name -> property name
        if not isinstance(self.form_schema, Mapping):
            self.fields[WHOLE] = JSONField(required=True, label="Values (JSON)")
            self.fields[WHOLE].widget.attrs.update(VERBATIM)
            self.fields[WHOLE].initial = self.proposal
            return
        proposal = self.proposal if isinstance(self.proposal, Mapping) else {}
        for name, schema, required in form_fields(self.form_schema):
            field = _field(schema, required, proposal.get(name))
            field.label = label_of(name, schema)
            field.help_text = str(schema.get("description") or "")
            if name in proposal:
                field.initial = proposal[name]
            self.fields[PREFIX + name] = field
            self.names[PREFIX + name] = name

    def values(self) -> dict[str, Any]:
        """The answer, from valid data: a field left empty (and not required) is left out."""
        if WHOLE in self.fields:
            whole = self.cleaned_data.get(WHOLE)
            return whole if isinstance(whole, dict) else {}
        answer: dict[str, Any] = {}
        for field_name, name in self.names.items():
            value = self.cleaned_data.get(field_name)
            kept = isinstance(self.proposal, Mapping) and name in self.proposal
            if value in (None, "", []) and not self.fields[field_name].required and not kept:
                continue
            answer[name] = value
        return answer

    def show_problems(self, problems: Mapping[str, list[str]]) -> None:
        """The service's problems (keyed by JSON pointer) on the fields they name."""
        for pointer, messages in problems.items():
            top = pointer.split("/")[1] if pointer.startswith("/") else ""
            name = top.replace("~1", "/").replace("~0", "~")
            field = WHOLE if WHOLE in self.fields else PREFIX + name
            where = field if field in self.fields else None
            for message in messages:
                self.add_error(
                    where, f"{pointer}: {message}" if where != PREFIX + name else message
                )

    @property
    def labels(self) -> dict[str, str]:
        """Each property's label (its `title`, else its name), in the form's order."""
        return {name: str(self.fields[field].label) for field, name in self.names.items()}


def answer_form(payload: Mapping[str, Any], data: Any = None) -> AnswerForm | None:
    """The answer form of a breakpoint that has a form or a proposal, else None."""
    if not has_form(payload):
        return None
    return AnswerForm(data, payload=payload)
