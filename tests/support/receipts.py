"""Fixed receipt keys for tests (never used outside them): the suite signs with TEST_KEY;
OTHER_KEY is a second key, for rotation and for "signed by someone else"."""

import json

from core import receipts
from core.digests import values_digest

TEST_KEY = {
    "kid": "test-1",
    "kty": "OKP",
    "crv": "Ed25519",
    "x": "iOqhBc2x-Tuv8uSE4mhppqdVUv1oeUIhrhvre7ocu5Y",
    "d": "yKa6TbHNCSQfXb6g7EZesPhKKAOrkGGHerDOBsl1tF0",
}
OTHER_KEY = {
    "kid": "test-2",
    "kty": "OKP",
    "crv": "Ed25519",
    "x": "tb4kTSI8RI-YD4kC3z_3oGpBW9aRjQcheygj_-D48uo",
    "d": "W3t8mt6hVaryFoHPTuUd_Uxfb74rK66DBakkLSyTEvY",
}


def keys_setting(*keys: dict) -> str:
    """BPM_RECEIPT_KEYS holding these keys (the first signs)."""
    return json.dumps(list(keys))


TEST_KEYS_SETTING = keys_setting(TEST_KEY)


def suite_jwks() -> dict:
    """The published JWKS of the suite's key."""
    return receipts.jwks([receipts.key_from_entry(TEST_KEY)])


def unsealed(result: dict, *, via: str | None = None) -> dict:
    """A final result without its seal, once the seal is checked: the receipt verifies with
    the suite's key and states this result (approved, option, respondedBy, payloadDigest,
    valuesDigest; `via` when given). Tests compare what remains with the result they
    expect; `values` and `edited` stay in it only when there are values."""
    rest = dict(result)
    digest, receipt = rest.pop("payloadDigest"), rest.pop("receipt")
    claims = receipts.verify(receipt, suite_jwks())
    keys = ("approved", "option", "respondedBy", "payloadDigest", "valuesDigest")
    stated = {key: claims[key] for key in keys}
    assert stated == {
        "approved": result["approved"],
        "option": result.get("option"),
        "respondedBy": result.get("respondedBy"),
        "payloadDigest": digest,
        "valuesDigest": values_digest(result.get("values")),
    }
    assert rest.pop("valuesDigest") == claims["valuesDigest"]
    if rest.get("values") is None:
        assert (rest.pop("values"), rest.pop("edited")) == (None, False)
    if via is not None:
        assert claims["via"] == via
    return rest
