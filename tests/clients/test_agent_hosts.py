"""From an agent host's PermissionRequest hook input to a breakpoint, and from the decision
to the host's answer (bpm_client.agent_hosts; no server: tests/live/clients/test_hooks.py
runs the command against one)."""

import json
from pathlib import Path

import pytest
from bpm_client.agent_hosts import (
    CLAUDE_CODE,
    CODEX,
    HookInputError,
    breakpoint_fields,
    breakpoint_key,
    form_for,
    host_decision,
    idempotency_key,
    permission_request,
    refuses_the_form,
    run_id,
)
from bpm_client.models import BreakpointResult

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hooks"


def fixture(host: str) -> bytes:
    return (FIXTURES / host / "permission-request-bash.json").read_bytes()


def key_of(host, data: dict) -> str:
    request = permission_request(json.dumps(data))
    question, fields = breakpoint_fields(host, request)
    return idempotency_key(host, request, question, fields)


def released(**fields) -> BreakpointResult:
    return BreakpointResult(
        **{"status": "released", "breakpoint_id": "bp-1", "responded_by": "alice", **fields}
    )


def test_the_documented_inputs_are_read():
    claude = permission_request(fixture("claude-code"))
    codex = permission_request(fixture("codex"))

    assert (claude.tool, claude.session_id, claude.cwd) == ("Bash", "abc123", "/Users/...")
    assert claude.tool_input["command"] == "rm -rf node_modules"
    assert claude.call_id is None  # Claude Code's PermissionRequest has no tool_use_id
    assert (codex.tool, codex.turn_id) == ("Bash", "<turn-id>")


@pytest.mark.parametrize(
    ("host", "tool", "key"),
    [
        (CLAUDE_CODE, "Bash", "claude-code.bash"),
        (CLAUDE_CODE, "WebFetch", "claude-code.web-fetch"),
        (CLAUDE_CODE, "mcp__github__create_issue", "claude-code.mcp-github-create-issue"),
        (CODEX, "NetworkAccess", "codex.network-access"),
        (CODEX, "apply_patch", "codex.apply-patch"),
        (CODEX, "???", "codex.tool"),
    ],
)
def test_each_tool_has_a_key_of_its_own_in_the_services_form(host, tool, key):
    assert breakpoint_key(host, tool) == key


def test_the_form_types_each_value_as_proposed_and_keeps_every_field():
    form = form_for(
        {"command": "ls", "timeout": 120000, "run_in_background": False, "ratio": 0.5,
         "paths": ["a", "b"], "edits": [{"old": "x"}], "options": {"a": 1}, "note": None}
    )  # fmt: skip

    assert form["properties"] == {
        "command": {"type": "string"},
        "timeout": {"type": "integer"},
        "run_in_background": {"type": "boolean"},
        "ratio": {"type": "number"},
        "paths": {"type": "array", "items": {"type": "string"}},
        "edits": {"type": "array"},
        "options": {"type": "object"},
        "note": {},
    }
    assert form["required"] == sorted(form["properties"])
    assert form["additionalProperties"] is False


def test_the_breakpoint_is_the_sessions_run_and_proposes_the_tool_input():
    request = permission_request(fixture("claude-code"))

    question, fields = breakpoint_fields(
        CLAUDE_CODE, request, tags=("laptop",), experts=("ops",), ttl=600
    )

    assert fields["run_id"] == "abc123"
    assert fields["proposal"] == request.tool_input
    assert fields["tags"] == ["claude-code", "laptop"]
    assert (fields["expert"], fields["ttl"]) == ("ops", 600)
    assert fields["title"] == "Bash: rm -rf node_modules"
    assert "`Bash`" in question and "Remove node_modules directory" in question


def test_an_input_too_large_to_edit_is_attached_instead():
    request = permission_request(fixture("codex"))

    question, fields = breakpoint_fields(CODEX, request, editable=False)

    assert "form" not in fields and "proposal" not in fields
    [attached] = fields["files"]
    assert json.loads(attached["content"]) == request.tool_input
    assert "too large to edit" in question


@pytest.mark.parametrize(
    ("details", "refuses"),
    [
        ({"payload.proposal": ["At most 65,536 bytes."]}, True),
        ({"payload.proposal.amount": ["Beyond 2^53."]}, True),
        ({"payload.form": ["Too deep."]}, True),
        ({"tags": ["At most 50."]}, False),
        ({}, False),
    ],
)
def test_only_a_refused_form_or_proposal_is_asked_again_without_one(details, refuses):
    assert refuses_the_form(details) is refuses


def test_a_session_id_longer_than_a_run_id_is_sent_as_its_digest():
    assert run_id("s" * 128) == "s" * 128
    assert run_id("s" * 129) != run_id("s" * 130)
    assert len(run_id("s" * 129) or "") <= 128


def test_the_same_call_of_the_same_session_has_the_same_key():
    data = json.loads(fixture("claude-code"))

    assert key_of(CLAUDE_CODE, data) == key_of(CLAUDE_CODE, dict(data))
    assert key_of(CLAUDE_CODE, data) != key_of(CODEX, data)
    assert key_of(CLAUDE_CODE, data) != key_of(CLAUDE_CODE, {**data, "session_id": "other"})
    changed = {**data, "tool_input": {**data["tool_input"], "command": "rm -rf dist"}}
    assert key_of(CLAUDE_CODE, data) != key_of(CLAUDE_CODE, changed)


def test_a_call_id_given_by_the_host_tells_two_identical_calls_apart():
    data = json.loads(fixture("claude-code"))

    first = key_of(CLAUDE_CODE, {**data, "tool_use_id": "toolu_01"})
    second = key_of(CLAUDE_CODE, {**data, "tool_use_id": "toolu_02"})

    assert first != second
    assert first == key_of(CLAUDE_CODE, {**data, "tool_use_id": "toolu_01"})


def test_codex_asks_again_in_another_turn():
    data = json.loads(fixture("codex"))

    assert key_of(CODEX, data) != key_of(CODEX, {**data, "turn_id": "turn-2"})


@pytest.mark.parametrize(
    ("given", "says"),
    [
        (b"\xff\xfe{", "not JSON"),
        (b"", "not JSON"),
        (b"42", "not a JSON object"),
        (b'{"hook_event_name": "Stop"}', 'not "Stop"'),
        (b'{"tool_name": " ", "tool_input": {}}', "no tool_name"),
        (b'{"tool_name": "Bash"}', "no tool_input"),
        (b'{"tool_name": "Bash", "tool_input": {}, "cwd": ["/"]}', "cwd"),
    ],
)
def test_input_that_is_no_permission_request_is_named_in_one_line(given, says):
    with pytest.raises(HookInputError) as raised:
        permission_request(given)

    assert says in str(raised.value)
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("host", [CLAUDE_CODE, CODEX])
def test_an_approval_as_proposed_allows(host):
    decision = host_decision(host, released(approved=True, values={"command": "ls"}))

    assert decision == {
        "hookSpecificOutput": {
            "hookEventName": "PermissionRequest",
            "decision": {"behavior": "allow"},
        }
    }


def test_claude_code_gets_the_edited_values_as_its_input():
    result = released(approved=True, values={"command": "ls -a"}, edited=True)

    decision = host_decision(CLAUDE_CODE, result)["hookSpecificOutput"]["decision"]

    assert decision == {"behavior": "allow", "updatedInput": {"command": "ls -a"}}


def test_codex_is_denied_an_edited_approval_with_the_values_to_ask_with():
    result = released(approved=True, values={"command": "ls -a"}, edited=True, response="safer")

    decision = host_decision(CODEX, result)["hookSpecificOutput"]["decision"]

    assert decision["behavior"] == "deny"
    assert set(decision) == {"behavior", "message"}
    assert '{"command": "ls -a"}' in decision["message"]
    assert "alice" in decision["message"] and "safer" in decision["message"]


def test_a_rejection_denies_with_the_comment_on_one_line():
    result = released(approved=False, response="Not on\na Friday", feedback="Not on\na Friday")

    decision = host_decision(CLAUDE_CODE, result)["hookSpecificOutput"]["decision"]

    assert decision == {
        "behavior": "deny",
        "message": "Denied by alice in Breakpoint Manager (bp-1): Not on a Friday",
    }


@pytest.mark.parametrize(
    "result",
    [
        BreakpointResult(approved=False, status="expired", breakpoint_id="bp-1"),
        BreakpointResult(approved=False, status="cancelled", breakpoint_id="bp-1"),
        released(approved=True, verified=False),
        released(approved=False, verified=False),
    ],
)
def test_no_reviewers_decision_is_no_decision(result):
    """An expiry, a cancellation, a receipt that does not verify: the host asks its user."""
    assert host_decision(CLAUDE_CODE, result) is None
    assert host_decision(CODEX, result) is None
