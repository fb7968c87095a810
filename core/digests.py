"""Digests bound into every final result and receipt: what was shown, what was approved.

payloadDigest: "sha256:" + the hex SHA-256 of the RFC 8785 (JSON Canonicalization Scheme)
form of {"question", "title", "payload"} as stored (context files are inside the payload),
so any party holding the same content computes the same digest, in any language.
valuesDigest: the same over the approved values (a form's answer) alone.
"""

import hashlib
from typing import Any

import rfc8785

DIGEST_PREFIX = "sha256:"


def content_digest(*, question: str | None, title: str | None, payload: Any) -> str:
    """The payloadDigest of a breakpoint's question, title and payload."""
    canonical = rfc8785.dumps({"question": question, "title": title, "payload": payload})
    return DIGEST_PREFIX + hashlib.sha256(canonical).hexdigest()


def values_digest(values: Any) -> str | None:
    """The valuesDigest of a result's values: computed as payloadDigest is (RFC 8785,
    SHA-256) over the values alone; None when there are none."""
    if values is None:
        return None
    return DIGEST_PREFIX + hashlib.sha256(rfc8785.dumps(values)).hexdigest()
