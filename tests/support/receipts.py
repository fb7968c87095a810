"""Fixed receipt keys for tests (never used outside them): the suite signs with TEST_KEY;
OTHER_KEY is a second key, for rotation and for "signed by someone else"."""

import json

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
