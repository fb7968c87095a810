"""JMESPath over an event's payload: conditions, and templates such as
"Deploy {{ workflow_run.head_sha }}" (each {{ expression }} replaced by its value).

Bounded twice: an expression's shape when a rule is saved (length, depth, fan-out and
function nesting, so nothing recurses without end and little multiplies), and its work
when it runs (MAX_EXPRESSION_STEPS per expression and event: a rule saved before the
limits, or an expression within them over a large payload, stops with an error).
"""

import json
import re
from typing import Any

import jmespath
from jmespath.exceptions import JMESPathError
from jmespath.lexer import Lexer
from jmespath.visitor import TreeInterpreter

from core.limits import (
    MAX_EXPRESSION_DEPTH,
    MAX_EXPRESSION_FANOUT,
    MAX_EXPRESSION_LENGTH,
    MAX_EXPRESSION_STEPS,
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
TOO_DEEP = f"Nesting deeper than {MAX_EXPRESSION_DEPTH} (the limit)."
TOO_WIDE = (
    f"More than {MAX_EXPRESSION_FANOUT} projections, filters, flattens and multi-selects "
    "(the limit)."
)


class ExpressionError(ValueError):
    """An expression that does not parse, or fails on this event; the message says which."""


class _OverBudget(Exception):
    pass


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
    or reads whole; past the budget it stops (_OverBudget)."""

    def __init__(self, steps: int) -> None:
        super().__init__()
        self.left = steps

    def spend(self, steps: int) -> None:
        self.left -= steps
        if self.left < 0:
            raise _OverBudget

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
        if node["value"] in self._EQUALITY_OPS:  # == and != compare whole values
            for child in node["children"]:
                self.spend_on(self.visit(child, value))
        return super().visit_comparator(node, value)

    def visit_function_expression(self, node: dict[str, Any], value: Any) -> Any:
        args = [self.visit(child, value) for child in node["children"]]
        for arg in args:
            if node["value"] in READ_WHOLE:
                self.spend_on(arg)
            elif isinstance(arg, list | dict):
                self.spend(len(arg))
        return self._functions.call_function(node["value"], args)


def _evaluate(expression: str, payload: Any) -> tuple[Any, _Budgeted]:
    """The expression's value over the payload, and the interpreter (with what is left)."""
    interpreter = _Budgeted(MAX_EXPRESSION_STEPS)
    try:
        return interpreter.visit(_parse(expression), payload), interpreter
    except (JMESPathError, ExpressionError) as exc:  # ExpressionError: saved before a limit
        raise ExpressionError(f"{expression}: {exc}") from None
    except _OverBudget:
        raise ExpressionError(f"{expression}: {over_budget()}") from None


def over_budget() -> str:
    return f"Stopped after {MAX_EXPRESSION_STEPS} steps (the limit per expression and event)."


def search(expression: str, payload: Any) -> Any:
    return _evaluate(expression, payload)[0]


def holds(expression: str, payload: Any) -> bool:
    """JMESPath truthiness: false, null, "", [] and {} are false; anything else true."""
    return search(expression, payload) not in (False, None, "", [], {})


def render(template: str, payload: Any) -> str:
    """The template with each {{ expression }} replaced: text as is, null as "", other
    values as JSON."""

    def value(match: re.Match[str]) -> str:
        expression = match.group(1).strip()
        found, interpreter = _evaluate(expression, payload)
        if found is None:
            return ""
        if isinstance(found, str):
            return found
        try:
            interpreter.spend_on(found)  # json.dumps reads it whole
        except _OverBudget:
            raise ExpressionError(f"{expression}: {over_budget()}") from None
        return json.dumps(found, ensure_ascii=False)

    return PLACEHOLDER.sub(value, template)
