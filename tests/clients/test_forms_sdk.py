"""Forms on the agent side (issue 36): the SDK, `bpm ask --form --proposal`, `bpm verify
--values` and the MCP tools send a form and a proposal and read the approved values; the
receipt's valuesDigest verifies for an edited answer and fails when one value is altered.

Receipts come from the server's own services (signed with the suite's key); the wire
answers of `bpm ask` and the MCP tool are scripted (a real HTTP server on 127.0.0.1).
"""

import dataclasses
import json

import pytest
from bpm_client import Client, ReceiptInvalid
from bpm_client import receipts as sdk_receipts
from bpm_client.cli import main as bpm
from bpm_client.models import BreakpointResult

from breakpoints.models import Breakpoint
from breakpoints.services import feedback_add
from core.actors import Actor
from core.digests import values_digest
from tests.support.mcp import mcp_call
from tests.support.receipts import suite_jwks
from tests.support.scripted import Answer, breakpoint_json, status_json

FORM = {
    "type": "object",
    "properties": {"replicas": {"type": "integer", "minimum": 1}},
    "required": ["replicas"],
}
PROPOSAL = {"replicas": 3}
EDITED = {"replicas": 2}


@pytest.fixture
def edited(make_breakpoint, reviewer) -> BreakpointResult:
    """A breakpoint whose reviewer edited the proposal, its result as the SDK decodes it."""
    bp = make_breakpoint(payload={"question": "Scale?", "form": FORM, "proposal": PROPOSAL})
    feedback_add(
        breakpoint_id=bp.pk, actor=Actor.for_user(reviewer), comment="", release=True, values=EDITED
    )
    stored = Breakpoint.objects.get(pk=bp.pk)
    result = BreakpointResult.from_json(stored.result, strict=True)
    return dataclasses.replace(result, breakpoint_id=bp.pk, status="released")


def test_the_sdk_computes_the_valuesDigest_as_the_server_does():  # noqa: N802
    assert sdk_receipts.values_digest(EDITED) == values_digest(EDITED)
    assert sdk_receipts.values_digest(None) is None


def test_an_edited_answer_verifies_and_one_altered_value_fails(edited):
    assert (edited.values, edited.edited) == (EDITED, True)
    claims = sdk_receipts.check_result(edited, suite_jwks())
    assert claims["valuesDigest"] == values_digest(EDITED)
    assert sdk_receipts.check_result(edited, suite_jwks(), values=EDITED) == claims

    altered = dataclasses.replace(edited, values={"replicas": 20})
    with pytest.raises(ReceiptInvalid, match="does not state this result: valuesDigest"):
        sdk_receipts.check_result(altered, suite_jwks())
    with pytest.raises(ReceiptInvalid, match="valuesDigest"):
        sdk_receipts.check_result(edited, suite_jwks(), values=PROPOSAL)
    assert sdk_receipts.verified(altered, suite_jwks()).verified is False


def test_bpm_verify_checks_the_values_it_is_given(edited, tmp_path, capsys):
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps(suite_jwks()))
    held, altered = tmp_path / "values.json", tmp_path / "altered.json"
    held.write_text(json.dumps(EDITED))
    altered.write_text(json.dumps({"replicas": 20}))
    args = ["verify", edited.receipt, "--breakpoint", edited.breakpoint_id, "--jwks", str(jwks)]

    assert bpm([*args, "--values", str(held)]) == 0
    assert json.loads(capsys.readouterr().out)["valuesDigest"] == values_digest(EDITED)
    assert bpm([*args, "--values", str(altered)]) == 1
    assert "did not approve the values" in capsys.readouterr().err


def released_with(values: dict, *, edited: bool) -> dict:
    return {
        "approved": True,
        "respondedBy": "alice",
        "feedback": "",
        "values": values,
        "edited": edited,
        "valuesDigest": values_digest(values),
    }


def test_the_sdk_sends_form_and_proposal_and_reads_the_values(scripted):
    server = scripted(
        Answer(201, breakpoint_json()),
        Answer(200, status_json(status="released", result=released_with(EDITED, edited=True))),
    )
    with Client(server.url, "bpm_test", strict=True) as client:
        result = client.breakpoint("Scale?", form=FORM, proposal=PROPOSAL)

    sent = json.loads(server.seen[0].body)["payload"]
    assert (sent["form"], sent["proposal"]) == (FORM, PROPOSAL)
    assert (result.values, result.edited, result.values_digest) == (
        EDITED,
        True,
        values_digest(EDITED),
    )


def test_bpm_ask_with_a_form_prints_the_values(scripted, tmp_path, capsys):
    (tmp_path / "form.json").write_text(json.dumps(FORM))
    (tmp_path / "proposal.json").write_text(json.dumps(PROPOSAL))
    answers = [
        Answer(201, breakpoint_json()),
        Answer(200, status_json(status="released", result=released_with(EDITED, edited=True))),
    ]
    args = ["ask", "Scale?", "--form", str(tmp_path / "form.json")]
    args += ["--proposal", str(tmp_path / "proposal.json")]

    server = scripted(*answers)
    assert bpm(["--url", server.url, "--token", "bpm_test", *args]) == 0
    out = capsys.readouterr().out
    assert 'values (edited): {"replicas": 2}' in out
    assert json.loads(server.seen[0].body)["payload"]["proposal"] == PROPOSAL

    server = scripted(*answers)
    assert bpm(["--url", server.url, "--token", "bpm_test", *args, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert (printed["values"], printed["edited"]) == (EDITED, True)


def test_bpm_ask_refuses_a_form_file_that_is_not_an_object(tmp_path, capsys):
    (tmp_path / "form.json").write_text("[1]")

    code = bpm(["--url", "http://127.0.0.1:9", "--token", "t", "ask", "Q?", "--form",
                str(tmp_path / "form.json")])  # fmt: skip

    assert code == 4
    assert "expected a JSON object" in capsys.readouterr().err


def test_the_mcp_tool_sends_form_and_proposal_and_returns_the_values(scripted):
    server = scripted(
        Answer(201, breakpoint_json()),
        Answer(200, status_json(status="released", result=released_with(EDITED, edited=True))),
    )

    result = mcp_call(
        server.url,
        "request_human_approval",
        {"question": "Scale?", "form": FORM, "proposal": PROPOSAL},
    )

    assert not result.is_error
    assert result.structured_content["values"] == EDITED
    assert result.structured_content["edited"] is True
    assert json.loads(server.seen[0].body)["payload"]["form"] == FORM
