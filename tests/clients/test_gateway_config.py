"""`bpm gateway`'s configuration (issue 37): the TOML loads into defaults and rules, and
every mistake is refused with a message naming the key, before the gateway starts."""

from pathlib import Path

import pytest
from bpm_client.cli import main as bpm
from bpm_client.gateway.config import (
    Defaults,
    GatewayConfigError,
    Rule,
    config_toml,
    load_config,
    parse_config,
)
from bpm_client.gateway.server import server_name

ISSUE_EXAMPLE = """
[defaults]
tags = ["mcp"]
ttl = 3600
expert = "ops"
server = "billing-db"

[[rules]]
tools = ["delete_*", "drop_database"]
action = "ask"
when = "arguments.env == 'prod'"
expert = "dba"

[[rules]]
tools = ["shutdown"]
action = "deny"

[[rules]]
tools = ["*"]
action = "allow"
"""


def test_the_issues_example_loads(tmp_path: Path):
    path = tmp_path / "gate.toml"
    path.write_text(ISSUE_EXAMPLE)
    config = load_config(path)
    assert config.defaults == Defaults(
        tags=("mcp",), ttl=3600, expert=("ops",), server="billing-db"
    )
    ask, deny, allow = config.rules
    assert ask == Rule(
        tools=("delete_*", "drop_database"),
        action="ask",
        when="arguments.env == 'prod'",
        expert=("dba",),
        index=1,
    )
    assert (deny.action, deny.tools, deny.when, deny.name) == (
        "deny",
        ("shutdown",),
        None,
        "rules[2]",
    )
    assert (allow.action, allow.tools) == ("allow", ("*",))


def test_an_empty_file_means_no_rules_and_the_defaults(tmp_path: Path):
    (tmp_path / "empty.toml").write_text("")
    config = load_config(tmp_path / "empty.toml")
    assert config.rules == ()
    assert config.defaults.tags == ("mcp",) and config.defaults.ttl == 3600
    assert config.defaults.server is None and config.defaults.expert == ()


def test_no_file_means_the_annotation_rules_read_only_runs_everything_else_asks():
    """Issue 48: without --config the tools' annotations decide."""
    config = load_config(None)
    assert config.defaults == Defaults()
    assert [(rule.annotations, rule.action) for rule in config.rules] == [
        ((("readOnlyHint", True),), "allow"),
        ((("destructiveHint", True),), "ask"),
        ((), "ask"),
    ]
    assert all(rule.tools == ("*",) and rule.when is None for rule in config.rules)


def test_annotations_load_and_a_rule_on_annotations_alone_matches_every_tool():
    rules = parse_config(
        {
            "rules": [
                {"annotations": {"destructiveHint": True}, "action": "ask"},
                {"tools": "fs_*", "annotations": {"openWorldHint": False}, "action": "allow"},
            ]
        }
    ).rules
    assert rules[0].tools == ("*",) and rules[0].annotations == (("destructiveHint", True),)
    assert rules[1].tools == ("fs_*",) and rules[1].annotations == (("openWorldHint", False),)


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ("[[rules]]\nannotations = {}\naction = 'ask'", "rules[1].annotations: must be a table"),
        ("[[rules]]\nannotations = 'x'\naction = 'ask'", "rules[1].annotations: must be a table"),
        (
            "[[rules]]\nannotations = { destructivehint = true }\naction = 'ask'",
            "rules[1].annotations.destructivehint: unknown key (did you mean destructiveHint?)",
        ),
        (
            "[[rules]]\nannotations = { readOnlyHint = 'yes' }\naction = 'allow'",
            "rules[1].annotations.readOnlyHint: must be true or false",
        ),
        ("[[rules]]\nannotation = { readOnlyHint = true }", "rules[1].annotation: unknown key"),
    ],
)
def test_a_mistaken_annotations_table_is_refused_naming_the_key(
    toml: str, message: str, tmp_path: Path
):
    path = tmp_path / "gate.toml"
    path.write_text(toml)
    with pytest.raises(GatewayConfigError) as caught:
        load_config(path)
    assert str(caught.value).startswith(f"{path}: {message}")


def test_the_printed_config_reads_back_to_the_same_rules(tmp_path: Path):
    path = tmp_path / "gate.toml"
    path.write_text(
        ISSUE_EXAMPLE
        + '\n[[rules]]\ntools = ["w\u00e9ird \\"name\\"\\u007f"]\n'
        + "annotations = { readOnlyHint = false, idempotentHint = true }\n"
        + 'action = "ask"\ntags = ["x"]\nttl = 5\nauto_approve_after = 2\n'
    )
    for config in (load_config(path), load_config(None)):
        printed = tmp_path / "printed.toml"
        printed.write_text(config_toml(config))
        assert load_config(printed) == config


def test_bpm_gateway_print_config_prints_the_rules_in_force_and_exits_0(tmp_path: Path, capsys):
    path = tmp_path / "gate.toml"
    path.write_text(ISSUE_EXAMPLE)
    assert bpm(["gateway", "--print-config"]) == 0
    defaults = capsys.readouterr().out
    assert defaults.startswith("# The rules in force: no --config: the defaults")
    assert 'annotations = { readOnlyHint = true }\naction = "allow"' in defaults
    assert bpm(["gateway", "--config", str(path), "--print-config"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith(f"# The rules in force: {path}\n")
    assert "when = \"arguments.env == 'prod'\"" in printed and "annotations" not in printed


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ('[defaults]\nttl = "1h"', "defaults.ttl: must be a whole number of seconds"),
        ("[defaults]\nttl = 0", "defaults.ttl: must be a whole number of seconds"),
        ("[defaults]\ntag = ['x']", "defaults.tag: unknown key (did you mean tags?)"),
        ("[defaults]\ntags = 'mcp'", "defaults.tags: must be a list of strings"),
        ('[defaults]\nserver = " "', "defaults.server: must be a non-empty string"),
        ("[defaults]\nauto_approve_after = 0", "defaults.auto_approve_after: must be a whole"),
        ("rule = 1", "rule: unknown key (did you mean rules?)"),
        ("defaults = 1", "defaults: must be a table"),
        ("rules = 1", "rules: must be an array of tables"),
        ("[[rules]]\naction = 'ask'", "rules[1].tools: required"),
        ("[[rules]]\ntools = []\naction = 'ask'", "rules[1].tools: required"),
        ("[[rules]]\ntools = [1]\naction = 'ask'", "rules[1].tools: must be a string or a list"),
        ("[[rules]]\ntools = ['a']", "rules[1].action: must be one of allow, deny, ask"),
        ("[[rules]]\ntools = ['a']\naction = 'prompt'", "rules[1].action: must be one of"),
        (
            "[[rules]]\ntools = ['a']\nacton = 'ask'",
            "rules[1].acton: unknown key (did you mean action?)",
        ),
        (
            "[[rules]]\ntools = ['*']\naction = 'allow'\n[[rules]]\ntools = ['a']\naction = 'ask'\n"
            "when = 'arguments.env =='",
            "rules[2].when: not a JMESPath expression",
        ),
        ("[[rules]]\ntools = ['a']\naction = 'ask'\nwhen = 3", "rules[1].when: must be a JMESPath"),
        ("[[rules]]\ntools = ['a']\naction = 'ask'\nttl = -5", "rules[1].ttl: must be a whole"),
    ],
)
def test_a_mistake_is_refused_naming_the_key(toml: str, message: str, tmp_path: Path):
    path = tmp_path / "gate.toml"
    path.write_text(toml)
    with pytest.raises(GatewayConfigError) as caught:
        load_config(path)
    assert str(caught.value).startswith(f"{path}: {message}")


def test_a_file_that_is_not_toml_or_not_there_is_refused(tmp_path: Path):
    (tmp_path / "bad.toml").write_text("[[rules]\n")
    with pytest.raises(GatewayConfigError, match="bad.toml: not valid TOML"):
        load_config(tmp_path / "bad.toml")
    with pytest.raises(GatewayConfigError, match="cannot read .*missing.toml"):
        load_config(tmp_path / "missing.toml")


def test_a_single_string_is_taken_for_a_list_where_one_name_is_natural():
    config = parse_config({"rules": [{"tools": "deploy", "action": "ask", "expert": "ops"}]})
    assert config.rules[0].tools == ("deploy",) and config.rules[0].expert == ("ops",)


def test_bpm_gateway_refuses_a_bad_config_in_one_line_before_starting_anything(
    tmp_path: Path, capsys
):
    path = tmp_path / "gate.toml"
    path.write_text("[[rules]]\ntools = ['x']\naction = 'maybe'\n")
    marker = tmp_path / "started"
    code = bpm(["gateway", "--config", str(path), "--", "touch", str(marker)])
    assert code == 4
    assert capsys.readouterr().err == (
        f"bpm: error: {path}: rules[1].action: must be one of allow, deny, ask\n"
    )
    assert not marker.exists()


def test_bpm_gateway_needs_exactly_one_upstream(capsys):
    assert bpm(["gateway"]) == 4
    assert "either -- COMMAND [ARGS...] or --upstream-url" in capsys.readouterr().err
    assert bpm(["gateway", "--upstream-url", "http://127.0.0.1:1/mcp", "--", "srv"]) == 4


@pytest.mark.parametrize(
    ("command", "url", "name"),
    [
        (["billing-mcp", "--db", "x"], None, "billing-mcp"),
        (["/usr/bin/python3", "servers/billing_db.py"], None, "billing_db"),
        (["python", "-u", "-m", "billing"], None, "billing"),
        (
            ["npx", "-y", "@modelcontextprotocol/server-postgres", "postgres://h/db"],
            None,
            "server-postgres",
        ),
        (["uv", "run", "server.py"], None, "server"),
        (["python"], None, "python"),
        ([], "http://billing.internal:9000/mcp", "billing.internal"),
    ],
)
def test_the_servers_default_name(command, url, name):
    assert server_name(parse_config({}), command, url) == name
    configured = parse_config({"defaults": {"server": "billing-db"}})
    assert server_name(configured, command, url) == "billing-db"
