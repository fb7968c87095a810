"""External events as a signed sender posts them (the generic source's headers), for the
tests that drive the trigger endpoint of a running system."""

import json
import time
from typing import Any

import httpx

from triggers.verification import sign_generic


def post_signed_event(
    client: httpx.Client, source: str, secret: str, delivery: str, body: Any
) -> httpx.Response:
    """POST `body` to /api/events/<source> signed with `secret`, as delivery `delivery`."""
    raw = json.dumps(body, separators=(",", ":")).encode()
    stamp = int(time.time())
    return client.post(
        f"/api/events/{source}",
        content=raw,
        headers={
            "Content-Type": "application/json",
            "X-Bpm-Timestamp": str(stamp),
            "X-Bpm-Signature": sign_generic(secret, raw, stamp),
            "X-Bpm-Event-Id": delivery,
        },
    )
