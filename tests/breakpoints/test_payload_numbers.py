"""Payload numbers are I-JSON (RFC 7493), and payloadDigest recomputes from what is returned.

An integer is accepted within ±(2^53 - 1), the integers every JSON parser holds exactly;
past it (2^53 included: Python reads it as an int that RFC 8785 refuses, JavaScript as a
double) it is a 400 naming its path. Any other number is a double, and must be finite
(1e400 parses as infinity). What is accepted comes back, in the single read and in the
list, on PostgreSQL and SQLite alike, as numbers from which a client applying the receipts
doc's recipe gets the stored payloadDigest: PostgreSQL writes 1e21 as
1000000000000000000000, which is given back as the double it is.
"""

import json
import re

import pytest
from django.conf import settings
from django.db import connection

from breakpoints.models import Breakpoint
from breakpoints.payload.validation import validate_payload
from breakpoints.selectors import breakpoint_page_list, listed_rows
from core.exceptions import InvalidInput
from core.ijson import as_doubles
from core.rawjson import RawJSON
from notifications.models import Delivery
from notifications.services import delivery_attempt, webhook_add
from tests.support.api import assert_error

LIST = "/api/breakpoints"
EDGE = 2**53 - 1  # Number.MAX_SAFE_INTEGER


def docs_recipe():
    """payload_digest as docs/receipts.md writes it: the recipe itself is what is tested."""
    text = (settings.BASE_DIR / "docs" / "receipts.md").read_text()
    section = text.split("## What was approved", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert code, "docs/receipts.md lost its digest recipe"
    scope: dict = {}
    exec(code.group(1), scope)  # noqa: S102 - our own documentation
    return scope["payload_digest"]


def create_raw(client, payload_text: str):
    """POST a create body whose payload is this exact JSON text (its literals as written)."""
    body = '{"title": "Numbers", "payload": ' + payload_text + "}"
    return client.post(LIST, data=body.encode(), content_type="application/json")


def digest_of(represented: dict) -> str:
    return docs_recipe()(represented["question"], represented["title"], represented["payload"])


# --- refused: a 400 naming the path ----------------------------------------------------------


@pytest.mark.parametrize(
    ("payload_text", "path"),
    [
        ('{"attempt": 9007199254740993}', "payload.attempt"),  # 2^53 + 1: the 500
        ('{"attempt": 9007199254740992}', "payload.attempt"),  # 2^53: the first one refused
        ('{"a": {"b": [1, -9007199254740992]}}', "payload.a.b[1]"),  # -(2^53)
        ('{"id": 18446744073709551615}', "payload.id"),  # a 64-bit id: send it as a string
        ('{"size": 1e400}', "payload.size"),  # overflows a double: infinity
        ('{"deep": [[{"x": -1E999}]]}', "payload.deep[0][0].x"),
    ],
)
def test_a_number_that_is_not_i_json_is_400_naming_its_path(agent_client, payload_text, path):
    response = create_raw(agent_client, payload_text)

    error = assert_error(response, 400)
    assert path in error["details"], error
    assert not Breakpoint.objects.exists()


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_literals_are_400(agent_client, literal):
    assert_error(create_raw(agent_client, '{"x": ' + literal + "}"), 400)
    assert not Breakpoint.objects.exists()


@pytest.mark.parametrize("value", [2**53, -(2**53), 2**64, float("inf"), float("nan")])
def test_the_service_refuses_them_whoever_calls_it(value):
    """Not only the API's parser: a trigger action or a command goes through the same rule."""
    with pytest.raises(InvalidInput) as caught:
        validate_payload({"items": [{"n": value}]})
    assert "payload.items[0].n" in caught.value.details


@pytest.mark.parametrize("value", [EDGE, -EDGE, 0, 2.0**53, 1e21, -0.0, 5e-324])
def test_the_edges_of_the_range_are_accepted(value):
    validate_payload({"n": value, "attempt": EDGE})


def test_a_finite_number_beyond_a_double_is_400_in_any_body(admin_client):
    """Every JSON body, not only payloads: no database column stores an infinity."""
    body = b'{"name": "r", "pattern": "a.*", "channels": [], "defaults": {"x": 1e400}}'
    response = admin_client.post("/api/routes", data=body, content_type="application/json")
    assert "defaults.x" in assert_error(response, 400)["details"]


# --- accepted: the digest recomputes from what is returned -------------------------------------

# Literals as an agent may write them; each value must come back as the number it names.
NUMBERS = (
    '{"question": "Ship it?", "floats": [0.1, 123.456, -2.5, 1.0, 0.5e1],'
    ' "exponents": [1e21, 1E+21, 1e-7, 1.5e300, 1.7976931348623157e308, 5e-324, 1e16, 1e-400],'
    ' "zeros": [-0.0, 0.0, 0, -0],'
    ' "integers": [9007199254740991, -9007199254740991, 9007199254740992.0, 4503599627370496],'
    ' "keys": {"é": 1, "e\\u0301": 2, "日本": 3, "\\ud83d\\ude00": 4, "\\ufb01": 5, "B": 6,'
    ' "a": 7, "": 8, "\\u0080": 9},'
    ' "nested": {"z": [{"y": 1e22, "x": -1.5e-300}], "attempt": 3}}'
)


def test_the_digest_recomputes_from_the_single_read_and_the_list(agent_client, reviewer_client):
    """Floats, exponents, -0.0, the largest exact integers, 2^53 as a double, keys that
    RFC 8785 sorts by UTF-16 code units (😀 before ﬁ): the recipe gives the stored digest
    from the created answer, from GET /api/breakpoints/{id} and from the list."""
    created = create_raw(agent_client, NUMBERS)
    assert created.status_code == 201, created.content
    stored = Breakpoint.objects.get().payload_digest

    answers = {
        "created": json.loads(created.content),
        "read": json.loads(agent_client.get(f"{LIST}/{created.json()['breakpointId']}").content),
        "listed": json.loads(reviewer_client.get(LIST).content)["results"][0],
        "listed (agent)": json.loads(agent_client.get(LIST).content)["results"][0],
    }

    for where, represented in answers.items():
        assert represented["payloadDigest"] == stored, where
        assert digest_of(represented) == stored, where
        exponents = represented["payload"]["exponents"]
        assert exponents[:4] == [1e21, 1e21, 1e-7, 1.5e300], where
        assert all(isinstance(value, float) for value in exponents), where
        assert represented["payload"]["integers"][:2] == [EDGE, -EDGE], where
        assert represented["payload"]["nested"]["z"][0] == {"y": 1e22, "x": -1.5e-300}, where


def test_the_digest_recomputes_from_a_webhook_body(agent_client, settings, make_receiver):
    """Webhook bodies carry the representation (stored as jsonb in the outbox, so PostgreSQL
    writes 1e21 there as a long integer too): a subscriber gets the same numbers."""
    settings.BPM_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    receiver = make_receiver()
    webhook_add(url=receiver.url, event_types=["created"], secret="")
    created = create_raw(agent_client, NUMBERS)
    assert created.status_code == 201, created.content

    delivery_attempt(Delivery.objects.get().pk)

    data = json.loads(receiver.received[0].body)["data"]
    assert digest_of(data) == Breakpoint.objects.get().payload_digest == data["payloadDigest"]


def test_the_digest_of_the_payload_as_sent_is_the_stored_one(agent_client):
    """The agent's own side: the recipe over what it sent (parsed by its json) agrees."""
    created = create_raw(agent_client, NUMBERS)
    sent = json.loads(NUMBERS)
    assert docs_recipe()("Ship it?", "Numbers", sent) == created.json()["payloadDigest"]


def test_a_long_integer_from_the_database_is_given_back_as_the_double_it_stores():
    """What PostgreSQL writes for 1e21 and 1.5e300 (read back by Python as ints); an exact
    integer stays as it is, and the common payload is the very same object."""
    parsed = {"a": 10**21, "b": "12345678901234567890", "c": [{"d": -(15 * 10**299)}]}
    assert as_doubles(parsed) == {"a": 1e21, "b": "12345678901234567890", "c": [{"d": -1.5e300}]}
    assert type(as_doubles(parsed)["a"]) is float
    plain = {"n": EDGE, "s": "x" * 40, "f": [1.5, -EDGE]}
    assert as_doubles(plain) is plain


def test_a_listed_payload_is_passed_through_as_text_unless_it_holds_a_long_number(
    agent_client, reviewer
):
    """The list's fast path stays: only the rare payload PostgreSQL writes a long integer
    for is parsed (on SQLite, which keeps the exponent, none is)."""
    plain = create_raw(agent_client, '{"question": "Plain?", "n": [1, 2.5, 9007199254740991]}')
    big = create_raw(agent_client, '{"question": "Big?", "n": 1e21}')
    assert plain.status_code == big.status_code == 201

    rows = {row["id"]: row for row in listed_rows(breakpoint_page_list(reviewer))}

    assert isinstance(rows[plain.json()["breakpointId"]]["payload"], RawJSON)
    big_payload = rows[big.json()["breakpointId"]]["payload"]
    if connection.vendor == "postgresql":
        assert big_payload == {"question": "Big?", "n": 10**21}  # as jsonb wrote it
    else:
        assert isinstance(big_payload, RawJSON) and "1e+21" in big_payload.text
