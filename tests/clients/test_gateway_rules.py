"""Which rule decides a gated tool call (issue 37): first match wins, globs on the tool's
name, JMESPath `when` on {tool, arguments}; the tools `tools/list` leaves out; the key."""

import pytest
from bpm_client.gateway.config import DEFAULT_RULES, parse_config
from bpm_client.gateway.rules import (
    breakpoint_key,
    decide,
    hidden,
    needs_annotations,
    tool_hints,
)

RULES = parse_config(
    {
        "rules": [
            {
                "tools": ["delete_*", "drop_database"],
                "action": "ask",
                "when": "arguments.env == 'prod'",
            },
            {"tools": ["shutdown"], "action": "deny"},
            {"tools": ["drop_*"], "action": "deny"},
            {"tools": ["*"], "action": "allow"},
        ]
    }
).rules


def action(tool: str, **arguments) -> str | None:
    rule = decide(RULES, tool, arguments)
    return None if rule is None else f"{rule.name} {rule.action}"


def test_first_match_wins_globs_on_the_name_and_when_on_the_arguments():
    assert action("delete_rows", env="prod") == "rules[1] ask"
    assert action("delete_rows", env="staging") == "rules[4] allow"
    assert action("delete_rows") == "rules[4] allow"  # no env: the when does not hold
    assert action("drop_database", env="prod") == "rules[1] ask"
    assert action("drop_database", env="dev") == "rules[3] deny"
    assert action("shutdown") == "rules[2] deny"
    assert action("read_rows", env="prod") == "rules[4] allow"


def test_no_rule_matching_means_allowed():
    rules = parse_config({"rules": [{"tools": ["delete_*"], "action": "ask"}]}).rules
    assert decide(rules, "read_rows", {}) is None
    assert decide(rules, "Delete_rows", {}) is None  # names match case-sensitively
    assert decide((), "anything", {}) is None


@pytest.mark.parametrize(
    ("when", "arguments", "holds"),
    [
        ("arguments.count > `100`", {"count": 101}, True),
        ("arguments.count > `100`", {"count": 100}, False),
        ("arguments.tables", {"tables": []}, False),  # JMESPath truth: empty is false
        ("arguments.tables", {"tables": ["a"]}, True),
        ("arguments.n", {"n": 0}, True),  # 0 is true in JMESPath
        ("tool == 'deploy'", {}, True),
        ("contains(arguments.hosts, 'db1')", {"hosts": ["db1", "db2"]}, True),
    ],
)
def test_when_is_jmespath_on_tool_and_arguments(when, arguments, holds):
    rules = parse_config({"rules": [{"tools": ["*"], "action": "ask", "when": when}]}).rules
    assert (decide(rules, "deploy", arguments) is not None) is holds


def test_a_when_that_fails_on_the_arguments_errs_on_the_safe_side():
    """contains() on a number is a JMESPath type error: ask and deny hold, allow does not."""
    when = "contains(arguments.hosts, 'db1')"
    for kind, decided in (("ask", True), ("deny", True), ("allow", False)):
        rules = parse_config({"rules": [{"tools": ["*"], "action": kind, "when": when}]}).rules
        assert (decide(rules, "t", {"hosts": 3}) is not None) is decided


def test_tools_list_hides_only_tools_every_call_of_which_is_denied():
    assert hidden(RULES, "shutdown")
    assert not hidden(RULES, "drop_database")  # rules[1] may ask about it first
    assert hidden(RULES, "drop_table")
    assert not hidden(RULES, "delete_rows") and not hidden(RULES, "read_rows")
    conditional = parse_config(
        {"rules": [{"tools": ["*"], "action": "deny", "when": "arguments.force"}]}
    ).rules
    assert not hidden(conditional, "anything")  # denied only for some arguments
    allowed_first = parse_config(
        {"rules": [{"tools": ["x"], "action": "allow"}, {"tools": ["*"], "action": "deny"}]}
    ).rules
    assert not hidden(allowed_first, "x") and hidden(allowed_first, "y")
    deny_when_then_deny = parse_config(
        {
            "rules": [
                {"tools": ["x"], "action": "deny", "when": "arguments.a"},
                {"tools": ["x"], "action": "deny"},
            ]
        }
    ).rules
    assert hidden(deny_when_then_deny, "x")


def test_the_key_is_dotted_kebab_case_per_server_and_tool():
    assert breakpoint_key("billing-db", "delete_rows") == "mcp.billing-db.delete-rows"
    assert breakpoint_key("My Server", "Drop.Database!") == "mcp.my-server.drop-database"
    assert len(breakpoint_key("s", "t" * 400)) <= 255


# The annotations of the official filesystem server's tools (server-filesystem 2026.8.31).
READ_ONLY = {"readOnlyHint": True, "openWorldHint": False}
DESTRUCTIVE = {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": True}
ADDITIVE = {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": True}


def test_a_hint_left_out_has_the_specifications_default_and_read_only_is_never_destructive():
    assert tool_hints(None) == {
        "readOnlyHint": False,
        "destructiveHint": True,
        "idempotentHint": False,
        "openWorldHint": True,
    }
    assert tool_hints(READ_ONLY) == {
        "readOnlyHint": True,
        "destructiveHint": False,
        "idempotentHint": False,
        "openWorldHint": False,
    }
    assert tool_hints({"readOnlyHint": True, "destructiveHint": True})["destructiveHint"] is False
    assert tool_hints({"destructiveHint": "yes"})["destructiveHint"] is True  # not a bool


@pytest.mark.parametrize(
    ("declared", "action"),
    [
        (READ_ONLY, "rules[1] allow"),
        ({"readOnlyHint": True}, "rules[1] allow"),
        (DESTRUCTIVE, "rules[2] ask"),
        (None, "rules[2] ask"),  # declares nothing: destructive by default
        ({}, "rules[2] ask"),
        ({"openWorldHint": False}, "rules[2] ask"),
        (ADDITIVE, "rules[3] ask"),  # writes without destroying: still asked
    ],
)
def test_without_a_config_read_only_tools_run_and_every_other_tool_asks(declared, action):
    rule = decide(DEFAULT_RULES, "tool", {}, tool_hints(declared))
    assert rule is not None and f"{rule.name} {rule.action}" == action


def test_annotation_rules_match_the_declared_hints_with_globs_and_when():
    rules = parse_config(
        {
            "rules": [
                {"annotations": {"destructiveHint": True}, "action": "deny", "when": "arguments.f"},
                {"tools": "write_*", "annotations": {"idempotentHint": True}, "action": "allow"},
                {"annotations": {"readOnlyHint": True, "openWorldHint": False}, "action": "allow"},
                {"tools": "*", "action": "ask"},
            ]
        }
    ).rules

    def action(tool, declared, **arguments):
        rule = decide(rules, tool, arguments, tool_hints(declared))
        return rule and rule.name

    assert action("write_file", DESTRUCTIVE, f=True) == "rules[1]"
    assert action("write_file", DESTRUCTIVE) == "rules[2]"  # idempotent, by its name
    assert action("edit_file", DESTRUCTIVE) == "rules[4]"
    assert action("read_file", READ_ONLY, f=True) == "rules[3]"  # read-only: not destructive
    assert action("fetch", {"readOnlyHint": True}) == "rules[4]"  # open world by default
    assert action("write_file", None) == "rules[4]"  # idempotentHint false by default
    assert decide(rules, "x", {}) == rules[3]  # no hints given: a tool that declares none


def test_tools_list_hides_by_annotations_too_and_only_such_rules_need_them():
    rules = parse_config(
        {
            "rules": [
                {"tools": "safe_*", "action": "allow"},
                {"annotations": {"destructiveHint": True}, "action": "deny"},
            ]
        }
    ).rules
    assert hidden(rules, "drop", tool_hints(DESTRUCTIVE))
    assert hidden(rules, "drop")  # declares nothing: destructive
    assert not hidden(rules, "read", tool_hints(READ_ONLY))
    assert not hidden(rules, "safe_drop", tool_hints(DESTRUCTIVE))
    assert needs_annotations(rules, "drop") and not needs_annotations(RULES, "drop_database")
    assert needs_annotations(DEFAULT_RULES, "anything")
