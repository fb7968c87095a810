"""The API's JSON renderer writes exactly the bytes DRF's JSONRenderer writes."""

import json
import uuid
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal

import pytest
from django.utils.translation import gettext_lazy
from rest_framework.renderers import JSONRenderer
from rest_framework.utils.serializer_helpers import ReturnDict, ReturnList

from core.rawjson import RawJSON
from web.api.renderers import FastJSONRenderer


@dataclass
class Point:
    x: int


VALUES = {
    "a breakpoint-like page": {
        "next": None,
        "results": [
            {
                "breakpointId": "bp-1",
                "payload": {"n": 1.5, "big": 2**62, "nested": [True, None, "é ✓ 𝄞"]},
                "tags": ["a", "b"],
            }
        ],
    },
    "line and paragraph separators": {"text": "a\u2028b\u2029c"},
    "control characters and quotes": {"text": 'tab\t"quote"\\ \x00 \x1f'},
    "datetimes with and without microseconds": [
        datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=UTC),
        datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        date(2026, 1, 2),
        time(3, 4, 5, 600),
    ],
    "lazy strings, Decimal, UUID, timedelta": [
        gettext_lazy("This field is required."),
        Decimal("1.10"),
        uuid.UUID(int=7),
        timedelta(seconds=90),
    ],
    "an integer beyond 64 bits": {"n": 2**70},
    "non-string keys": {1: "one", None: "none"},
    "DRF's return containers": ReturnDict(
        {"a": ReturnList([1, 2], serializer=None)}, serializer=None
    ),
    "a tuple of floats": (0.1, 1e16, -0.0, 123456789.125, 1e-4),
    "None": None,
}


@pytest.mark.parametrize("value", VALUES.values(), ids=VALUES.keys())
def test_writes_what_drf_writes(value):
    assert FastJSONRenderer().render(value) == JSONRenderer().render(value)


def test_a_tiny_float_is_the_same_number_with_a_shorter_exponent():
    value = {"x": 1e-7}

    assert FastJSONRenderer().render(value) == b'{"x":1e-7}'
    assert json.loads(FastJSONRenderer().render(value)) == json.loads(JSONRenderer().render(value))


def test_an_indented_answer_is_drf_s():
    value = {"a": [1, {"b": 2}]}
    media_type = "application/json; indent=2"

    assert FastJSONRenderer().render(value, media_type) == JSONRenderer().render(value, media_type)
    assert b"\n" in FastJSONRenderer().render(value, media_type)


def test_what_the_standard_library_refuses_is_still_refused():
    with pytest.raises(TypeError):
        JSONRenderer().render({"p": Point(1)})
    with pytest.raises(TypeError):
        FastJSONRenderer().render({"p": Point(1)})


# JSON passed through as text (core.rawjson): a list page's JSON columns.
RAW = {
    "an object, spaced as jsonb writes it": '{"n": 1.5, "nested": [true, null, "é ✓ 𝄞"]}',
    "a separator inside": '["a\u2028b"]',
    "an integer beyond 64 bits": '{"n": 1180591620717411303424}',
    "null": "null",
}


@pytest.mark.parametrize("text", RAW.values(), ids=RAW.keys())
def test_raw_json_is_embedded_as_the_value_it_writes(text):
    value = {"results": [{"payload": RawJSON(text), "id": "bp-1"}]}
    parsed = {"results": [{"payload": json.loads(text), "id": "bp-1"}]}

    written = FastJSONRenderer().render(value)

    assert json.loads(written) == parsed
    assert "\u2028".encode() not in written  # escaped as DRF escapes it elsewhere


@pytest.mark.parametrize("text", RAW.values(), ids=RAW.keys())
def test_raw_json_in_an_indented_answer_is_drf_s_of_the_parsed_value(text):
    media_type = "application/json; indent=2"
    value = {"payload": RawJSON(text), "at": datetime(2026, 1, 2, tzinfo=UTC)}
    parsed = {"payload": json.loads(text), "at": datetime(2026, 1, 2, tzinfo=UTC)}

    assert FastJSONRenderer().render(value, media_type) == JSONRenderer().render(parsed, media_type)
