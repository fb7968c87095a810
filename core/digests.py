"""Digests bound into every final result and receipt: what was shown, what was approved.

payloadDigest: "sha256:" + the hex SHA-256 of the RFC 8785 (JSON Canonicalization Scheme)
form of {"question", "title", "payload"} as stored (context files are inside the payload),
so any party holding the same content computes the same digest, in any language.
valuesDigest: the same over the approved values (a form's answer) alone.

`canonical_json` writes that form. For JSON made of strings, booleans, null and integers
within JSON's safe range (no floats), RFC 8785's form is what the standard library's
encoder writes with sorted keys and no spaces: the same escapes (the two characters that
must be escaped, the control characters as \\b \\f \\n \\r \\t or \\u00xx in lower case,
nothing else), the integers' plain digits, and keys in the same order as long as none
holds a character from U+E000 to U+FFFF (RFC 8785 orders keys by their UTF-16 code units,
Python by code points: they differ only there). Such a value, the common case, is written
by that encoder (in C); anything else by the rfc8785 package. tests/core/test_digests.py
checks the two agree.
"""

import hashlib
import json
import re
from typing import Any

import rfc8785

from core.exceptions import InvalidInput
from core.ijson import answer_number_problems

DIGEST_PREFIX = "sha256:"

_SAFE_INTEGER = 2**53 - 1
# Where UTF-16 and code-point order differ (and the lone surrogates, which RFC 8785 refuses).
_ORDER_DIFFERS = re.compile("[\ud800-\udfff\ue000-\uffff]")
_PLAIN_SCALARS = (str, bool, type(None))


class NotDigestible(InvalidInput):
    """A value no digest covers: RFC 8785 cannot write it (an integer past ±(2^53 - 1), a
    float that is not finite). The doors refuse such numbers (core.ijson), so only a row
    stored before they did holds one: a 400 naming each number's JSON path where a person
    asked, skipped and logged where the system did (the TTL sweep)."""

    def __init__(self, at: str, value: Any, cause: Exception):
        problems = answer_number_problems(value, at) or {at: [str(cause)]}
        first_at, messages = next(iter(problems.items()))
        super().__init__(f"No digest can cover {first_at}: {messages[0]}", problems)


def content_digest(*, question: str | None, title: str | None, payload: Any) -> str:
    """The payloadDigest of a breakpoint's question, title and payload."""
    content = {"question": question, "title": title, "payload": payload}
    canonical = canonical_json(content, at="")
    return DIGEST_PREFIX + hashlib.sha256(canonical).hexdigest()


def values_digest(values: Any) -> str | None:
    """The valuesDigest of a result's values: computed as payloadDigest is (RFC 8785,
    SHA-256) over the values alone; None when there are none."""
    if values is None:
        return None
    return DIGEST_PREFIX + hashlib.sha256(canonical_json(values, at="values")).hexdigest()


def canonical_json(value: Any, *, at: str = "value") -> bytes:
    """The RFC 8785 canonical form of `value` (UTF-8); NotDigestible (its problems keyed by
    JSON path under `at`) for what it cannot write (floats that are not finite, integers
    past 2**53 - 1, other types)."""
    if _plain(value):
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        if _ORDER_DIFFERS.search(text) is None:
            return text.encode()
    try:
        return rfc8785.dumps(value)
    except rfc8785.CanonicalizationError as exc:
        raise NotDigestible(at, value, exc) from exc


def _plain(value: Any) -> bool:
    """Whether `value` holds only objects with string keys, arrays, strings, booleans, null
    and safe integers (exactly these types: subclasses may write themselves otherwise)."""
    pending = [value]
    while pending:
        item = pending.pop()
        kind = type(item)
        if kind in _PLAIN_SCALARS:
            continue
        if kind is int:
            if -_SAFE_INTEGER <= item <= _SAFE_INTEGER:
                continue
            return False
        if kind is dict:
            for key, member in item.items():
                if type(key) is not str:
                    return False
                pending.append(member)
            continue
        if kind is list or kind is tuple:
            pending.extend(item)
            continue
        return False
    return True
