"""Signed receipts: a compact JWS (EdDSA over Ed25519) of a breakpoint's final decision.

Pure functions over keys (no settings; core.receipt_keys loads them): sign the claims
with a private key, publish the public keys as a JWKS, verify a receipt against one.
The claims are exactly RECEIPT_CLAIMS, and any of OPTIONAL_CLAIMS; the header is
{"alg": "EdDSA", "kid", "typ"}.
"""

import json
import re
import secrets
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from jwt.algorithms import OKPAlgorithm

ALGORITHM = "EdDSA"
RECEIPT_TYPE = "bpm-receipt+jws"
# Compact JWS: three base64url segments without padding (RFC 7515 section 2), nothing else.
COMPACT_JWS = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+")
RECEIPT_CLAIMS = (
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
)
# Claims only some receipts state: `approvers` (each approving seat and who answered for
# it), on a collect-all or quorum decision's; `grantId` and `grantedBy` (the grant that
# approved it and the reviewer who gave it), on a grant's approval.
OPTIONAL_CLAIMS = ("approvers", "grantId", "grantedBy")


class ReceiptError(ValueError):
    """A receipt that does not verify, or a key entry that is not an Ed25519 JWK."""


@dataclass(frozen=True)
class ReceiptKey:
    """One signing key: its kid and its private JWK (kty OKP, crv Ed25519, d, x)."""

    kid: str
    jwk: dict[str, Any]

    @cached_property
    def private_key(self) -> Any:
        """The key loaded once (loading it took as long as a signature)."""
        return jwt.PyJWK(self.jwk, algorithm=ALGORITHM).key

    @property
    def public_jwk(self) -> dict[str, Any]:
        return {
            "kty": "OKP",
            "crv": "Ed25519",
            "x": self.jwk["x"],
            "kid": self.kid,
            "alg": ALGORITHM,
            "use": "sig",
        }


def key_from_entry(entry: Any) -> ReceiptKey:
    """A ReceiptKey from one configured entry: a private Ed25519 JWK with a kid."""
    if not isinstance(entry, dict):
        raise ReceiptError("A receipt key is a JSON object (a private Ed25519 JWK with a kid).")
    kid = entry.get("kid")
    if not isinstance(kid, str) or not kid:
        raise ReceiptError("A receipt key needs a kid (a non-empty string).")
    if entry.get("kty") != "OKP" or entry.get("crv") != "Ed25519" or not entry.get("d"):
        raise ReceiptError(f"Receipt key {kid!r} is not a private Ed25519 JWK (kty OKP, d).")
    try:
        jwt.PyJWK(entry, algorithm=ALGORITHM)
    except jwt.PyJWTError as exc:
        raise ReceiptError(f"Receipt key {kid!r} does not load: {exc}") from exc
    return ReceiptKey(kid=kid, jwk=dict(entry))


def key_generate(kid: str | None = None) -> dict[str, Any]:
    """A new private Ed25519 JWK with a kid (random unless given), as configured."""
    entry = json.loads(OKPAlgorithm.to_jwk(Ed25519PrivateKey.generate()))
    return {"kid": kid or f"bpm-{secrets.token_hex(4)}", **entry}


def jwks(keys: list[ReceiptKey]) -> dict[str, Any]:
    """The public keys as a JWK Set: what /.well-known/jwks.json publishes."""
    return {"keys": [key.public_jwk for key in keys]}


def sign(claims: dict[str, Any], key: ReceiptKey) -> str:
    """The compact JWS of `claims` (exactly RECEIPT_CLAIMS, and any of OPTIONAL_CLAIMS),
    signed with `key`."""
    if not _stated_exactly(claims):
        raise ReceiptError(_EXACTLY)
    headers = {"kid": key.kid, "typ": RECEIPT_TYPE}
    return jwt.encode(claims, key.private_key, algorithm=ALGORITHM, headers=headers)


def verify(receipt: str, key_set: dict[str, Any]) -> dict[str, Any]:
    """The claims of `receipt` if it verifies with a key of `key_set` (a JWKS), else
    raise ReceiptError: unknown kid, another algorithm or type, a bad signature, or
    claims other than RECEIPT_CLAIMS (and OPTIONAL_CLAIMS), or not base64url without padding
    (`==` on the signature: a lenient decoder would take it, JWS does not)."""
    if not isinstance(receipt, str) or not COMPACT_JWS.fullmatch(receipt):
        raise ReceiptError("Not a receipt: a compact JWS is base64url without padding.")
    try:
        header = jwt.get_unverified_header(receipt)
        keys = {k.key_id: k for k in jwt.PyJWKSet.from_dict(key_set).keys if k.key_id}
    except jwt.PyJWTError as exc:
        raise ReceiptError(f"Not a receipt: {exc}") from exc
    if header.get("alg") != ALGORITHM or header.get("typ") != RECEIPT_TYPE:
        raise ReceiptError(f"Not a receipt: alg must be {ALGORITHM}, typ {RECEIPT_TYPE}.")
    kid = header.get("kid")
    public = keys.get(kid) if isinstance(kid, str) else None
    if public is None:
        raise ReceiptError(f"No published key has kid {kid!r}.")
    try:
        claims = jwt.decode(receipt, public.key, algorithms=[ALGORITHM])
    except jwt.PyJWTError as exc:
        raise ReceiptError(f"The receipt does not verify: {exc}") from exc
    if not _stated_exactly(claims):
        raise ReceiptError(_EXACTLY)
    return claims


_EXACTLY = (
    f"A receipt's claims are exactly: {', '.join(RECEIPT_CLAIMS)} "
    f"(and, on some, {', '.join(OPTIONAL_CLAIMS)})."
)


def _stated_exactly(claims: dict[str, Any]) -> bool:
    """Whether `claims` are RECEIPT_CLAIMS, with none missing, and any of OPTIONAL_CLAIMS."""
    names = set(claims)
    return set(RECEIPT_CLAIMS) <= names and names <= {*RECEIPT_CLAIMS, *OPTIONAL_CLAIMS}
