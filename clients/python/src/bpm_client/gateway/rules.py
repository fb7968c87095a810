"""Which rule decides a tool call: the first whose globs match the tool's name, whose
`annotations` the tool declares, and whose `when` (JMESPath on {"tool": name,
"arguments": {...}}) holds. No rule: allowed.

A hint the tool does not declare has the MCP specification's default (readOnlyHint false,
destructiveHint true, idempotentHint false, openWorldHint true), and a read-only tool is
never destructive (the specification: destructiveHint means something only when
readOnlyHint is false). So `{ destructiveHint = true }` matches a tool that declares
nothing, and never one that declares itself read-only.

A `when` that fails on these arguments (a function given the wrong type) errs on the safe
side: it holds for an `ask` or `deny` rule and does not for an `allow` rule.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase
from typing import Any

import jmespath
from jmespath.exceptions import JMESPathError
from jmespath.parser import ParsedResult

from .config import Rule

MAX_KEY_LENGTH = 255
# ToolAnnotations' defaults in the MCP specification, for the hints a tool leaves out.
SPEC_DEFAULTS = {
    "readOnlyHint": False,
    "destructiveHint": True,
    "idempotentHint": False,
    "openWorldHint": True,
}

Hints = Mapping[str, bool]


def tool_hints(declared: Mapping[str, Any] | None) -> dict[str, bool]:
    """The four hints of a tool whose annotations are `declared` (camelCase, as sent; None:
    it declares none): what it declares, the specification's defaults for the rest."""
    hints = dict(SPEC_DEFAULTS)
    for hint in SPEC_DEFAULTS:
        value = (declared or {}).get(hint)
        if isinstance(value, bool):
            hints[hint] = value
    if hints["readOnlyHint"]:
        hints["destructiveHint"] = False
    return hints


NO_ANNOTATIONS = tool_hints(None)


def matches_tool(rule: Rule, tool: str, hints: Hints = NO_ANNOTATIONS) -> bool:
    """The rule's globs match the name and the tool's hints are those the rule names."""
    if not any(fnmatchcase(tool, pattern) for pattern in rule.tools):
        return False
    return all(hints.get(hint) is wanted for hint, wanted in rule.annotations)


@functools.lru_cache(maxsize=256)
def _compiled(expression: str) -> ParsedResult:
    return jmespath.compile(expression)


def holds(rule: Rule, tool: str, arguments: Mapping[str, Any]) -> bool:
    """Whether the rule's `when` holds for this call (JMESPath truth: not false, null, or
    empty); a rule without one always holds."""
    if rule.when is None:
        return True
    try:
        value = _compiled(rule.when).search({"tool": tool, "arguments": dict(arguments)})
    except JMESPathError:
        return rule.action != "allow"
    return not (value is None or value is False or value in ("", [], {}))


def decide(
    rules: Sequence[Rule],
    tool: str,
    arguments: Mapping[str, Any],
    hints: Hints = NO_ANNOTATIONS,
) -> Rule | None:
    """The rule that decides this call of a tool with these `hints` (tool_hints); None:
    no rule matches (the call is allowed)."""
    for rule in rules:
        if matches_tool(rule, tool, hints) and holds(rule, tool, arguments):
            return rule
    return None


def needs_annotations(rules: Sequence[Rule], tool: str) -> bool:
    """Whether a rule whose globs match `tool` names annotations (so deciding a call needs
    the tool's, from the upstream's tools/list)."""
    return any(
        rule.annotations and any(fnmatchcase(tool, pattern) for pattern in rule.tools)
        for rule in rules
    )


def hidden(rules: Sequence[Rule], tool: str, hints: Hints = NO_ANNOTATIONS) -> bool:
    """Whether `tools/list` leaves the tool out: every call of it is denied whatever its
    arguments, i.e. the first rule matching it without a `when` is a `deny`, and no rule
    before that could let a call through."""
    for rule in rules:
        if not matches_tool(rule, tool, hints):
            continue
        if rule.when is None:
            return rule.action == "deny"
        if rule.action != "deny":
            return False
    return False


def _kebab(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "x"


def breakpoint_key(server: str, tool: str) -> str:
    """`mcp.<server>.<tool>` in the service's key form (dotted kebab-case): so that
    auto-approval rules and autoApproveAfterN count per tool."""
    return f"mcp.{_kebab(server)}.{_kebab(tool)}"[:MAX_KEY_LENGTH].rstrip("-.")
