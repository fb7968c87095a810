"""What a gated call asks and what comes back: the breakpoint's fields, the approved
arguments (bound by the signed receipt), and the error results the MCP client reads.

No I/O here: server.py does the talking.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any

from mcp.types import CallToolResult, TextContent

from ..bodies import BreakpointFields
from ..models import BreakpointResult
from ..receipts import ReceiptInvalid, check_result
from .config import Defaults, Rule
from .rules import breakpoint_key

NOT_RUN = "was not run"


def question_for(server: str, tool: str, description: str | None) -> str:
    """The question a reviewer reads (the arguments are the form below it)."""
    about = f"\n\nWhat the tool does: {description.strip()}" if description else ""
    return (
        f"An agent wants to run the tool `{tool}` on the MCP server `{server}` with the "
        f"arguments below. Approve to run it with these arguments (edit them first if they "
        f"are not right); reject, with a reason, to stop it: the agent reads your comment."
        f"{about}"
    )


def breakpoint_fields(
    *,
    server: str,
    tool: str,
    description: str | None,
    schema: Mapping[str, Any],
    arguments: Mapping[str, Any],
    rule: Rule,
    defaults: Defaults,
    run_id: str | None = None,
) -> tuple[str, BreakpointFields]:
    """The question and the SDK's create() keyword arguments of an `ask` call: its key is
    the server's and tool's (the same for every call of the tool), its run the gateway's
    (`run_id`), so a reviewer's grant for the key or the run covers the session's next
    calls; the arguments are the proposal (a grant's values constraints read them)."""
    payload: dict[str, Any] = {"mcp": {"server": server, "tool": tool}}
    after = rule.auto_approve_after or defaults.auto_approve_after
    if after is not None:
        payload["autoApproveAfterN"] = after
    expert = defaults.expert if rule.expert is None else rule.expert
    fields = BreakpointFields(
        title=f"Call {tool} on {server}?",
        payload=payload,
        form=dict(schema),
        proposal=dict(arguments),
        key=breakpoint_key(server, tool),
        tags=list(dict.fromkeys([*defaults.tags, *rule.tags])),
        expert=(expert[0] if len(expert) == 1 else list(expert)) or None,
        ttl=rule.ttl or defaults.ttl,
        run_id=run_id,
    )
    return question_for(server, tool, description), fields


RUN_ID_VARIABLE = "BPM_RUN_ID"


def gateway_run_id(environ: Mapping[str, str]) -> str:
    """The run every breakpoint of this gateway names: $BPM_RUN_ID (at most 128
    characters), else one made for this process (`gateway-` and 12 hex digits)."""
    given = (environ.get(RUN_ID_VARIABLE) or "").strip()
    return given[:128] if given else f"gateway-{secrets.token_hex(6)}"


def approved_arguments(
    result: BreakpointResult, jwks: Mapping[str, Any], breakpoint_id: str
) -> dict[str, Any]:
    """The arguments to send: the approved values, once the receipt (a key of `jwks`)
    names this breakpoint, this approval and exactly these values; else ReceiptInvalid."""
    if not result.approved:
        raise ReceiptInvalid("the result is not an approval")
    values = result.values
    if not isinstance(values, dict):
        raise ReceiptInvalid("the approval carries no values (the arguments to send)")
    check_result(result, jwks, breakpoint_id=breakpoint_id, values=values)
    return values


def error_result(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


def refusal(tool: str, why: str) -> CallToolResult:
    """Nothing was forwarded: the gateway (its rules, or a failure) stopped the call."""
    return error_result(f"`{tool}` {NOT_RUN}: {_sentence(why)} Nothing was sent to the tool.")


def _sentence(text: str) -> str:
    """`text` ending with one full stop (a service's message often ends with its own)."""
    text = text.rstrip()
    return text if text.endswith((".", "!", "?", "…")) else f"{text}."


def not_approved(tool: str, result: BreakpointResult, breakpoint_id: str) -> CallToolResult:
    """Rejected, expired or cancelled: who decided, and their feedback."""
    who = _people(result.responded_by)
    feedback = (result.feedback or "").strip()
    if result.status == "expired":
        why = f"nobody answered approval request {breakpoint_id} in time (it expired)"
    elif result.status == "cancelled":
        why = f"approval request {breakpoint_id} was cancelled" + (f" by {who}" if who else "")
    else:
        why = f"rejected by {who or 'a reviewer'} (approval request {breakpoint_id})"
    if feedback:
        why += f". Their feedback: {feedback}"
    return error_result(f"`{tool}` {NOT_RUN}: {why}")


def _people(responded_by: str | list[str] | None) -> str:
    if isinstance(responded_by, list):
        return ", ".join(responded_by)
    return responded_by or ""
