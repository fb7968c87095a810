"""JMESPath over an event's payload: conditions, and templates such as
"Deploy {{ workflow_run.head_sha }}" (each {{ expression }} replaced by its value)."""

import json
import re
from typing import Any

import jmespath
from jmespath.exceptions import JMESPathError

from breakpoints.limits import MAX_EXPRESSION_LENGTH

PLACEHOLDER = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)


class ExpressionError(ValueError):
    """An expression that does not parse, or fails on this event; the message says which."""


def check_expression(text: Any) -> str | None:
    """What is wrong with a JMESPath expression, or None (for validating rules)."""
    if not isinstance(text, str) or not text.strip():
        return "Must be a non-empty JMESPath expression."
    if len(text) > MAX_EXPRESSION_LENGTH:
        return f"At most {MAX_EXPRESSION_LENGTH} characters."
    try:
        jmespath.compile(text)
    except JMESPathError as exc:
        return f"Not a JMESPath expression: {exc}"
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


def search(expression: str, payload: Any) -> Any:
    try:
        return jmespath.search(expression, payload)
    except JMESPathError as exc:
        raise ExpressionError(f"{expression}: {exc}") from None


def holds(expression: str, payload: Any) -> bool:
    """JMESPath truthiness: false, null, "", [] and {} are false; anything else true."""
    return search(expression, payload) not in (False, None, "", [], {})


def render(template: str, payload: Any) -> str:
    """The template with each {{ expression }} replaced: text as is, null as "", other
    values as JSON."""

    def value(match: re.Match[str]) -> str:
        found = search(match.group(1).strip(), payload)
        if found is None:
            return ""
        return found if isinstance(found, str) else json.dumps(found, ensure_ascii=False)

    return PLACEHOLDER.sub(value, template)
