"""notifications.outbox: a delivery's body is written by orjson, as the standard library
writes it (json.dumps(default=str), read back), whatever the data holds."""

import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from notifications.outbox import _body


@dataclass
class _Point:
    x: int


NOW = datetime(2026, 11, 28, 12, 0, 0, 123456, tzinfo=UTC)


@pytest.mark.parametrize(
    "data",
    [
        {"id": "bp-1", "payload": {"n": 1.5, "big": 1e16, "list": [1, "x", None, True]}},
        {"at": NOW, "id": uuid.UUID(int=7), "amount": Decimal("10.50"), "point": _Point(1)},
        {"text": 'line\u2028separator, é, 😀, quote " and backslash \\'},
        {"tuple": (1, 2), "nested": {"empty": {}, "none": None}},
        {"beyond 64 bits": 2**70, "negative": -(2**65)},  # orjson refuses: the fallback
        {1: "a key that is not a string"},  # likewise
    ],
)
def test_the_body_is_what_the_standard_library_writes(data):
    expected = json.loads(
        json.dumps({"type": "breakpoint.created", "timestamp": None, "data": data}, default=str)
    )
    body = _body("created", NOW, data)
    assert body["type"] == "breakpoint.created" and body["timestamp"].startswith("2026-11-28T12")
    assert body["data"] == expected["data"]
    assert json.dumps(body["data"], sort_keys=True) == json.dumps(expected["data"], sort_keys=True)
