"""Forms an agent declares (payload.form, a JSON Schema) and the values that answer them.

`payload.form` is a JSON Schema (draft 2020-12, 2019-09 or draft-07, read as 2020-12 by
breakpoints.payload.form_dialects) of `type: object` describing the answer;
`payload.proposal` is the object of values the agent proposes. Either may come alone
(a proposal without a form is any JSON object). A reviewer's release may carry `values`:
validated against the form here, for every channel (breakpoints.services.decisions).

A schema comes from an agent, so it is bounded and defused before it is used: its size
and depth, `$ref` only to the form's own `$defs` (nothing is ever fetched: the registry
refuses retrieval), no `patternProperties`, and a `$ref`/`allOf`/`anyOf`/`oneOf` graph
whose expansion stays small (expansion_problem: a schema applying itself twice at each
level would double the work at each level of an answer). Each `pattern` is short, compiled
and matched by RE2 (linear time, whatever the pattern: what RE2 cannot compile, such as a
back-reference or a lookaround, is refused), on bounded texts. Checking values against a
form spends a Budget (BPM_FORM_VALIDATION_STEPS steps, BPM_FORM_VALIDATION_SECONDS as a
backstop) and stops past it, as trigger rules' expressions do. `format` is an annotation,
not asserted. jsonschema validates; nothing here re-implements it.
"""

import copy
import functools
import json
import re
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import re2
from django.conf import settings
from jsonschema import Draft202012Validator, ValidationError, validators
from jsonschema.exceptions import SchemaError
from referencing import Registry
from referencing.exceptions import NoSuchResource, Unresolvable

from breakpoints.payload.form_dialects import ACCEPTED, DIALECT, DRAFT_07, as_2020_12, dialect_of
from breakpoints.payload.form_expansion import expansion_problem
from core import limits
from core.digests import NotDigestible, values_digest
from core.exceptions import InvalidInput
from core.ijson import answer_number_problems
from core.storable import storable_problem

FORM_KEY = "form"
PROPOSAL_KEY = "proposal"

# Keywords whose value is a map of names to schemas (a property named "pattern" is no
# pattern), and those whose value is data, never a schema.
_SCHEMA_MAPS = frozenset({"properties", "$defs", "dependentSchemas"})
_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples"})
_REFUSED_KEYWORDS = {
    "patternProperties": "Not supported in a form: name the fields in properties.",
    "$dynamicRef": "Not supported in a form: use $ref to the form's own $defs.",
    "$dynamicAnchor": "Not supported in a form.",
    "$anchor": "Not supported in a form: use $ref to the form's own $defs.",
    "$recursiveRef": "Not supported in a form: use $ref to the form's own $defs.",
    "$recursiveAnchor": "Not supported in a form.",
}
_REF = re.compile(r"^#(?:/\$defs/[^/~]+)?$")
_MESSAGE_LENGTH = 300


# RE2 compiles and matches every pattern: its time is linear in the text, whatever the
# pattern (Python's `re` backtracks: six `a{0,99}` against 100 a and a b took seconds).
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False
# ECMA-262's \uXXXX (JSON Schema's pattern dialect) is RE2's \x{XXXX}.
_ECMA_UNICODE_ESCAPE = re.compile(r"\\(?:\\|u([0-9A-Fa-f]{4}))")
# How many characters of a text matched against a pattern cost a step.
CHARACTERS_PER_STEP = 16
# How often (in steps) the clock is read.
STEPS_PER_CLOCK_READ = 100
# The clock the time budget reads (monotonic; a test may put a counting one in its place).
clock: Callable[[], float] = time.monotonic


def _no_retrieval(uri: str) -> Any:
    """A form's $ref never leaves the form: no URL is fetched, whatever it names."""
    raise NoSuchResource(ref=uri)  # type: ignore[call-arg]  # attrs builds its __init__


REGISTRY: Registry = Registry(retrieve=_no_retrieval)  # type: ignore[call-arg]


# --- patterns --------------------------------------------------------------------------


def _as_re2(pattern: str) -> str:
    """The pattern in RE2's syntax: ECMA-262's \\uXXXX written \\x{XXXX}, the rest as is."""
    return _ECMA_UNICODE_ESCAPE.sub(
        lambda found: f"\\x{{{found[1]}}}" if found[1] else found[0], pattern
    )


@functools.lru_cache(maxsize=512)
def compiled_pattern(pattern: str) -> Any:
    """The pattern compiled by RE2 (re2.error when RE2 cannot compile it)."""
    return re2.compile(_as_re2(pattern), _RE2_OPTIONS)


def _re2_reason(exc: Exception) -> str:
    reason = exc.args[0] if exc.args else exc
    return reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason)


def pattern_problem(pattern: str) -> str | None:
    """Why a `pattern` cannot be matched in linear time (RE2 cannot compile it: a
    back-reference, a lookaround...), is too long, or is no pattern at all; or None."""
    if len(pattern) > limits.MAX_FORM_PATTERN_LENGTH:
        return f"At most {limits.MAX_FORM_PATTERN_LENGTH} characters."
    try:
        compiled_pattern(pattern)
    except re2.error as exc:
        return (
            f"Not a pattern RE2 can match ({_re2_reason(exc)}). RE2 matches in linear time: "
            "it has no back-references and no lookarounds (?=, ?!, ?<=, ?<!)."
        )
    return None


def _is_re2_pattern(instance: object) -> bool:
    """The metaschema's `format: regex`, as the form's patterns are matched: by RE2."""
    return not isinstance(instance, str) or pattern_problem(instance) is None


# check_schema asserts the metaschema's formats; a `regex` is one RE2 compiles (Python's
# `re` would refuse RE2's \x{41} and \p{L}, and accept look-arounds RE2 cannot match).
_SCHEMA_FORMATS = copy.deepcopy(Draft202012Validator.FORMAT_CHECKER)
_SCHEMA_FORMATS.checkers["regex"] = (_is_re2_pattern, ())


# --- the budget ------------------------------------------------------------------------


class OverBudget(Exception):
    """Checking values against a form went past its Budget; the message says which part."""


class Budget:
    """What checking one answer against one form may spend: a step per keyword applied
    (and per CHARACTERS_PER_STEP characters a pattern reads), at most `steps`, and
    `seconds` from now. `spent` says how many steps it took."""

    def __init__(self, *, steps: int | None = None, seconds: float | None = None) -> None:
        self.steps = settings.BPM_FORM_VALIDATION_STEPS if steps is None else steps
        self.seconds = settings.BPM_FORM_VALIDATION_SECONDS if seconds is None else seconds
        self.deadline = clock() + self.seconds
        self.spent = 0
        self.until_clock = STEPS_PER_CLOCK_READ
        # Where it stopped: the value and the schema being checked.
        self.stopped_at: tuple[Any, Any] | None = None

    def spend(self, steps: int, instance: Any, schema: Any) -> None:
        if self.spent + steps > self.steps:
            self.stopped_at = (instance, schema)
            raise OverBudget(
                f"Stopped after {self.steps:,} steps (BPM_FORM_VALIDATION_STEPS): this form "
                "costs too much to check against this answer."
            )
        self.spent += steps
        self.until_clock -= steps
        if self.until_clock <= 0:
            self.until_clock = STEPS_PER_CLOCK_READ
            if clock() > self.deadline:
                self.stopped_at = (instance, schema)
                raise OverBudget(
                    f"Stopped after {self.seconds:g} s (BPM_FORM_VALIDATION_SECONDS): this "
                    "form costs too much to check against this answer."
                )


_BUDGET: ContextVar[Budget | None] = ContextVar("form_validation_budget", default=None)
_RECORDED: ContextVar[list[Budget] | None] = ContextVar("form_budgets_recorded", default=None)


@contextmanager
def budgets_recorded() -> Iterator[list[Budget]]:
    """Every Budget a form validation spends in this context, in order (for tests and
    benchmarks: how many steps each check took, through whatever channel asked)."""
    recorded: list[Budget] = []
    token = _RECORDED.set(recorded)
    try:
        yield recorded
    finally:
        _RECORDED.reset(token)


def _spend(steps: int, instance: Any, schema: Any) -> None:
    budget = _BUDGET.get()
    if budget is not None:
        budget.spend(steps, instance, schema)


def _paid(keyword: Callable[..., Any]) -> Callable[..., Any]:
    """A jsonschema keyword that pays a step of the current Budget each time it applies."""

    @functools.wraps(keyword)
    def apply(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        _spend(1, instance, schema)
        return keyword(validator, value, instance, schema)

    return apply


def _bounded_pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator:
    """The `pattern` keyword, matched by RE2, on texts of at most MAX_PATTERN_SUBJECT_LENGTH
    characters (paying a step per CHARACTERS_PER_STEP of them)."""
    if not validator.is_type(instance, "string"):
        return
    if len(instance) > limits.MAX_PATTERN_SUBJECT_LENGTH:
        yield ValidationError(
            f"At most {limits.MAX_PATTERN_SUBJECT_LENGTH} characters for a field with a pattern."
        )
        return
    _spend(len(instance) // CHARACTERS_PER_STEP, instance, schema)
    try:
        matched = compiled_pattern(pattern).search(instance)
    except re2.error:  # a form stored before patterns were RE2's
        yield ValidationError(
            f"The pattern {pattern!r} cannot be matched: {pattern_problem(pattern)}"
        )
        return
    if not matched:
        yield ValidationError(f"Does not match the pattern {pattern!r}.")


FormValidator = validators.extend(
    Draft202012Validator,
    {
        **{name: _paid(keyword) for name, keyword in Draft202012Validator.VALIDATORS.items()},
        "pattern": _paid(_bounded_pattern),
    },
)


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
    if dialect_of(form) is None:
        return [f"$schema: Must be {ACCEPTED} ({DIALECT}, or {DRAFT_07}#), or left out."]
    form = as_2020_12(form)
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
        Draft202012Validator.check_schema(form, format_checker=_SCHEMA_FORMATS)
    except SchemaError as exc:
        where = "/" + "/".join(_escape(str(part)) for part in exc.absolute_path)
        return [f"{where if where != '/' else ''}: {_short(exc.message)}".lstrip(": ")]
    problem = expansion_problem(form)
    return [problem] if problem else []


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


def values_problems(
    form: Mapping[str, Any], values: Any, budget: Budget | None = None
) -> dict[str, list[str]]:
    """Each problem of `values` against `form`, keyed by the JSON pointer of its field
    (`/replicas`; "" for the whole answer). Empty when they answer the form.

    The check spends `budget` (a Budget of its own by default); past it, the one problem is
    that it stopped, keyed by where in the values, naming where in the form. Inside
    checks_remembered, the same values against an equal form are checked once."""
    remembered = _REMEMBERED.get()
    for known_form, known_values, known_problems in remembered or ():
        if known_values is values and known_form == form:
            return {at: list(messages) for at, messages in known_problems.items()}
    problems = _checked(form, values, budget or Budget())
    if remembered is not None:
        remembered.append((form, values, problems))
    return problems


def _checked(form: Mapping[str, Any], values: Any, budget: Budget) -> dict[str, list[str]]:
    """values_problems, spending `budget`."""
    form = as_2020_12(form)
    validator = FormValidator(form, registry=REGISTRY)
    problems: dict[str, list[str]] = {}
    token = _BUDGET.set(budget)
    try:
        for error in validator.iter_errors(values):
            for at, message in _error_entries(error):
                if message not in problems.setdefault(at, []):
                    problems[at].append(message)
            if len(problems) >= limits.MAX_FORM_PROBLEMS:
                break
    except OverBudget as exc:
        return {_pointer_of(values, budget): [_stopped_where(form, budget, exc)]}
    except RecursionError:
        return {"": ["The form refers to itself without end: it cannot check an answer."]}
    except Unresolvable as exc:
        return {"": [_sentence(f"The form refers to what it does not hold: {exc}")]}
    finally:
        _BUDGET.reset(token)
        if (recorded := _RECORDED.get()) is not None:
            recorded.append(budget)
    return problems


_REMEMBERED: ContextVar[list[tuple[Any, Any, dict[str, list[str]]]] | None] = ContextVar(
    "form_checks_remembered", default=None
)


@contextmanager
def checks_remembered() -> Iterator[None]:
    """Within it, values_problems answers the same values object against an equal form
    from memory: a release checks its values before it locks the breakpoint (a costly form
    then holds no lock others wait on), and the locked decision reuses the answer."""
    token = _REMEMBERED.set([])
    try:
        yield
    finally:
        _REMEMBERED.reset(token)


def _sentence(text: str) -> str:
    """`text` ending with one period."""
    return text if text.endswith((".", "…")) else f"{text}."


def _identity_pointer(document: Any, target: Any) -> str | None:
    """The JSON pointer of the object or array `target` inside `document`, by identity."""
    pending: list[tuple[str, Any]] = [("", document)]
    while pending:
        at, value = pending.pop()
        if value is target:
            return at
        if isinstance(value, Mapping):
            pending.extend((f"{at}/{_escape(str(k))}", v) for k, v in value.items())
        elif isinstance(value, list):
            pending.extend((f"{at}/{index}", item) for index, item in enumerate(value))
    return None


def _pointer_of(values: Any, budget: Budget) -> str:
    """Where in `values` the check stopped ("" when it was at a text or number: they are
    not told apart by identity, or at the whole answer)."""
    if budget.stopped_at is None or not isinstance(budget.stopped_at[0], Mapping | list):
        return ""
    return _identity_pointer(values, budget.stopped_at[0]) or ""


def _stopped_where(form: Mapping[str, Any], budget: Budget, exc: OverBudget) -> str:
    schema = budget.stopped_at[1] if budget.stopped_at else None
    at = _identity_pointer(form, schema) if isinstance(schema, Mapping) else None
    return f"{exc} It stopped at the form's {at or '/'}." if at is not None else str(exc)


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
