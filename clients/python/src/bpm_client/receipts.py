"""Check the service's signed receipts, offline, with PyJWT (no Django, no server code).

A final result carries `receipt`: a compact JWS (EdDSA over Ed25519, header typ
`bpm-receipt+jws`) whose claims state the decision: breakpointId, agentId, runId, status,
approved, option, respondedBy, via, decidedAt, payloadDigest and valuesDigest (the digest
of the values approved, a form's answer), and on a collect-all or quorum decision
approvers (each approving seat and who answered for it). It verifies with a key of
the service's JWKS (`GET /.well-known/jwks.json`), found by the header's kid: pin a copy
(a file, a URL) or let the client fetch the server's (cached).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import httpx
import jwt
import rfc8785

from .errors import BpmError
from .models import BreakpointResult

ALGORITHM = "EdDSA"
RECEIPT_TYPE = "bpm-receipt+jws"
JWKS_PATH = "/.well-known/jwks.json"
# Compact JWS: three base64url segments without padding (RFC 7515 section 2), nothing else.
COMPACT_JWS = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+")
RECEIPT_CLAIMS = frozenset(
    {
        "breakpointId",
        "agentId",
        "runId",
        "status",
        "approved",
        "option",
        "respondedBy",
        "via",
        "decidedAt",
        "payloadDigest",
        "valuesDigest",
    }
)
# Receipts signed before forms existed state no valuesDigest (they approved no values).
RECEIPT_CLAIMS_BEFORE_FORMS = RECEIPT_CLAIMS - {"valuesDigest"}
# Claims only some receipts state: approvers (each approving seat of a collect-all or
# quorum decision, and who answered for it: [{"seat", "respondedBy"}]); grantId and
# grantedBy (the grant that approved it, and the reviewer who gave it).
OPTIONAL_CLAIMS = frozenset({"approvers", "grantId", "grantedBy"})
DIGEST_PREFIX = "sha256:"


def values_digest(values: Any) -> str | None:
    """A result's valuesDigest: "sha256:" + the hex SHA-256 of the RFC 8785 JSON of the
    values (as the server computes payloadDigest); None when there are none. Values RFC
    8785 cannot write raise ValuesNotRepresentable: nothing can be verified of them."""
    if values is None:
        return None
    try:
        canonical = rfc8785.dumps(values)
    except rfc8785.CanonicalizationError as exc:
        raise ValuesNotRepresentable(
            f"cannot verify: the values hold what no digest covers ({exc}); RFC 8785 writes "
            "integers within ±9007199254740991 (2^53 - 1) and finite doubles, a larger number "
            "travels as a string"
        ) from exc
    return DIGEST_PREFIX + hashlib.sha256(canonical).hexdigest()


class ReceiptInvalid(BpmError):
    """A receipt that does not verify (a bad signature, an unknown key, changed claims),
    or that does not state the result it came with."""


class ValuesNotRepresentable(ReceiptInvalid):
    """Values no valuesDigest can be computed over (a number past ±(2^53 - 1), as older
    servers returned for a proposal's 1e16): the receipt cannot vouch for them, so they are
    refused like an invalid receipt's."""


class JwksUnavailable(BpmError):
    """The JWKS could not be read (a missing file, an unreachable URL, not a JWK Set)."""


def load_jwks(
    source: str | Path | Mapping[str, Any], *, http: httpx.Client | None = None
) -> dict[str, Any]:
    """A JWK Set from a mapping, an http(s) URL (fetched with `http` if given) or a file."""
    if isinstance(source, Mapping):
        data: Any = dict(source)
    elif str(source).startswith(("http://", "https://")) or (http and str(source) == JWKS_PATH):
        try:
            response = (http or httpx).get(str(source), timeout=10.0)
            response.raise_for_status()
            data = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise JwksUnavailable(f"cannot fetch the JWKS at {source}: {exc}") from exc
    else:
        try:
            data = json.loads(Path(source).read_text())
        except (OSError, ValueError) as exc:
            raise JwksUnavailable(f"cannot read the JWKS in {source}: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("keys"), list):
        raise JwksUnavailable('not a JWK Set: expected {"keys": [...]}')
    return data


def verify_receipt(receipt: str, jwks: Mapping[str, Any]) -> dict[str, Any]:
    """The claims of `receipt` if a key of `jwks` signed it; else raise ReceiptInvalid.
    A receipt is compact JWS: base64url without padding (`==` on the signature is refused,
    as JWS requires, though a lenient decoder would take it)."""
    if not isinstance(receipt, str) or not COMPACT_JWS.fullmatch(receipt):
        raise ReceiptInvalid("not a receipt: a compact JWS is base64url without padding")
    try:
        header = jwt.get_unverified_header(receipt)
        keys = {key.key_id: key for key in jwt.PyJWKSet.from_dict(dict(jwks)).keys}
    except jwt.PyJWTError as exc:
        raise ReceiptInvalid(f"not a receipt: {exc}") from exc
    if header.get("alg") != ALGORITHM or header.get("typ") != RECEIPT_TYPE:
        raise ReceiptInvalid(f"not a receipt: alg must be {ALGORITHM}, typ {RECEIPT_TYPE}")
    kid = header.get("kid")
    key = keys.get(kid) if isinstance(kid, str) else None
    if key is None:
        raise ReceiptInvalid(f"no key of the JWKS has kid {kid!r}")
    try:
        claims = jwt.decode(receipt, key.key, algorithms=[ALGORITHM])
    except jwt.PyJWTError as exc:
        raise ReceiptInvalid(f"the receipt does not verify: {exc}") from exc
    if set(claims) - OPTIONAL_CLAIMS not in (RECEIPT_CLAIMS, RECEIPT_CLAIMS_BEFORE_FORMS):
        raise ReceiptInvalid(
            f"a receipt's claims are exactly: {', '.join(sorted(RECEIPT_CLAIMS))} "
            f"(and, on some, {', '.join(sorted(OPTIONAL_CLAIMS))})"
        )
    return claims


def check_result(
    result: BreakpointResult,
    jwks: Mapping[str, Any],
    *,
    breakpoint_id: str | None = None,
    values: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The receipt's claims, once it verifies and states this very result of this very
    breakpoint (breakpointId, approved, option, respondedBy, payloadDigest; status when the
    result has it; approvers when the receipt names them) and these values (`values`, else
    the result's own: valuesDigest); else raise ReceiptInvalid. An executor handed the
    values checks those it will run.

    The breakpoint is `breakpoint_id`, else the result's own: a result without one (built
    from a webhook body, a stored result) needs it given, or any breakpoint's receipt with
    the same decision would pass for its receipt.
    """
    if not result.receipt:
        raise ReceiptInvalid("the result carries no receipt")
    expected = expected_breakpoint(result, breakpoint_id)
    claims = verify_receipt(result.receipt, jwks)
    stated = {
        "breakpointId": expected,
        "approved": result.approved,
        "option": result.option,
        "respondedBy": result.responded_by,
        "payloadDigest": result.payload_digest,
        "valuesDigest": values_digest(values if values is not None else result.values),
    }
    if result.status is not None:
        stated["status"] = result.status
    if "approvers" in claims:  # a collect-all or quorum decision names its approvers
        stated["approvers"] = _approvers(result)
    differing = sorted(name for name, value in stated.items() if claims.get(name) != value)
    if differing:
        raise ReceiptInvalid(f"the receipt does not state this result: {', '.join(differing)}")
    return claims


def _approvers(result: BreakpointResult) -> list[dict[str, str]] | None:
    """The result's approvers as the receipt states them."""
    if result.approvers is None:
        return None
    return [{"seat": a.seat, "respondedBy": a.responded_by} for a in result.approvers]


def expected_breakpoint(result: BreakpointResult, breakpoint_id: str | None) -> str:
    """The breakpoint whose receipt this must be: given, or the result's (never guessed)."""
    given = breakpoint_id or result.breakpoint_id
    if not given:
        raise ReceiptInvalid(
            "which breakpoint's receipt is this? The result carries no breakpoint id: pass "
            "breakpoint_id (a receipt is only valid for the breakpoint it names)"
        )
    if result.breakpoint_id and result.breakpoint_id != given:
        raise ReceiptInvalid(f"the result is breakpoint {result.breakpoint_id}'s, not {given}'s")
    return given


def verified(
    result: BreakpointResult, jwks: Mapping[str, Any], *, breakpoint_id: str | None = None
) -> BreakpointResult:
    """The result with `verified` set: True when check_result passes, else False."""
    try:
        check_result(result, jwks, breakpoint_id=breakpoint_id)
    except ReceiptInvalid:
        return dataclasses.replace(result, verified=False)
    return dataclasses.replace(result, verified=True)


class JwksCache:
    """The server's JWKS, fetched once and kept `max_age` seconds (a receipt whose kid it
    does not list fetches it again: a key rotated in since)."""

    def __init__(self, fetch: Callable[[], dict[str, Any]], max_age: float = 3600.0):
        self.fetch = fetch
        self.max_age = max_age
        self._cached: tuple[float, dict[str, Any]] | None = None

    def get(self, *, kid: str | None = None) -> dict[str, Any]:
        cached = self._cached
        if cached is not None and time.monotonic() - cached[0] < self.max_age:
            if kid is None or _lists(cached[1], kid):
                return cached[1]
        jwks = self.fetch()
        self._cached = (time.monotonic(), jwks)
        return jwks


def _lists(jwks: Mapping[str, Any], kid: str) -> bool:
    return any(isinstance(key, dict) and key.get("kid") == kid for key in jwks["keys"])


def receipt_kid(receipt: str) -> str | None:
    """The kid a receipt's header names (None when it is not a JWS)."""
    try:
        return jwt.get_unverified_header(receipt).get("kid")
    except jwt.PyJWTError:
        return None
