"""Forms an agent declares (payload.form, a JSON Schema) and the values that answer them.

`payload.form` is a JSON Schema (draft 2020-12) of `type: object` describing the answer;
`payload.proposal` is the object of values the agent proposes. Either may come alone
(a proposal without a form is any JSON object). A reviewer's release may carry `values`:
validated against the form here, for every channel (breakpoints.services.decisions).

A schema comes from an agent, so it is bounded and defused before it is used: its size
and depth, `$ref` only to the form's own `$defs` (nothing is ever fetched: the registry
refuses retrieval), no `patternProperties`, and each `pattern` short, without nested
repetition or back-references, matched only against bounded texts. `format` is an
annotation, not asserted. jsonschema validates; nothing here re-implements it.
"""

import json
import re
import re._constants as sre_constants  # type: ignore[import-not-found]
import re._parser as sre_parse  # type: ignore[import-not-found]
from collections.abc import Iterator, Mapping
from typing import Any

from jsonschema import Draft202012Validator, ValidationError, validators
from jsonschema.exceptions import SchemaError
from referencing import Registry
from referencing.exceptions import NoSuchResource, Unresolvable

from core import limits
from core.digests import NotDigestible, values_digest
from core.exceptions import InvalidInput
from core.ijson import answer_number_problems
from core.storable import storable_problem

FORM_KEY = "form"
PROPOSAL_KEY = "proposal"
DIALECT = "https://json-schema.org/draft/2020-12/schema"

# Keywords whose value is a map of names to schemas (a property named "pattern" is no
# pattern), and those whose value is data, never a schema.
_SCHEMA_MAPS = frozenset({"properties", "$defs", "dependentSchemas"})
_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples"})
_REFUSED_KEYWORDS = {
    "patternProperties": "Not supported in a form: name the fields in properties.",
    "$dynamicRef": "Not supported in a form: use $ref to the form's own $defs.",
    "$dynamicAnchor": "Not supported in a form.",
    "$anchor": "Not supported in a form: use $ref to the form's own $defs.",
}
_REF = re.compile(r"^#(?:/\$defs/[^/~]+)?$")
_REPEATS = frozenset(
    {sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT, sre_constants.POSSESSIVE_REPEAT}
)
_MESSAGE_LENGTH = 300


def _no_retrieval(uri: str) -> Any:
    """A form's $ref never leaves the form: no URL is fetched, whatever it names."""
    raise NoSuchResource(ref=uri)  # type: ignore[call-arg]  # attrs builds its __init__


REGISTRY: Registry = Registry(retrieve=_no_retrieval)  # type: ignore[call-arg]


def _bounded_pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator:
    """The `pattern` keyword, on texts of at most MAX_PATTERN_SUBJECT_LENGTH characters."""
    if not validator.is_type(instance, "string"):
        return
    if len(instance) > limits.MAX_PATTERN_SUBJECT_LENGTH:
        yield ValidationError(
            f"At most {limits.MAX_PATTERN_SUBJECT_LENGTH} characters for a field with a pattern."
        )
    elif not re.search(pattern, instance):
        yield ValidationError(f"Does not match the pattern {pattern!r}.")


FormValidator = validators.extend(Draft202012Validator, {"pattern": _bounded_pattern})


# --- the schema ------------------------------------------------------------------------


def _shape(document: Any) -> tuple[int, int]:
    """(depth, values in all) of a JSON document, walked level by level (no recursion)."""
    level, depth, count = [document], 0, 0
    while level:
        depth += 1
        below: list[Any] = []
        for item in level:
            children = item.values() if isinstance(item, Mapping) else item
            for child in children:
                count += 1
                if isinstance(child, Mapping | list):
                    below.append(child)
        level = below
    return depth, count


def _size(document: Any) -> int:
    return len(json.dumps(document, separators=(",", ":"), ensure_ascii=False))


def _schemas(form: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every object of the form that may act as a schema, with its JSON pointer."""
    stack: list[tuple[str, Any]] = [("", form)]
    while stack:
        at, node = stack.pop()
        if isinstance(node, list):
            stack.extend((f"{at}/{index}", item) for index, item in enumerate(node))
            continue
        if not isinstance(node, Mapping):
            continue
        yield at, node
        for keyword, value in node.items():
            where = f"{at}/{_escape(str(keyword))}"
            if keyword in _SCHEMA_MAPS and isinstance(value, Mapping):
                stack.extend((f"{where}/{_escape(str(k))}", v) for k, v in value.items())
            elif keyword not in _DATA_KEYWORDS:
                stack.append((where, value))


def pattern_problem(pattern: str) -> str | None:
    """Why a `pattern` could take too long (or is no pattern at all), or None."""
    if len(pattern) > limits.MAX_FORM_PATTERN_LENGTH:
        return f"At most {limits.MAX_FORM_PATTERN_LENGTH} characters."
    try:
        tree = sre_parse.parse(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        return f"Not a regular expression: {exc}."
    unbounded = 0
    stack: list[tuple[Any, bool]] = [(tree, False)]
    while stack:
        items, repeated = stack.pop()
        for op, argument in items:
            if op in (sre_constants.GROUPREF, sre_constants.GROUPREF_EXISTS):
                return "Back-references are not supported."
            if op in _REPEATS:
                low, high, body = argument
                many = high == sre_constants.MAXREPEAT or high > 1
                if many and repeated:
                    return "Repetition inside a repetition could take too long to match."
                unbounded += high == sre_constants.MAXREPEAT or high > 100
                stack.append((body, repeated or many))
            elif op == sre_constants.BRANCH:
                if repeated:
                    return "Alternatives inside a repetition could take too long to match."
                stack.extend((branch, repeated) for branch in argument[1])
            elif op == sre_constants.SUBPATTERN:
                stack.append((argument[-1], repeated))
            elif op in (sre_constants.ASSERT, sre_constants.ASSERT_NOT):
                stack.append((argument[-1], repeated))
            elif op == sre_constants.ATOMIC_GROUP:
                stack.append((argument, repeated))
    if unbounded > limits.MAX_PATTERN_REPEATS:
        return f"At most {limits.MAX_PATTERN_REPEATS} unbounded repetitions (*, +, {{n,}})."
    return None


def _node_problems(at: str, node: Mapping[str, Any], defs: Mapping[str, Any]) -> Iterator[str]:
    for keyword, reason in _REFUSED_KEYWORDS.items():
        if keyword in node:
            yield f"{at}/{_escape(keyword)}: {reason}"
    if "$id" in node and at:
        yield f"{at}/$id: Only the form itself may have an $id."
    ref = node.get("$ref")
    if ref is not None:
        if not isinstance(ref, str) or not _REF.match(ref):
            yield f"{at}/$ref: Must be '#' or '#/$defs/<name>': a form refers only to itself."
        elif ref != "#" and ref.removeprefix("#/$defs/") not in defs:
            yield f"{at}/$ref: The form's $defs has no {ref.removeprefix('#/$defs/')!r}."
    pattern = node.get("pattern")
    if isinstance(pattern, str) and (problem := pattern_problem(pattern)):
        yield f"{at}/pattern: {problem}"


def form_problems(form: Any) -> list[str]:
    """Why `form` cannot be a form (each problem with the JSON pointer of where), or []."""
    if not isinstance(form, Mapping):
        return ["Must be a JSON Schema: an object with type: object."]
    if _size(form) > limits.MAX_FORM_BYTES:
        return [f"At most {limits.MAX_FORM_BYTES:,} bytes of JSON."]
    if _shape(form)[0] > limits.MAX_FORM_DEPTH:
        return [f"Must not be nested more than {limits.MAX_FORM_DEPTH} levels deep."]
    if form.get("$schema", DIALECT) != DIALECT:
        return [f"$schema: Only JSON Schema draft 2020-12 ({DIALECT})."]
    if form.get("type") != "object":
        return ["type: Must be 'object' (the answer is an object of named fields)."]
    found = form.get("$defs")
    defs: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    problems = [
        problem for at, node in _schemas(form) for problem in _node_problems(at, node, defs)
    ]
    if problems:
        return problems[: limits.MAX_FORM_PROBLEMS]
    try:
        Draft202012Validator.check_schema(form)
    except SchemaError as exc:
        where = "/" + "/".join(_escape(str(part)) for part in exc.absolute_path)
        return [f"{where if where != '/' else ''}: {_short(exc.message)}".lstrip(": ")]
    return []


# --- values ----------------------------------------------------------------------------


def _escape(part: str) -> str:
    return part.replace("~", "~0").replace("/", "~1")


def _short(message: str) -> str:
    return message if len(message) <= _MESSAGE_LENGTH else message[: _MESSAGE_LENGTH - 1] + "…"


def _pointer(error: ValidationError) -> str:
    return "".join(f"/{_escape(str(part))}" for part in error.absolute_path)


def _error_entries(error: ValidationError) -> Iterator[tuple[str, str]]:
    """(JSON pointer, message) for one error: a missing or unexpected field at its own
    pointer, so a form shows the problem on the field."""
    at = _pointer(error)
    instance = error.instance if isinstance(error.instance, Mapping) else {}
    if error.validator == "required" and isinstance(error.validator_value, list):
        for name in error.validator_value:
            if isinstance(name, str) and name not in instance:
                yield f"{at}/{_escape(name)}", "Required."
        return
    if error.validator == "additionalProperties" and error.validator_value is False:
        known = error.schema.get("properties", {}) if isinstance(error.schema, Mapping) else {}
        for name in instance:
            if name not in known:
                yield f"{at}/{_escape(str(name))}", "Not a field of this form."
        return
    yield at, _short(error.message)


def values_problems(form: Mapping[str, Any], values: Any) -> dict[str, list[str]]:
    """Each problem of `values` against `form`, keyed by the JSON pointer of its field
    (`/replicas`; "" for the whole answer). Empty when they answer the form."""
    validator = FormValidator(form, registry=REGISTRY)
    problems: dict[str, list[str]] = {}
    try:
        for error in validator.iter_errors(values):
            for at, message in _error_entries(error):
                if message not in problems.setdefault(at, []):
                    problems[at].append(message)
            if len(problems) >= limits.MAX_FORM_PROBLEMS:
                break
    except RecursionError:
        return {"": ["The form refers to itself without end: it cannot check an answer."]}
    except Unresolvable as exc:
        return {"": [f"The form refers to what it does not hold: {exc}."]}
    return problems


def values_shape_problem(values: Any) -> str | None:
    """Why `values` cannot be an answer whatever the form (not an object, too large, too
    deep, text a database cannot store, numbers that are not I-JSON), or None."""
    if not isinstance(values, Mapping):
        return "Must be an object."
    if _size(values) > limits.MAX_VALUES_BYTES:
        return f"At most {limits.MAX_VALUES_BYTES:,} bytes of JSON."
    depth, count = _shape(values)
    if depth > limits.MAX_VALUES_DEPTH:
        return f"Must not be nested more than {limits.MAX_VALUES_DEPTH} levels deep."
    if count > limits.MAX_VALUES_COUNT:
        return f"At most {limits.MAX_VALUES_COUNT:,} values in all."
    if problem := storable_problem(values):
        return problem
    numbers = answer_number_problems(values, "values")
    return next(iter(numbers.values()))[0] if numbers else None


# --- the payload, at creation ----------------------------------------------------------


def check_form_payload(errors: dict[str, list[str]], payload: Mapping[str, Any]) -> None:
    """payload.form and payload.proposal: the schema sound and bounded, the proposal an
    answer to it (each problem keyed payload.proposal/<pointer>)."""
    form, proposal = payload.get(FORM_KEY), payload.get(PROPOSAL_KEY)
    form_ok = True
    if form is not None and (problems := form_problems(form)):
        errors["payload.form"] = problems
        form_ok = False
    if proposal is None:
        return
    if problem := values_shape_problem(proposal):
        errors["payload.proposal"] = [problem]
    elif form is not None and form_ok:
        for at, messages in values_problems(form, proposal).items():
            errors[f"payload.proposal{at}"] = messages


def has_form(payload: Mapping[str, Any] | None) -> bool:
    """Whether the agent asked for an answer: a form, a proposal, or both."""
    payload = payload or {}
    return payload.get(FORM_KEY) is not None or payload.get(PROPOSAL_KEY) is not None


def as_proposed(payload: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The values an approval without values gives: the proposal, else the empty answer
    when there is a form (it may not satisfy it: needs_answer), else None (no form)."""
    payload = payload or {}
    proposal = payload.get(PROPOSAL_KEY)
    if proposal is not None:
        return dict(proposal)
    return {} if payload.get(FORM_KEY) is not None else None


def needs_answer(payload: Mapping[str, Any] | None) -> bool:
    """Whether only a person can answer it: a form with required fields (one the empty
    answer does not satisfy) and no proposal. No automatic approval releases such a
    breakpoint (policies.answers says what that forbids); this decides which ones."""
    payload = payload or {}
    form = payload.get(FORM_KEY)
    if form is None or payload.get(PROPOSAL_KEY) is not None:
        return False
    return bool(values_problems(form, {}))


# --- a release's values ----------------------------------------------------------------

NEEDS_VALUES = "Its form has required fields and no proposal: send values that fill them in."


def release_values(
    payload: Mapping[str, Any] | None, *, values: Any, release: bool, approved: bool
) -> dict[str, Any] | None:
    """The values a release answers with, or raise InvalidInput (400) naming each problem.

    Approving without values approves the proposal as it is (the empty answer with a form
    and no proposal, refused when the form requires fields). Values come only with an
    approving release of a breakpoint that has a form or a proposal; a rejection and a
    comment carry none. Each problem is keyed by the JSON pointer of its field.
    """
    if values is None:
        if not (release and approved):
            return None
        answer = as_proposed(payload)
        if answer is not None and (payload or {}).get(PROPOSAL_KEY) is None:
            if problems := values_problems((payload or {})[FORM_KEY], answer):
                raise InvalidInput(NEEDS_VALUES, problems)
        return answer
    refusal = _values_refusal(payload, release=release, approved=approved)
    if refusal is not None:
        raise InvalidInput(refusal, {"values": [refusal]})
    if problem := values_shape_problem(values):
        # A number is named by its JSON path too (values.amount).
        details = {"values": [problem], **answer_number_problems(values, "values")}
        raise InvalidInput(f"values: {problem}", details)
    form = (payload or {}).get(FORM_KEY)
    if form is not None and (problems := values_problems(form, values)):
        first_at, first = next(iter(problems.items()))
        raise InvalidInput(f"values{first_at}: {first[0]}", problems)
    return dict(values)


def _values_refusal(
    payload: Mapping[str, Any] | None, *, release: bool, approved: bool
) -> str | None:
    if not has_form(payload):
        return "This breakpoint has no form or proposal: it takes no values."
    if not release:
        return "values come with a release (release: true), not with a comment."
    if not approved:
        return "A rejection carries no values."
    return None


def edited(values: Any, proposal: Any) -> bool:
    """Whether approved values differ from the proposal, as JSON (1 and 1.0 alike, true
    and 1 not). A proposal no digest covers (stored before the doors refused its numbers)
    differs from any values that have one."""
    if values is None:
        return False
    try:
        return values_digest(values) != values_digest(proposal)
    except NotDigestible:
        return True
