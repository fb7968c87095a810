"""API tokens written from their documented form, independently of accounts.tokens.

`bpma_` (agent) or `bpmu_` (personal), 43 random base62 characters, then CRC32 of all of
that in 6 base62 characters (0-9, A-Z, a-z); the legacy form is `bpm_` + 43 URL-safe
base64 characters.
"""

import secrets
import string
import zlib

from accounts.models import ApiToken
from accounts.tokens import hash_token

BASE62 = string.digits + string.ascii_uppercase + string.ascii_lowercase


def base62(number: int, width: int) -> str:
    digits = ""
    for _ in range(width):
        number, digit = divmod(number, 62)
        digits = BASE62[digit] + digits
    return digits


def well_formed_token(prefix: str = "bpma_") -> str:
    """A token of the issued form, checksum and all, that was never issued: it costs a lookup."""
    body = prefix + "".join(secrets.choice(BASE62) for _ in range(43))
    return body + base62(zlib.crc32(body.encode()), 6)


def with_bad_checksum(raw: str) -> str:
    """`raw` with its last character changed: a typo, or a token cut and padded."""
    return raw[:-1] + ("0" if raw[-1] != "0" else "1")


def legacy_token(**fields) -> str:
    """A token as minted before the checksummed form, stored as those were (by hash)."""
    raw = "bpm_" + secrets.token_urlsafe(32)
    ApiToken.objects.create(prefix=raw[:12], token_hash=hash_token(raw), **fields)
    return raw
