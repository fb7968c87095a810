"""JMESPath over an event's payload: conditions, and templates such as
"Deploy {{ workflow_run.head_sha }}" (each {{ expression }} replaced by its value).

Bounded twice: an expression's shape when a rule is saved (length, depth, fan-out and
function nesting, so nothing recurses without end and little multiplies), and its work
when it runs, by a Budget: BPM_TRIGGER_EXPRESSION_STEPS steps per expression and event,
and BPM_TRIGGER_RULE_SECONDS for everything one rule evaluates on one event (a rule
saved before the limits, or an expression within them over a large payload, stops with an
error). Events larger than BPM_TRIGGER_MAX_EVENT_BYTES are not evaluated at all.
"""

import json
import re
import time
from collections.abc import Callable
from typing import Any

import jmespath
from django.conf import settings
from jmespath.exceptions import JMESPathError
from jmespath.lexer import Lexer
from jmespath.visitor import TreeInterpreter

from core.limits import (
    MAX_EXPRESSION_DEPTH,
    MAX_EXPRESSION_FANOUT,
    MAX_EXPRESSION_LENGTH,
    MAX_FUNCTION_NESTING,
)

PLACEHOLDER = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
# Nodes that make a value out of many: their count bounds how much an expression multiplies.
FANOUT = {
    "projection",
    "value_projection",
    "filter_projection",
    "flatten",
    "multi_select_list",
    "multi_select_dict",
}
OPENS, CLOSES = {"lparen", "lbracket", "lbrace", "filter"}, {"rparen", "rbracket", "rbrace"}
PREFIXES = {"not", "expref"}
# Nodes whose value is new (a flattened list, a slice, a function's answer): paid by size.
BUILDS = {"flatten", "index_expression", "function_expression"}
# Functions that read their arguments whole (as text, or comparing each element).
READ_WHOLE = {"to_string", "contains", "join", "starts_with", "ends_with", "to_number"}
CHARACTERS_PER_STEP = 16
# How often (in steps) the clock is read: a step is a few microseconds.
STEPS_PER_CLOCK_READ = 100
# The clock the time budget reads (monotonic; a test may put a counting one in its place).
clock: Callable[[], float] = time.monotonic
TOO_DEEP = f"Nesting deeper than {MAX_EXPRESSION_DEPTH} (the limit)."
TOO_WIDE = (
    f"More than {MAX_EXPRESSION_FANOUT} projections, filters, flattens and multi-selects "
    "(the limit)."
)


class ExpressionError(ValueError):
    """An expression that does not parse, or fails on this event; the message says which."""


class _OverBudget(Exception):
    """Past the budget; its message says which part."""


class Budget:
    """What evaluating one rule on one event may spend: `steps` per expression, and
    `seconds` for all its expressions together (conditions and templates), from now."""

    def __init__(self, *, steps: int | None = None, seconds: float | None = None) -> None:
        self.steps = settings.BPM_TRIGGER_EXPRESSION_STEPS if steps is None else steps
        self.seconds = settings.BPM_TRIGGER_RULE_SECONDS if seconds is None else seconds
        self.deadline = clock() + self.seconds

    def check_time(self) -> None:
        if clock() > self.deadline:
            raise _OverBudget(
                f"Stopped after {self.seconds:g} s (the time limit per rule and event)."
            )

    def over_steps(self) -> str:
        return f"Stopped after {self.steps} steps (the limit per expression and event)."


def too_large(payload: Any) -> str | None:
    """Why rules are not evaluated on this event (larger than BPM_TRIGGER_MAX_EVENT_BYTES as
    compact JSON), or None."""
    limit = settings.BPM_TRIGGER_MAX_EVENT_BYTES
    size = len(json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode())
    if size <= limit:
        return None
    return (
        f"Not evaluated: the event is {size:,} bytes, rules evaluate events of at most "
        f"{limit:,} (BPM_TRIGGER_MAX_EVENT_BYTES)."
    )


def check_expression(text: Any) -> str | None:
    """What is wrong with a JMESPath expression, or None (for validating rules)."""
    if not isinstance(text, str) or not text.strip():
        return "Must be a non-empty JMESPath expression."
    try:
        _parse(text)
    except ExpressionError as exc:
        return str(exc)
    return None


def check_template(text: Any) -> str | None:
    """What is wrong with a template (each {{ }} a JMESPath expression), or None."""
    if not isinstance(text, str) or len(text) > MAX_EXPRESSION_LENGTH:
        return f"Must be text of at most {MAX_EXPRESSION_LENGTH} characters."
    for expression in PLACEHOLDER.findall(text):
        problem = check_expression(expression.strip())
        if problem:
            return f"{{{{{expression.strip()}}}}}: {problem}"
    return None


def _parse(text: str) -> dict[str, Any]:
    """The expression's parse tree, within the limits; ExpressionError saying which not."""
    if len(text) > MAX_EXPRESSION_LENGTH:
        raise ExpressionError(f"At most {MAX_EXPRESSION_LENGTH} characters.")
    try:
        if _nesting(text) > MAX_EXPRESSION_DEPTH:
            raise ExpressionError(TOO_DEEP)
        tree: dict[str, Any] = jmespath.compile(text).parsed
    except JMESPathError as exc:
        raise ExpressionError(f"Not a JMESPath expression: {exc}") from None
    except RecursionError:  # jmespath's parser recurses once a level: far past the limit
        raise ExpressionError(TOO_DEEP) from None
    if problem := _shape_problem(tree):
        raise ExpressionError(problem)
    return tree


def _nesting(text: str) -> int:
    """Brackets open at once, plus a run of ! or &: how deep jmespath's parser will recurse."""
    deepest = depth = run = 0
    for token in Lexer().tokenize(text):
        kind = token["type"]
        depth += (kind in OPENS) - (kind in CLOSES)
        run = run + 1 if kind in PREFIXES else 0
        deepest = max(deepest, depth + run)
    return deepest


def _shape_problem(tree: dict[str, Any]) -> str | None:
    """Depth, fan-out and function nesting of a parse tree (walked without recursion)."""
    depth = fanout = calls = 0
    pending = [(tree, 1, 0)]
    while pending:
        node, level, nested = pending.pop()
        nested += node["type"] == "function_expression"
        fanout += node["type"] in FANOUT
        depth, calls = max(depth, level), max(calls, nested)
        children = node.get("children", [])
        pending.extend((child, level + 1, nested) for child in children if isinstance(child, dict))
    if depth > MAX_EXPRESSION_DEPTH:
        return TOO_DEEP
    if fanout > MAX_EXPRESSION_FANOUT:
        return TOO_WIDE
    if calls > MAX_FUNCTION_NESTING:
        return f"Function calls nested deeper than {MAX_FUNCTION_NESTING} (the limit)."
    return None


class _Budgeted(TreeInterpreter):
    """jmespath's interpreter, paying a step per node visited and for the values it builds
    or reads whole, and reading the clock every STEPS_PER_CLOCK_READ steps; past either
    budget it stops (_OverBudget)."""

    def __init__(self, budget: Budget) -> None:
        super().__init__()
        self.budget = budget
        self.left = budget.steps
        self.until_clock = STEPS_PER_CLOCK_READ

    def spend(self, steps: int) -> None:
        self.left -= steps
        if self.left < 0:
            raise _OverBudget(self.budget.over_steps())
        self.until_clock -= steps
        if self.until_clock <= 0:
            self.until_clock = STEPS_PER_CLOCK_READ
            self.budget.check_time()

    def spend_on(self, value: Any) -> None:
        """Pay for reading a value whole (a shared list counts as often as it appears)."""
        pending = [value]
        while pending:
            item = pending.pop()
            self.spend(1)
            if isinstance(item, str):
                self.spend(len(item) // CHARACTERS_PER_STEP)
            elif isinstance(item, list):
                pending.extend(item)
            elif isinstance(item, dict):
                pending.extend(item.keys())
                pending.extend(item.values())

    def visit(self, node: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        self.spend(1)
        result = super().visit(node, *args, **kwargs)
        if node["type"] in BUILDS and isinstance(result, list | dict | str):
            self.spend(len(result) // (CHARACTERS_PER_STEP if isinstance(result, str) else 1))
        return result

    def visit_comparator(self, node: dict[str, Any], value: Any) -> Any:
        """Each side evaluated once (jmespath's own would evaluate them again), == and !=
        paid for reading both whole; an ordering of a number and text is null, as of any
        other pair of types (jmespath raised TypeError)."""
        left, right = (self.visit(child, value) for child in node["children"])
        operator = node["value"]
        if operator in self._EQUALITY_OPS:
            self.spend_on(left)
            self.spend_on(right)
        elif not _same_ordered_kind(left, right):
            return None
        return self.COMPARATOR_FUNC[operator](left, right)

    def visit_function_expression(self, node: dict[str, Any], value: Any) -> Any:
        args = [self.visit(child, value) for child in node["children"]]
        for arg in args:
            if node["value"] in READ_WHOLE:
                self.spend_on(arg)
            elif isinstance(arg, list | dict):
                self.spend(len(arg))
        return self._functions.call_function(node["value"], args)


def _same_ordered_kind(left: Any, right: Any) -> bool:
    """Both numbers (not booleans), or both text: what <, <=, > and >= compare."""
    if isinstance(left, str) and isinstance(right, str):
        return True
    return all(
        isinstance(side, int | float) and not isinstance(side, bool) for side in (left, right)
    )


def _evaluate(expression: str, payload: Any, budget: Budget | None) -> tuple[Any, _Budgeted]:
    """The expression's value over the payload, and the interpreter (with what is left)."""
    interpreter = _Budgeted(budget or Budget())
    try:
        interpreter.budget.check_time()
        return interpreter.visit(_parse(expression), payload), interpreter
    except (JMESPathError, ExpressionError) as exc:  # ExpressionError: saved before a limit
        raise ExpressionError(f"{expression}: {exc}") from None
    except _OverBudget as exc:
        raise ExpressionError(f"{expression}: {exc}") from None


def search(expression: str, payload: Any, budget: Budget | None = None) -> Any:
    """The expression's value (within `budget`, else a budget of its own)."""
    return _evaluate(expression, payload, budget)[0]


def holds(expression: str, payload: Any, budget: Budget | None = None) -> bool:
    """JMESPath truthiness: false, null, "", [] and {} are false; anything else true."""
    return search(expression, payload, budget) not in (False, None, "", [], {})


def render(template: str, payload: Any, budget: Budget | None = None) -> str:
    """The template with each {{ expression }} replaced: text as is, null as "", other
    values as JSON."""

    def value(match: re.Match[str]) -> str:
        expression = match.group(1).strip()
        found, interpreter = _evaluate(expression, payload, budget)
        if found is None:
            return ""
        if isinstance(found, str):
            return found
        try:
            interpreter.spend_on(found)  # json.dumps reads it whole
        except _OverBudget as exc:
            raise ExpressionError(f"{expression}: {exc}") from None
        return json.dumps(found, ensure_ascii=False)

    return PLACEHOLDER.sub(value, template)
