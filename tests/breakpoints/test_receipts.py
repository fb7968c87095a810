"""Approvals an auditor can trust (issue 22): payloadDigest and signed receipts.

The digest is the SHA-256 of the RFC 8785 JSON of what the reviewer is shown (question,
title, payload with its context files): the same content gives the same digest in any
process, one byte changes it. Every final result carries it and a receipt, a compact JWS
(EdDSA) that verifies with GET /.well-known/jwks.json and with nothing else.
"""

import base64
import hashlib
import json
import subprocess
import sys

import jwt
import pytest
from django.conf import settings as django_settings
from django.core.management import call_command

from breakpoints.models import Breakpoint
from breakpoints.services import (
    breakpoint_cancel,
    breakpoint_expire_if_due,
    breakpoints_expire_due,
    feedback_add,
)
from core import receipts
from core.actors import Actor
from core.digests import content_digest
from core.receipts import RECEIPT_CLAIMS, ReceiptError
from notifications.models import Delivery
from notifications.services import webhook_add
from policies.autoapproval import rule_create
from tests.support.receipts import OTHER_KEY, TEST_KEY, keys_setting, suite_jwks
from tests.support.records import backdate_expiry


def ask(content: str = "Step 1: migrate\n", **more) -> dict:
    return {
        "question": "Apply the plan?",
        "title": "Plan",
        "context": {"files": [{"path": "plan.md", "format": "markdown", "content": content}]},
        **more,
    }


def claims_of(receipt: str) -> dict:
    return receipts.verify(receipt, suite_jwks())


# --- the digest ----------------------------------------------------------------------------


def test_the_digest_is_of_what_the_reviewer_sees_and_the_same_in_another_process(
    make_breakpoint,
):
    bp = make_breakpoint(payload=ask())
    stored = Breakpoint.objects.get(pk=bp.pk)
    assert stored.payload_digest.startswith("sha256:") and len(stored.payload_digest) == 71
    # Another interpreter (another hash seed: a restart), the stored content in another
    # key order: the same digest.
    reordered = json.dumps(
        {"payload": dict(reversed(list(stored.payload.items()))), "title": "Plan"}
    )
    script = (
        "import json, sys; from core.digests import content_digest; d = json.loads(sys.argv[1]);"
        "print(content_digest(question='Apply the plan?', title=d['title'], payload=d['payload']))"
    )
    other = subprocess.run(
        [sys.executable, "-c", script, reordered],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "12345", "PYTHONPATH": str(django_settings.BASE_DIR)},
    )
    assert other.stdout.strip() == stored.payload_digest


def test_one_byte_of_a_context_file_changes_the_digest(make_breakpoint):
    first = make_breakpoint(payload=ask("Step 1: migrate\n"))
    same = make_breakpoint(payload=ask("Step 1: migrate\n"))
    changed = make_breakpoint(payload=ask("Step 1: migrate!\n"))
    assert first.payload_digest == same.payload_digest
    assert changed.payload_digest != first.payload_digest


def test_the_digest_follows_rfc_8785():
    """Known answer: the canonical form sorts keys and writes numbers the ECMAScript way."""
    digest = content_digest(question=None, title="T", payload={"b": 1.0, "a": "é"})
    canonical = '{"payload":{"a":"é","b":1},"question":null,"title":"T"}'.encode()
    assert digest == "sha256:" + hashlib.sha256(canonical).hexdigest()


# --- every final result carries the digest and a receipt ---------------------------------------


def _assert_sealed(bp_id: str, *, status: str, via: str) -> dict:
    stored = Breakpoint.objects.get(pk=bp_id)
    claims = claims_of(stored.result["receipt"])
    assert set(claims) == set(RECEIPT_CLAIMS)
    assert claims["breakpointId"] == stored.pk
    assert (claims["agentId"], claims["runId"]) == (stored.agent_id, stored.run_id)
    assert (claims["status"], claims["via"]) == (status, via)
    assert claims["approved"] is stored.result["approved"]
    assert claims["respondedBy"] == stored.result["respondedBy"]
    assert claims["payloadDigest"] == stored.payload_digest == stored.result["payloadDigest"]
    ended = stored.released_at or stored.expired_at or stored.cancelled_at
    assert claims["decidedAt"] == ended.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return claims


def test_released_expired_cancelled_auto_approved_and_timed_out_are_all_sealed(
    make_breakpoint, reviewer
):
    released = make_breakpoint(payload=ask(options=["Ship", "Hold"]))
    feedback_add(
        breakpoint_id=released.pk,
        actor=Actor.for_user(reviewer),
        comment="",
        release=True,
        option="Ship",
        via="slack",
    )
    assert _assert_sealed(released.pk, status="released", via="slack")["option"] == "Ship"

    cancelled = make_breakpoint(payload=ask())
    breakpoint_cancel(breakpoint_id=cancelled.pk, actor=Actor.for_agent("agent-a"))
    _assert_sealed(cancelled.pk, status="cancelled", via="api")

    swept, on_read = make_breakpoint(ttl_seconds=60), make_breakpoint(ttl_seconds=60)
    backdate_expiry(swept.pk, on_read.pk)
    breakpoint_expire_if_due(on_read.pk)
    breakpoints_expire_due()
    _assert_sealed(swept.pk, status="expired", via="system")
    _assert_sealed(on_read.pk, status="expired", via="system")

    policy = make_breakpoint(ttl_seconds=60, payload=ask(onTimeout="reject"))
    backdate_expiry(policy.pk)
    breakpoints_expire_due()
    assert _assert_sealed(policy.pk, status="released", via="system")["approved"] is False

    rule_create(actor=Actor.system("cli"), pattern="auto-plan")
    auto = make_breakpoint(payload={"question": "Go?", "breakpointId": "auto-plan"})
    assert Breakpoint.objects.get(pk=auto.pk).status == "released"
    _assert_sealed(auto.pk, status="released", via="rule")


def test_webhook_bodies_carry_the_receipt(make_breakpoint, reviewer):
    webhook_add(url="https://example.com/hook", event_types=["released"])
    bp = make_breakpoint(payload=ask())
    feedback_add(breakpoint_id=bp.pk, actor=Actor.for_user(reviewer), comment="", release=True)
    (delivery,) = Delivery.objects.filter(breakpoint_id=bp.pk, event_type="released")
    data = delivery.body["data"]
    assert data["payloadDigest"] == bp.payload_digest
    assert claims_of(data["result"]["receipt"])["payloadDigest"] == bp.payload_digest


# --- the receipt verifies with the published keys, and only as it was signed ------------------


@pytest.fixture
def receipt(make_breakpoint, reviewer) -> str:
    bp = make_breakpoint(payload=ask())
    feedback_add(breakpoint_id=bp.pk, actor=Actor.for_user(reviewer), comment="", release=True)
    return Breakpoint.objects.get(pk=bp.pk).result["receipt"]


def test_a_receipt_verifies_with_the_published_jwks(receipt, client):
    response = client.get("/.well-known/jwks.json")
    assert response.status_code == 200
    published = response.json()
    assert [key["kid"] for key in published["keys"]] == ["test-1"]
    assert all("d" not in key for key in published["keys"])  # never the private half
    assert jwt.get_unverified_header(receipt) == {
        "alg": "EdDSA",
        "kid": "test-1",
        "typ": "bpm-receipt+jws",
    }
    assert receipts.verify(receipt, published)["approved"] is True


def _b64(data: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


@pytest.mark.parametrize("claim", RECEIPT_CLAIMS)
def test_a_receipt_with_any_field_changed_fails(receipt, claim):
    header, body, signature = receipt.split(".")
    claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    changed = {True: False, False: True, None: "x"}.get(claims[claim], f"{claims[claim]}x")
    tampered = ".".join([header, _b64({**claims, claim: changed}), signature])
    with pytest.raises(ReceiptError, match="does not verify"):
        receipts.verify(tampered, suite_jwks())


def test_a_receipt_signed_with_another_key_fails(receipt):
    claims = claims_of(receipt)
    forged = receipts.sign(claims, receipts.key_from_entry({**OTHER_KEY, "kid": "test-1"}))
    with pytest.raises(ReceiptError, match="does not verify"):
        receipts.verify(forged, suite_jwks())
    unknown = receipts.sign(claims, receipts.key_from_entry(OTHER_KEY))
    with pytest.raises(ReceiptError, match="No published key"):
        receipts.verify(unknown, suite_jwks())


def test_after_a_rotation_old_receipts_still_verify_and_the_new_key_signs(
    receipt, make_breakpoint, reviewer, client, settings
):
    settings.BPM_RECEIPT_KEYS = keys_setting(OTHER_KEY, TEST_KEY)  # the new key first
    published = client.get("/.well-known/jwks.json").json()
    assert [key["kid"] for key in published["keys"]] == ["test-2", "test-1"]

    assert receipts.verify(receipt, published)["status"] == "released"
    bp = make_breakpoint(payload=ask())
    feedback_add(breakpoint_id=bp.pk, actor=Actor.for_user(reviewer), comment="", release=True)
    fresh = Breakpoint.objects.get(pk=bp.pk).result["receipt"]
    assert jwt.get_unverified_header(fresh)["kid"] == "test-2"
    assert receipts.verify(fresh, published)["breakpointId"] == bp.pk


def test_generate_receipt_key_prints_a_key_that_signs(capsys):
    call_command("generate_receipt_key", "--kid", "2027-01")
    entry = json.loads(capsys.readouterr().out)
    key = receipts.key_from_entry(entry)
    assert (key.kid, entry["kty"], entry["crv"]) == ("2027-01", "OKP", "Ed25519")
    claims = dict.fromkeys(RECEIPT_CLAIMS)
    assert receipts.verify(receipts.sign(claims, key), receipts.jwks([key])) == claims


def test_approvers_and_a_grant_are_the_claims_a_receipt_may_add(receipt):
    """A multi-seat decision's receipt adds approvers, a grant's approval grantId and
    grantedBy; no other claim is signed or taken."""
    key = receipts.key_from_entry(TEST_KEY)
    claims = claims_of(receipt)
    approvers = [{"seat": "tech-lead", "respondedBy": "tina"}]
    grant = {"grantId": "grant-0123456789abcdef", "grantedBy": "alice"}

    with_approvers = receipts.sign({**claims, "approvers": approvers}, key)
    with_grant = receipts.sign({**claims, **grant}, key)

    assert receipts.verify(with_approvers, suite_jwks())["approvers"] == approvers
    assert receipts.verify(with_grant, suite_jwks()) == {**claims, **grant}
    with pytest.raises(ReceiptError, match="claims are exactly"):
        receipts.sign({**claims, "admin": True}, key)
    missing = {name: value for name, value in claims.items() if name != "via"}
    with pytest.raises(ReceiptError, match="claims are exactly"):
        receipts.sign({**missing, "approvers": approvers}, key)
