"""Values no digest covers: the SDK, `bpm verify --values` and the gateway refuse them
plainly (issue 47).

Before issue 47 a reviewer's `{"x": 1e16}` was signed over the double (its valuesDigest)
and returned as jsonb wrote it, 10000000000000000: an integer RFC 8785 refuses. The SDK's
verify then raised rfc8785's IntegerDomainError, `bpm verify --values` printed a traceback,
and the gateway answered the tool call with a protocol error. Such a result (what a server
of that release answers) is built here from a real release, its receipt signed again over
the double with the suite's key.
"""

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from bpm_client import ReceiptInvalid, ValuesNotRepresentable
from bpm_client.gateway.config import parse_config
from bpm_client.gateway.server import Gateway
from bpm_client.models import BreakpointResult
from bpm_client.receipts import check_result
from mcp.types import CallToolRequestParams, CallToolResult, ListToolsResult, TextContent, Tool

from breakpoints.models import Breakpoint
from breakpoints.services import feedback_add
from core import receipt_keys, receipts
from core.actors import Actor
from core.digests import values_digest
from tests.support.aio import run_async
from tests.support.receipts import suite_jwks
from tests.support.scripted import Answer, breakpoint_json

FORM = {"type": "object", "properties": {"x": {"type": "number"}}}
STORED = {"x": 10**16}  # how jsonb gave back the 1e16 a reviewer sent


@pytest.fixture
def legacy_result(make_breakpoint, reviewer) -> tuple[str, dict[str, Any]]:
    """A released breakpoint's result as a server before issue 47 answered a release with
    values {"x": 1e16}: signed over the double, carrying the integer. Its id and result."""
    bp = make_breakpoint(payload={"question": "Scale?", "form": FORM, "proposal": {"x": 1}})
    feedback_add(
        breakpoint_id=bp.pk,
        actor=Actor.for_user(reviewer),
        comment="",
        release=True,
        values={"x": 2},
    )
    result = Breakpoint.objects.get(pk=bp.pk).result
    claims = receipts.verify(result["receipt"], suite_jwks())
    claims["valuesDigest"] = values_digest({"x": 1e16})
    receipt = receipts.sign(claims, receipt_keys.signing_key())
    return bp.pk, {
        **result,
        "values": STORED,
        "valuesDigest": claims["valuesDigest"],
        "receipt": receipt,
    }


def sdk_result(breakpoint_id: str, data: dict[str, Any]) -> BreakpointResult:
    result = BreakpointResult.from_json(json.loads(json.dumps(data)), strict=True)
    return dataclasses.replace(result, breakpoint_id=breakpoint_id, status="released")


def test_the_sdk_cannot_verify_such_values_and_says_so(legacy_result):
    breakpoint_id, data = legacy_result

    with pytest.raises(ValuesNotRepresentable, match="cannot verify") as caught:
        check_result(sdk_result(breakpoint_id, data), suite_jwks())

    assert isinstance(caught.value, ReceiptInvalid)  # refused like an invalid receipt's
    assert "10000000000000000" in str(caught.value)


def test_bpm_verify_values_is_one_line_and_exit_4(legacy_result, tmp_path: Path):
    breakpoint_id, data = legacy_result
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps(suite_jwks()))
    values = tmp_path / "values.json"
    values.write_text(json.dumps(STORED))
    bpm = str(Path(sys.executable).with_name("bpm"))  # the installed console script
    command = [bpm, "verify", data["receipt"]]
    command += ["--breakpoint", breakpoint_id, "--jwks", str(jwks), "--values", str(values)]

    finished = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)

    assert finished.returncode == 4, finished
    assert finished.stdout == ""
    assert "Traceback" not in finished.stderr
    [line] = finished.stderr.splitlines()
    assert line.startswith(f"bpm: error: {values}: cannot verify:"), line


class Upstream:
    """The upstream MCP server's session, recording every tool call it is sent."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def list_tools(self, params: Any = None) -> ListToolsResult:
        return ListToolsResult(tools=[Tool(name="scale", input_schema=FORM)])

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> CallToolResult:
        self.calls.append((name, arguments))
        return CallToolResult(content=[TextContent(type="text", text="scaled")])


def gated(scripted, *answers: Answer) -> tuple[CallToolResult, list]:
    """The gateway's answer to tools/call scale({"x": 1}) against a scripted service."""
    service = scripted(*answers)
    upstream = Upstream()
    rules = parse_config({"rules": [{"tools": ["scale"], "action": "ask"}]})
    gateway = Gateway(rules, upstream, "ops", url=service.url, token="bpm_test")  # type: ignore[arg-type]
    params = CallToolRequestParams(name="scale", arguments={"x": 1})

    async def call() -> CallToolResult:
        try:
            return await gateway.call_tool(None, params)  # type: ignore[arg-type]
        finally:
            await gateway.aclose()

    return run_async(call()), upstream.calls


def text(result: CallToolResult) -> str:
    return " ".join(block.text for block in result.content if isinstance(block, TextContent))


def test_the_gateway_answers_an_error_result_and_calls_nothing(scripted, legacy_result):
    breakpoint_id, data = legacy_result
    released = breakpoint_json(breakpointId=breakpoint_id, status="released", result=data)

    answer, calls = gated(scripted, Answer(201, released), Answer(200, suite_jwks()))

    assert answer.is_error and calls == []
    assert "the approval's receipt is refused: cannot verify" in text(answer)
