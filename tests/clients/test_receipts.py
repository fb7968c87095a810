"""The SDK checks receipts (issue 22): `result.verified`, `Client.verify`, `bpm verify`.

Receipts come from the server's own services (signed with the suite's test key); the SDK
checks them with the JWKS the server publishes, pinned in a file or fetched from the
server (through an in-process WSGI transport), and refuses one whose claims were changed
or that states another result.
"""

import base64
import dataclasses
import json

import httpx
import jwt
import pytest
from bpm_client import Client, ReceiptInvalid
from bpm_client import receipts as sdk_receipts
from bpm_client.cli import main as bpm
from bpm_client.models import BreakpointResult
from django.core.wsgi import get_wsgi_application

from breakpoints.models import Breakpoint
from breakpoints.services import feedback_add
from core import receipts as server_receipts
from core.actors import Actor
from tests.support.receipts import TEST_KEY, suite_jwks


@pytest.fixture
def decided(make_breakpoint, reviewer) -> BreakpointResult:
    """A released breakpoint's result, as the SDK decodes it (with its id and status)."""
    bp = make_breakpoint(payload={"question": "Ship?", "options": ["Ship", "Hold"]})
    feedback_add(
        breakpoint_id=bp.pk,
        actor=Actor.for_user(reviewer),
        comment="ok",
        release=True,
        option="Ship",
    )
    stored = Breakpoint.objects.get(pk=bp.pk)
    result = BreakpointResult.from_json(stored.result, strict=True)
    return dataclasses.replace(result, breakpoint_id=bp.pk, status="released")


def tampered(receipt: str, **changes) -> str:
    header, body, signature = receipt.split(".")
    claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    forged = json.dumps({**claims, **changes}).encode()
    return ".".join([header, base64.urlsafe_b64encode(forged).rstrip(b"=").decode(), signature])


def test_a_result_verifies_against_the_pinned_jwks(decided):
    claims = sdk_receipts.check_result(decided, suite_jwks())
    assert (claims["option"], claims["respondedBy"]) == ("Ship", "alice")
    assert sdk_receipts.verified(decided, suite_jwks()).verified is True


def test_the_sdk_rejects_a_tampered_receipt(decided):
    forged = dataclasses.replace(decided, receipt=tampered(decided.receipt, approved=False))
    with pytest.raises(ReceiptInvalid, match="does not verify"):
        sdk_receipts.check_result(forged, suite_jwks())
    assert sdk_receipts.verified(forged, suite_jwks()).verified is False


def test_the_sdk_rejects_a_receipt_that_states_another_result(decided):
    """A genuine receipt carried by a changed result (the option swapped in transit)."""
    swapped = dataclasses.replace(decided, option="Hold")
    with pytest.raises(ReceiptInvalid, match="does not state this result: option"):
        sdk_receipts.check_result(swapped, suite_jwks())


@pytest.fixture
def other_id(make_breakpoint) -> str:
    """Another breakpoint (B), whose receipt the decided one's (A's) must never pass for."""
    return make_breakpoint(payload={"question": "Something else?"}).pk


def test_a_result_without_a_breakpoint_id_is_refused_without_one_given(decided):
    """A result built from a webhook body or a stored result carries no breakpoint id: a
    genuine receipt of another breakpoint with the same decision would pass for its own."""
    anonymous = dataclasses.replace(decided, breakpoint_id=None)
    with pytest.raises(ReceiptInvalid, match="carries no breakpoint id: pass breakpoint_id"):
        sdk_receipts.check_result(anonymous, suite_jwks())
    assert sdk_receipts.verified(anonymous, suite_jwks()).verified is False


def test_a_receipt_verifies_only_as_the_breakpoint_it_names(decided, other_id):
    """A's receipt: refused as B's (given, or the result's own id), accepted as A's."""
    anonymous = dataclasses.replace(decided, breakpoint_id=None)
    with pytest.raises(ReceiptInvalid, match="does not state this result: breakpointId"):
        sdk_receipts.check_result(anonymous, suite_jwks(), breakpoint_id=other_id)
    relabelled = dataclasses.replace(decided, breakpoint_id=other_id)
    with pytest.raises(ReceiptInvalid, match="does not state this result: breakpointId"):
        sdk_receipts.check_result(relabelled, suite_jwks())
    with pytest.raises(ReceiptInvalid, match=f"is breakpoint {decided.breakpoint_id}'s, not"):
        sdk_receipts.check_result(decided, suite_jwks(), breakpoint_id=other_id)
    given = sdk_receipts.check_result(anonymous, suite_jwks(), breakpoint_id=decided.breakpoint_id)
    assert given["breakpointId"] == decided.breakpoint_id
    assert sdk_receipts.verified(anonymous, suite_jwks(), breakpoint_id=other_id).verified is False


def test_the_client_verifies_with_the_servers_jwks(decided, agent_token):
    transport = httpx.WSGITransport(app=get_wsgi_application())
    with Client("http://testserver", agent_token, transport=transport) as client:
        assert client.verify(decided)["breakpointId"] == decided.breakpoint_id
        assert client._verified(decided).verified is True
        forged = dataclasses.replace(decided, receipt=tampered(decided.receipt, via="api"))
        assert client._verified(forged).verified is False
        anonymous = dataclasses.replace(decided, breakpoint_id=None)
        with pytest.raises(ReceiptInvalid, match="carries no breakpoint id"):
            client.verify(anonymous)
        assert client.verify(anonymous, breakpoint_id=decided.breakpoint_id)["approved"] is True


@pytest.fixture
def jwks_file(tmp_path):
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps(suite_jwks()))
    return path


def test_bpm_verify_exit_codes(decided, jwks_file, tmp_path, capsys):
    receipt, own = decided.receipt, decided.breakpoint_id
    assert bpm(["verify", receipt, "--breakpoint", own, "--jwks", str(jwks_file)]) == 0
    assert json.loads(capsys.readouterr().out)["breakpointId"] == own

    forged = tampered(receipt, option="Hold")
    assert bpm(["verify", forged, "--breakpoint", own, "--jwks", str(jwks_file)]) == 1
    assert "invalid receipt" in capsys.readouterr().err

    missing = tmp_path / "missing.json"
    assert bpm(["verify", receipt, "--breakpoint", own, "--jwks", str(missing)]) == 4
    assert "cannot read the JWKS" in capsys.readouterr().err


def test_bpm_verify_needs_the_breakpoint_and_refuses_anothers_receipt(
    decided, other_id, jwks_file, capsys
):
    receipt = decided.receipt
    assert bpm(["verify", receipt, "--jwks", str(jwks_file)]) == 4
    assert "Missing option '--breakpoint'" in capsys.readouterr().err

    assert bpm(["verify", receipt, "--breakpoint", other_id, "--jwks", str(jwks_file)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"breakpoint {decided.breakpoint_id}'s receipt, not {other_id}'s" in captured.err


def test_a_multi_seat_receipt_names_every_approver_and_bpm_verify_shows_them(
    make_breakpoint, three_experts, jwks_file, capsys
):
    """A collect-all decision's receipt states each approving seat and who answered for
    it; the SDK checks them against the result, and `bpm verify` prints them."""
    bp = make_breakpoint(
        payload={
            "question": "Ship?",
            "expert": ["tech-lead", "ops-lead"],
            "strategy": "collect-all",
        }
    )
    for seat in ("tech-lead", "ops-lead"):
        feedback_add(
            breakpoint_id=bp.pk, actor=Actor.for_user(three_experts[seat]), comment="", release=True
        )
    stored = Breakpoint.objects.get(pk=bp.pk).result
    result = dataclasses.replace(
        BreakpointResult.from_json(stored, strict=True), breakpoint_id=bp.pk, status="released"
    )
    approvers = [
        {"seat": "tech-lead", "respondedBy": "tina"},
        {"seat": "ops-lead", "respondedBy": "oscar"},
    ]

    assert sdk_receipts.check_result(result, suite_jwks())["approvers"] == approvers
    assert bpm(["verify", result.receipt, "--breakpoint", bp.pk, "--jwks", str(jwks_file)]) == 0
    assert json.loads(capsys.readouterr().out)["approvers"] == approvers
    fewer = dataclasses.replace(result, approvers=result.approvers[:1])
    with pytest.raises(ReceiptInvalid, match="does not state this result: approvers"):
        sdk_receipts.check_result(fewer, suite_jwks())
    forged = dataclasses.replace(result, receipt=tampered(result.receipt, approvers=approvers[:1]))
    with pytest.raises(ReceiptInvalid, match="does not verify"):
        sdk_receipts.check_result(forged, suite_jwks())


def test_a_receipt_with_a_claim_nobody_signs_is_refused(decided):
    """approvers is the one optional claim; any other extra claim is still refused."""
    claims = sdk_receipts.verify_receipt(decided.receipt, suite_jwks())
    key = server_receipts.key_from_entry(TEST_KEY)
    headers = {"kid": "test-1", "typ": "bpm-receipt+jws"}
    extra = jwt.encode({**claims, "admin": True}, key.private_key, "EdDSA", headers=headers)
    with pytest.raises(ReceiptInvalid, match="claims are exactly"):
        sdk_receipts.verify_receipt(extra, suite_jwks())
