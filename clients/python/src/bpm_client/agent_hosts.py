"""Agent hosts' permission prompts answered by a breakpoint: Claude Code's and Codex's
`PermissionRequest` hooks (`bpm hook claude-code`, `bpm hook codex`).

The host runs the hook with a JSON object on stdin (`tool_name`, `tool_input`,
`session_id`, `cwd`, ...); the tool's input becomes the breakpoint's proposal, with a form
derived from it so that a reviewer can edit the values, and the decision becomes the JSON
the host reads on stdout. Anything short of a reviewer's decision (no answer, a failure)
is no decision at all: the host then asks its own user, as it would without the hook.

No I/O here: cli/hook.py reads stdin, asks, waits and prints.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

from .bodies import BreakpointFields, breakpoint_body
from .models import BreakpointResult

EVENT = "PermissionRequest"
MAX_KEY_LENGTH = 200
MAX_RUN_ID_LENGTH = 128  # the API's limit; a longer session id is sent as its digest
TITLE_SUMMARY_CHARS = 120
# The tool input's field that says best what a call does, for the reviewer's list.
SUMMARY_FIELDS = ("command", "file_path", "notebook_path", "path", "url", "pattern", "query")
INPUT_FILE = "tool-input.json"  # the input, attached when it is too large to edit


@dataclasses.dataclass(frozen=True)
class Host:
    """An agent host: its name (the command's and the breakpoint key's first part), how
    people call it and its model, and whether it runs a tool with an input the hook
    rewrote (`updatedInput`)."""

    name: str
    label: str
    agent: str
    takes_updated_input: bool


CLAUDE_CODE = Host("claude-code", "Claude Code", "Claude", takes_updated_input=True)
# Codex refuses a decision carrying `updatedInput` (its hooks fail closed on it).
CODEX = Host("codex", "Codex", "Codex", takes_updated_input=False)
HOSTS = {host.name: host for host in (CLAUDE_CODE, CODEX)}


class HookInputError(ValueError):
    """The hook's input is not a permission request this command can ask about."""


@dataclasses.dataclass(frozen=True)
class PermissionRequest:
    """What the host asks permission for, from the hook's input."""

    tool: str
    tool_input: dict[str, Any]
    session_id: str | None = None
    cwd: str | None = None
    # The host's id of this tool call (`tool_use_id`) when it gives one, and Codex's turn.
    call_id: str | None = None
    turn_id: str | None = None
    permission_mode: str | None = None


def permission_request(data: bytes | str) -> PermissionRequest:
    """The request in a hook's input (JSON); HookInputError says in one line what is wrong."""
    try:
        given = json.loads(data)
    except ValueError as error:
        raise HookInputError(f"the hook's input is not JSON ({error})") from None
    if not isinstance(given, dict):
        raise HookInputError("the hook's input is not a JSON object")
    event = given.get("hook_event_name")
    if event is not None and event != EVENT:
        raise HookInputError(
            f"this command answers {EVENT} hooks, not {json.dumps(event)}: configure it "
            f'under "hooks": {{"{EVENT}": [...]}}'
        )
    tool = given.get("tool_name")
    if not isinstance(tool, str) or not tool.strip():
        raise HookInputError("the hook's input has no tool_name (a string)")
    tool_input = given.get("tool_input")
    if not isinstance(tool_input, dict):
        raise HookInputError("the hook's input has no tool_input (a JSON object)")
    return PermissionRequest(
        tool=tool,
        tool_input=tool_input,
        session_id=_text(given, "session_id"),
        cwd=_text(given, "cwd"),
        call_id=_text(given, "tool_use_id"),
        turn_id=_text(given, "turn_id"),
        permission_mode=_text(given, "permission_mode"),
    )


def _text(given: Mapping[str, Any], field: str) -> str | None:
    value = given.get(field)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise HookInputError(f"the hook's input has a {field} that is not a string")
    return value


# --- the breakpoint ------------------------------------------------------------------


def breakpoint_key(host: Host, tool: str) -> str:
    """`claude-code.bash`, `codex.network-access`, `claude-code.mcp-github-create-issue`:
    the service's key form (dotted kebab-case), one per tool, so that auto-approval rules
    and streaks count per tool."""
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "-", tool).lower()
    part = re.sub(r"[^a-z0-9]+", "-", words).strip("-") or "tool"
    return f"{host.name}.{part}"[:MAX_KEY_LENGTH].rstrip("-.")


def form_for(tool_input: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON Schema of the tool's input, one field per top-level value typed as proposed:
    the reviewer edits each value in its own field (an object or a mixed list as JSON),
    and can neither drop one nor add one (the host runs the tool with the whole input)."""
    return {
        "type": "object",
        "properties": {name: _field(value) for name, value in tool_input.items()},
        "required": sorted(tool_input),
        "additionalProperties": False,
    }


def _field(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"type": "boolean"}
    if isinstance(value, int):
        return {"type": "integer"}
    if isinstance(value, float):
        return {"type": "number"}
    if isinstance(value, str):
        return {"type": "string"}
    if isinstance(value, list):
        if value and all(isinstance(item, str) for item in value):
            return {"type": "array", "items": {"type": "string"}}
        return {"type": "array"}
    if isinstance(value, dict):
        return {"type": "object"}
    return {}  # null: any value


def question_for(host: Host, request: PermissionRequest, *, editable: bool = True) -> str:
    """What the reviewer reads above the form (or the attached input, when not `editable`)."""
    where = f" in `{request.cwd}`" if request.cwd else ""
    why = request.tool_input.get("description")
    said = f"\n\nIt says: {why.strip()}" if isinstance(why, str) and why.strip() else ""
    if not editable:
        edits = "as it is: it is too large to edit here"
    elif host.takes_updated_input:
        edits = f"edit the values first if they are not right, and {host.agent} runs yours"
    else:
        edits = (
            f"if you edit the values, {host.label} cannot run them as they are: it is told "
            "no, with your values, and may ask again with them"
        )
    shown = "below" if editable else f"attached ({INPUT_FILE})"
    return (
        f"{host.label} asks permission to use the tool `{request.tool}`{where} with the "
        f"input {shown}. Approve to let it ({edits}); reject, with a reason, to stop it: "
        f"{host.agent} reads your comment.{said}"
    )


def title_for(request: PermissionRequest) -> str:
    """`Bash: rm -rf node_modules`: the tool and what it acts on, on one line."""
    for field in SUMMARY_FIELDS:
        value = request.tool_input.get(field)
        if isinstance(value, str) and value.strip():
            summary = " ".join(value.split())
            if len(summary) > TITLE_SUMMARY_CHARS:
                summary = summary[: TITLE_SUMMARY_CHARS - 1] + "…"
            return f"{request.tool}: {summary}"
    return request.tool


def breakpoint_fields(
    host: Host,
    request: PermissionRequest,
    *,
    tags: tuple[str, ...] = (),
    experts: tuple[str, ...] = (),
    ttl: int | None = None,
    editable: bool = True,
) -> tuple[str, BreakpointFields]:
    """The question and the SDK's create() keyword arguments for the request: its input
    as the proposal, with a form to edit it, or (not `editable`: an input beyond the
    service's limits for proposals) as a context file to approve as it is."""
    about = {
        "host": host.name,
        "tool": request.tool,
        "sessionId": request.session_id,
        "turnId": request.turn_id,
        "cwd": request.cwd,
        "permissionMode": request.permission_mode,
    }
    fields = BreakpointFields(
        title=title_for(request),
        payload={"agentHost": {name: value for name, value in about.items() if value}},
        key=breakpoint_key(host, request.tool),
        tags=list(dict.fromkeys([host.name, *tags])),
        expert=(experts[0] if len(experts) == 1 else list(experts)) or None,
        ttl=ttl,
        run_id=run_id(request.session_id),
    )
    if editable:
        fields["form"] = form_for(request.tool_input)
        fields["proposal"] = request.tool_input
    else:
        content = json.dumps(request.tool_input, indent=2, ensure_ascii=False)
        fields["files"] = [{"path": INPUT_FILE, "content": content}]
    return question_for(host, request, editable=editable), fields


def refuses_the_form(details: Mapping[str, Any]) -> bool:
    """Whether the service's 400 is about the form or the proposal (the tool's input is
    beyond their limits: 64 KiB, 16 levels, 1,000 values, numbers within 2^53) rather
    than about the rest of the request."""
    return any(str(field).startswith(("payload.proposal", "payload.form")) for field in details)


def run_id(session_id: str | None) -> str | None:
    """The session as the breakpoint's run (its digest when longer than the API takes)."""
    if session_id is None or len(session_id) <= MAX_RUN_ID_LENGTH:
        return session_id
    return "session-" + hashlib.sha256(session_id.encode()).hexdigest()


def idempotency_key(
    host: Host, request: PermissionRequest, question: str, fields: BreakpointFields
) -> str:
    """The same request from the same session asks once: a digest of the host's own ids
    (the session; the tool call's id when the host gives one) and of the breakpoint asked
    (the tool, its input, the working directory, Codex's turn, the options), so that a
    restarted host, asking again, waits on the breakpoint it opened before."""
    basis = {
        "host": host.name,
        "session": request.session_id,
        "call": request.call_id,
        "body": breakpoint_body(question, **fields),
    }
    canonical = json.dumps(basis, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return f"{host.name}-{hashlib.sha256(canonical.encode()).hexdigest()}"


# --- the decision --------------------------------------------------------------------


def host_decision(host: Host, result: BreakpointResult) -> dict[str, Any] | None:
    """The host's answer to a decided breakpoint: allow (Claude Code: with the reviewer's
    values as `updatedInput` when they edited them), deny with the reviewer's comment, or
    None (no decision: the host asks its user) when it expired or was cancelled, or when
    its receipt did not verify."""
    if result.status != "released" or result.verified is False:
        return None
    if not result.approved:
        return _output({"behavior": "deny", "message": rejection(result)})
    if result.edited and result.values is not None:
        if host.takes_updated_input:
            return _output({"behavior": "allow", "updatedInput": result.values})
        return _output({"behavior": "deny", "message": edited_approval(host, result)})
    return _output({"behavior": "allow"})


def _output(decision: dict[str, Any]) -> dict[str, Any]:
    return {"hookSpecificOutput": {"hookEventName": EVENT, "decision": decision}}


def rejection(result: BreakpointResult) -> str:
    """`Denied by alice in Breakpoint Manager (bp-…): Not on a Friday.`"""
    line = f"Denied by {_people(result)} in Breakpoint Manager ({result.breakpoint_id})"
    comment = _comment(result)
    return f"{line}: {comment}" if comment else f"{line}."


def edited_approval(host: Host, result: BreakpointResult) -> str:
    """An approval of other values, for a host that runs a tool only as it asked."""
    values = json.dumps(result.values, ensure_ascii=False, sort_keys=True)
    comment = _comment(result)
    said = f" Their comment: {comment}" if comment else ""
    return (
        f"Not run as asked: {_people(result)} approved it in Breakpoint Manager "
        f"({result.breakpoint_id}) only with changes, which {host.label} cannot apply to "
        f"this call. Ask again with this input instead: {values}.{said}"
    )


def _people(result: BreakpointResult) -> str:
    who = result.responded_by
    names = ", ".join(who) if isinstance(who, list) else who
    return names or "a reviewer"


def _comment(result: BreakpointResult) -> str:
    return " ".join((result.response or result.feedback or "").split())
