"""The gateway forwards only what the signed receipt approved (issue 37).

Receipts come from the server's own services (a form breakpoint a reviewer answered,
signed with the suite's key). The gateway runs in process, its service a scripted HTTP
server on 127.0.0.1 (the create answer, then the JWKS) and its upstream a recorder: a
receipt for other values, or another breakpoint's, is refused and the tool never called.
"""

import dataclasses
from typing import Any

import pytest
from bpm_client import ReceiptInvalid
from bpm_client.gateway.config import parse_config
from bpm_client.gateway.decisions import approved_arguments
from bpm_client.gateway.server import Gateway
from bpm_client.models import BreakpointResult
from mcp.types import CallToolRequestParams, CallToolResult, ListToolsResult, TextContent, Tool

from breakpoints.models import Breakpoint
from breakpoints.services import feedback_add
from core.actors import Actor
from tests.support.aio import run_async
from tests.support.receipts import OTHER_KEY, suite_jwks
from tests.support.scripted import Answer, breakpoint_json

FORM = {
    "type": "object",
    "properties": {"table": {"type": "string"}, "limit": {"type": "integer"}},
    "required": ["table"],
}
PROPOSAL = {"table": "invoices", "limit": 1000}
EDITED = {"table": "invoices", "limit": 10}
# Signed by someone else: a JWKS that does not list the suite's key.
OTHER_PUBLIC = {name: value for name, value in OTHER_KEY.items() if name != "d"}
RULES = {"rules": [{"tools": ["purge"], "action": "ask"}]}


class Upstream:
    """The upstream MCP server's session, recording every tool call it is sent."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def list_tools(self, params: Any = None) -> ListToolsResult:
        return ListToolsResult(tools=[Tool(name="purge", input_schema=FORM)])

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> CallToolResult:
        self.calls.append((name, arguments))
        return CallToolResult(content=[TextContent(type="text", text="purged")])


@pytest.fixture
def answered(make_breakpoint, reviewer) -> tuple[str, dict[str, Any]]:
    """A form breakpoint the reviewer approved with one value edited: its id and result."""
    bp = make_breakpoint(payload={"question": "Purge?", "form": FORM, "proposal": PROPOSAL})
    feedback_add(
        breakpoint_id=bp.pk, actor=Actor.for_user(reviewer), comment="", release=True, values=EDITED
    )
    return bp.pk, Breakpoint.objects.get(pk=bp.pk).result


def gated_call(scripted, breakpoint_id: str, result: dict[str, Any]):
    """The gateway's answer to tools/call purge(PROPOSAL) when the service answers the
    create with this released breakpoint; and what reached the upstream."""
    service = scripted(
        Answer(201, breakpoint_json(breakpointId=breakpoint_id, status="released", result=result)),
        Answer(200, suite_jwks()),
    )
    upstream = Upstream()
    gateway = Gateway(parse_config(RULES), upstream, "db", url=service.url, token="bpm_test")  # type: ignore[arg-type]
    params = CallToolRequestParams(name="purge", arguments=PROPOSAL)

    async def call() -> CallToolResult:
        try:
            return await gateway.call_tool(None, params)  # type: ignore[arg-type]
        finally:
            await gateway.aclose()

    return run_async(call()), upstream.calls, service


def text(result: CallToolResult) -> str:
    return " ".join(block.text for block in result.content if isinstance(block, TextContent))


def test_the_approved_values_are_forwarded_once_the_receipt_binds_them(scripted, answered):
    breakpoint_id, result = answered
    answer, calls, service = gated_call(scripted, breakpoint_id, result)
    assert not answer.is_error and text(answer) == "purged"
    assert calls == [("purge", EDITED)]  # the edited values, not the proposal
    sent = service.seen[0]
    headers = {name.lower(): value for name, value in sent.headers.items()}
    assert sent.path == "/api/breakpoints"
    assert headers["idempotency-key"].startswith("bpm-gateway-")  # one per call
    assert service.seen[1].path == "/.well-known/jwks.json"


def test_a_receipt_for_other_values_is_refused_and_nothing_forwarded(scripted, answered):
    """The result says limit 100000; the signed receipt approved limit 10."""
    breakpoint_id, result = answered
    other = {**result, "values": {"table": "invoices", "limit": 100000}}
    answer, calls, _ = gated_call(scripted, breakpoint_id, other)
    assert answer.is_error and calls == []
    assert "the approval's receipt is refused" in text(answer) and "valuesDigest" in text(answer)
    assert "Nothing was sent to the tool" in text(answer)


def test_another_breakpoints_receipt_is_refused(scripted, answered, make_breakpoint):
    _, result = answered
    other_id = make_breakpoint(payload={"question": "Something else?"}).pk
    answer, calls, _ = gated_call(scripted, other_id, result)
    assert answer.is_error and calls == []
    assert "breakpointId" in text(answer)


def test_approved_arguments_checks_signature_breakpoint_and_values(answered):
    breakpoint_id, data = answered
    result = dataclasses.replace(
        BreakpointResult.from_json(data, strict=True),
        breakpoint_id=breakpoint_id,
        status="released",
    )
    assert approved_arguments(result, suite_jwks(), breakpoint_id) == EDITED
    with pytest.raises(ReceiptInvalid, match="valuesDigest"):
        approved_arguments(
            dataclasses.replace(result, values=PROPOSAL), suite_jwks(), breakpoint_id
        )
    with pytest.raises(ReceiptInvalid, match="no values"):
        approved_arguments(dataclasses.replace(result, values=None), suite_jwks(), breakpoint_id)
    with pytest.raises(ReceiptInvalid, match="not an approval"):
        approved_arguments(dataclasses.replace(result, approved=False), suite_jwks(), breakpoint_id)
    with pytest.raises(ReceiptInvalid, match="no key of the JWKS"):
        approved_arguments(result, {"keys": [OTHER_PUBLIC]}, breakpoint_id)


def test_an_approval_without_a_receipt_is_refused(scripted, answered):
    breakpoint_id, result = answered
    answer, calls, _ = gated_call(scripted, breakpoint_id, {**result, "receipt": None})
    assert answer.is_error and calls == []
    assert "the approval's receipt is refused: the result carries no receipt" in text(answer)
