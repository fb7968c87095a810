"""The digest of what a reviewer is shown: bound into every final result and receipt.

"sha256:" + the hex SHA-256 of the RFC 8785 (JSON Canonicalization Scheme) form of
{"question", "title", "payload"} as stored (context files are inside the payload), so any
party holding the same content computes the same digest, in any language.
"""

import hashlib
from typing import Any

import rfc8785

DIGEST_PREFIX = "sha256:"


def content_digest(*, question: str | None, title: str | None, payload: Any) -> str:
    """The payloadDigest of a breakpoint's question, title and payload."""
    canonical = rfc8785.dumps({"question": question, "title": title, "payload": payload})
    return DIGEST_PREFIX + hashlib.sha256(canonical).hexdigest()
