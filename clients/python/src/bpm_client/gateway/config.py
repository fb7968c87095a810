"""The gateway's configuration: a TOML file of defaults and rules, checked as it loads.

Every mistake is a `GatewayConfigError` naming the key (`rules[2].action: must be one of
allow, deny, ask`), so a gateway never starts with a rule it misread: a misspelt `when`
would otherwise allow what it was meant to ask about.

Without a file the rules are DEFAULT_RULES, decided by the tools' annotations: read-only
tools run, every other tool (destructive, or declaring nothing) asks a human.
`config_toml` writes a configuration back as TOML (`bpm gateway --print-config`).
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, cast

import jmespath
from jmespath.exceptions import JMESPathError

from ..errors import BpmError

Action = Literal["allow", "deny", "ask"]
ACTIONS: tuple[Action, ...] = ("allow", "deny", "ask")
DEFAULT_TAGS = ("mcp",)
DEFAULT_KEYS = frozenset({"tags", "ttl", "expert", "server", "auto_approve_after"})
RULE_KEYS = frozenset(
    {"tools", "annotations", "action", "when", "expert", "tags", "ttl", "auto_approve_after"}
)
# The MCP tool annotations a rule may match (ToolAnnotations' boolean hints).
HINTS = ("destructiveHint", "readOnlyHint", "idempotentHint", "openWorldHint")
TOP_KEYS = frozenset({"defaults", "rules"})


class GatewayConfigError(BpmError):
    """A configuration the gateway refuses to run with; the message names the key."""


@dataclasses.dataclass(frozen=True)
class Defaults:
    """What every breakpoint the gateway opens carries, unless its rule says otherwise."""

    tags: tuple[str, ...] = DEFAULT_TAGS
    ttl: int | None = 3600
    expert: tuple[str, ...] = ()
    server: str | None = None
    auto_approve_after: int | None = None


@dataclasses.dataclass(frozen=True)
class Rule:
    """One `[[rules]]` entry: the tools it matches (globs, and the annotations they must
    declare, as (hint, value) pairs), the action, an optional JMESPath `when` on
    {tool, arguments}, and what an `ask` breakpoint carries."""

    tools: tuple[str, ...]
    action: Action
    when: str | None = None
    annotations: tuple[tuple[str, bool], ...] = ()
    expert: tuple[str, ...] | None = None
    tags: tuple[str, ...] = ()
    ttl: int | None = None
    auto_approve_after: int | None = None
    index: int = 0  # its place in the file, from 1: named in messages

    @property
    def name(self) -> str:
        return f"rules[{self.index}]"


@dataclasses.dataclass(frozen=True)
class GatewayConfig:
    defaults: Defaults = Defaults()
    rules: tuple[Rule, ...] = ()


# Without a configuration file: the annotations decide. A hint a tool does not declare has
# the MCP specification's default (not read-only, destructive), so a tool that declares
# nothing asks; a write declared not destructive asks too (rules[3]): the safe side.
DEFAULT_RULES = (
    Rule(tools=("*",), action="allow", annotations=(("readOnlyHint", True),), index=1),
    Rule(tools=("*",), action="ask", annotations=(("destructiveHint", True),), index=2),
    Rule(tools=("*",), action="ask", index=3),
)
DEFAULT_CONFIG = GatewayConfig(rules=DEFAULT_RULES)


def load_config(path: str | Path | None) -> GatewayConfig:
    """The configuration in `path` (TOML); no path: DEFAULT_CONFIG (the annotations decide)."""
    if path is None:
        return DEFAULT_CONFIG
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise GatewayConfigError(f"cannot read {path}: {error.strerror or error}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise GatewayConfigError(f"{path}: not valid TOML: {error}") from None
    try:
        return parse_config(data)
    except GatewayConfigError as error:
        raise GatewayConfigError(f"{path}: {error}") from None


def parse_config(data: Mapping[str, Any]) -> GatewayConfig:
    """The configuration of a parsed TOML document."""
    _known(data, TOP_KEYS, "")
    defaults = data.get("defaults", {})
    if not isinstance(defaults, dict):
        raise GatewayConfigError("defaults: must be a table ([defaults])")
    rules = data.get("rules", [])
    if not isinstance(rules, list) or not all(isinstance(rule, dict) for rule in rules):
        raise GatewayConfigError("rules: must be an array of tables ([[rules]])")
    return GatewayConfig(
        defaults=_defaults(defaults),
        rules=tuple(_rule(rule, index) for index, rule in enumerate(rules, start=1)),
    )


def _defaults(table: Mapping[str, Any]) -> Defaults:
    _known(table, DEFAULT_KEYS, "defaults.")
    tags = _strings(table, "tags", "defaults.")
    return Defaults(
        tags=DEFAULT_TAGS if tags is None else tags,
        ttl=_ttl(table, "defaults.", Defaults.ttl),
        expert=_strings(table, "expert", "defaults.", single=True) or (),
        server=_server(table),
        auto_approve_after=_count(table, "defaults."),
    )


def _rule(table: Mapping[str, Any], index: int) -> Rule:
    where = f"rules[{index}]."
    _known(table, RULE_KEYS, where)
    annotations = _annotations(table, where)
    tools = _strings(table, "tools", where, single=True)
    if tools is None and annotations:
        tools = ("*",)  # a rule on the annotations alone matches every tool declaring them
    if not tools:
        raise GatewayConfigError(
            f"{where}tools: required (unless the rule has annotations): the tool names "
            f"(globs) it matches"
        )
    action = table.get("action")
    if action not in ACTIONS:
        raise GatewayConfigError(f"{where}action: must be one of {', '.join(ACTIONS)}")
    when = table.get("when")
    if when is not None:
        _check_when(when, where)
    return Rule(
        tools=tools,
        action=cast(Action, action),
        when=when,
        annotations=annotations,
        expert=_strings(table, "expert", where, single=True),
        tags=_strings(table, "tags", where) or (),
        ttl=_ttl(table, where, None),
        auto_approve_after=_count(table, where),
        index=index,
    )


def _annotations(table: Mapping[str, Any], where: str) -> tuple[tuple[str, bool], ...]:
    """`annotations = { destructiveHint = true }`: the hints a matching tool declares."""
    if "annotations" not in table:
        return ()
    value = table["annotations"]
    if not isinstance(value, dict) or not value:
        raise GatewayConfigError(
            f"{where}annotations: must be a table of hints, e.g. {{ destructiveHint = true }}"
        )
    _known(value, frozenset(HINTS), f"{where}annotations.")
    for hint, wanted in value.items():
        if not isinstance(wanted, bool):
            raise GatewayConfigError(f"{where}annotations.{hint}: must be true or false")
    return tuple(value.items())


def _known(table: Mapping[str, Any], keys: frozenset[str], where: str) -> None:
    for key in table:
        if key not in keys:
            close = difflib.get_close_matches(key, sorted(keys), n=1)
            hint = (
                f" (did you mean {close[0]}?)" if close else f" (known: {', '.join(sorted(keys))})"
            )
            raise GatewayConfigError(f"{where}{key}: unknown key{hint}")


def _strings(
    table: Mapping[str, Any], key: str, where: str, *, single: bool = False
) -> tuple[str, ...] | None:
    """A list of non-empty strings (or, with `single`, one string); None when absent."""
    if key not in table:
        return None
    value = table[key]
    if single and isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        kind = "a string or a list of strings" if single else "a list of strings"
        raise GatewayConfigError(f"{where}{key}: must be {kind} (none empty)")
    return tuple(value)


def _ttl(table: Mapping[str, Any], where: str, default: int | None) -> int | None:
    if "ttl" not in table:
        return default
    value = table["ttl"]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise GatewayConfigError(f"{where}ttl: must be a whole number of seconds, 1 or more")
    return value


def _count(table: Mapping[str, Any], where: str) -> int | None:
    if "auto_approve_after" not in table:
        return None
    value = table["auto_approve_after"]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise GatewayConfigError(
            f"{where}auto_approve_after: must be a whole number of approvals, 1 or more"
        )
    return value


def _server(table: Mapping[str, Any]) -> str | None:
    value = table.get("server")
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise GatewayConfigError("defaults.server: must be a non-empty string")
    return value.strip()


def _check_when(when: Any, where: str) -> None:
    if not isinstance(when, str) or not when.strip():
        raise GatewayConfigError(f"{where}when: must be a JMESPath expression (a string)")
    try:
        jmespath.compile(when)
    except JMESPathError as error:
        message = " ".join(str(error).split())
        raise GatewayConfigError(f"{where}when: not a JMESPath expression: {message}") from None


def config_toml(config: GatewayConfig) -> str:
    """The configuration as TOML that `load_config` reads back to the same rules."""
    defaults = config.defaults
    lines = ["[defaults]"]
    lines += _toml_pairs(
        server=defaults.server,
        tags=list(defaults.tags),
        ttl=defaults.ttl,
        expert=list(defaults.expert) or None,
        auto_approve_after=defaults.auto_approve_after,
    )
    for rule in config.rules:
        lines += ["", "[[rules]]"]
        lines += _toml_pairs(
            tools=list(rule.tools),
            annotations=dict(rule.annotations) or None,
            when=rule.when,
            action=rule.action,
            expert=None if rule.expert is None else list(rule.expert),
            tags=list(rule.tags) or None,
            ttl=rule.ttl,
            auto_approve_after=rule.auto_approve_after,
        )
    return "\n".join(lines) + "\n"


def _toml_pairs(**values: Any) -> list[str]:
    return [f"{key} = {_toml_value(value)}" for key, value in values.items() if value is not None]


def _toml_value(value: Any) -> str:
    """A TOML value of the few types a configuration holds (JSON's string escapes are
    TOML's basic-string escapes; TOML also wants DEL escaped)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    pairs = ", ".join(f"{key} = {_toml_value(item)}" for key, item in value.items())
    return "{ " + pairs + " }"
