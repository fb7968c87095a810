"""What a genuine receipt proves (issue 47): `bpm verify` succeeds only for an approval
(a genuine rejection is exit 1 unless --any-decision), and a receipt is compact JWS, its
segments base64url without padding: a signature with `==` appended is refused by the SDK
and by the server alike."""

import json

import pytest
from bpm_client import ReceiptInvalid
from bpm_client import receipts as sdk_receipts
from bpm_client.cli import main as bpm

from breakpoints.models import Breakpoint
from breakpoints.services import feedback_add
from core import receipts as server_receipts
from core.actors import Actor
from tests.support.receipts import suite_jwks


def _decided(make_breakpoint, reviewer, *, approved: bool) -> tuple[str, str]:
    """(breakpoint id, receipt) of a breakpoint the reviewer approved or rejected."""
    bp = make_breakpoint(payload={"question": "Ship?"})
    comment = "" if approved else "Not now."
    feedback_add(
        breakpoint_id=bp.pk,
        actor=Actor.for_user(reviewer),
        comment=comment,
        release=True,
        approved=approved,
    )
    return bp.pk, Breakpoint.objects.get(pk=bp.pk).result["receipt"]


@pytest.fixture
def jwks_file(tmp_path):
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps(suite_jwks()))
    return path


def test_bpm_verify_fails_a_genuine_rejection_unless_any_decision_is_asked(
    make_breakpoint, reviewer, jwks_file, capsys
):
    bp_id, receipt = _decided(make_breakpoint, reviewer, approved=False)
    args = ["verify", receipt, "--breakpoint", bp_id, "--jwks", str(jwks_file)]

    assert bpm(args) == 1
    captured = capsys.readouterr()
    assert json.loads(captured.out)["approved"] is False  # the claims, still shown
    assert "not an approval" in captured.err

    assert bpm([*args, "--any-decision"]) == 0
    assert json.loads(capsys.readouterr().out)["approved"] is False


def test_bpm_verify_passes_a_genuine_approval(make_breakpoint, reviewer, jwks_file, capsys):
    bp_id, receipt = _decided(make_breakpoint, reviewer, approved=True)
    assert bpm(["verify", receipt, "--breakpoint", bp_id, "--jwks", str(jwks_file)]) == 0
    assert json.loads(capsys.readouterr().out)["approved"] is True


def test_the_help_says_what_exit_0_means(capsys):
    assert bpm(["verify", "--help"]) == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert "--any-decision" in shown
    assert "0 a genuine approval" in shown


@pytest.mark.parametrize("padding", ["=", "=="])
def test_a_padded_signature_is_refused_by_the_sdk_and_the_server(
    make_breakpoint, reviewer, jwks_file, capsys, padding
):
    bp_id, receipt = _decided(make_breakpoint, reviewer, approved=True)
    padded = receipt + padding
    assert server_receipts.verify(receipt, suite_jwks())["approved"] is True

    with pytest.raises(ReceiptInvalid, match="base64url without padding"):
        sdk_receipts.verify_receipt(padded, suite_jwks())
    with pytest.raises(server_receipts.ReceiptError, match="base64url without padding"):
        server_receipts.verify(padded, suite_jwks())
    assert bpm(["verify", padded, "--breakpoint", bp_id, "--jwks", str(jwks_file)]) == 1
    assert "base64url without padding" in capsys.readouterr().err
