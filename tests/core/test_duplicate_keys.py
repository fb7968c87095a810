"""A key sent twice in one JSON object is refused (issue 47): the standard library keeps
the last, other parsers the first, so `"preventSelfReview": true, ..., false` must not
quietly mean false. Every API body goes through the one parser (web.parsers); the check
is a counting scan (core.jsonkeys.may_hold_duplicates) that falls back to a parse seeing
every key only when it cannot rule a duplicate out."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from breakpoints.models import Breakpoint
from core.jsonkeys import duplicate_key, may_hold_duplicates
from tests.support.api import assert_error
from tests.support.factories import ReviewerFactory

URL = "/api/breakpoints"


def _post(client, raw: str, url: str = URL):
    return client.generic("POST", url, raw.encode(), content_type="application/json")


def test_a_payload_key_sent_twice_is_a_400_naming_its_path(agent_client):
    ReviewerFactory(username="bob")
    raw = (
        '{"requestedBy": "bob", "payload": {"question": "Ship?", '
        '"preventSelfReview": true, "title": "x", "preventSelfReview": false}}'
    )
    error = assert_error(_post(agent_client, raw), 400)
    assert list(error["details"]) == ["payload.preventSelfReview"]
    assert "'preventSelfReview'" in error["details"]["payload.preventSelfReview"][0]
    assert not Breakpoint.objects.exists()


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        ('{"payload": {"q": 1}, "payload": {"q": 2}}', "payload"),
        ('{"payload" : {"a": [{"k": 1, "k" : 2}]}}', "payload.a[0].k"),  # spaced
        ('{"payload": {"\\u0061": 1, "a": 2}}', "payload.a"),  # escaped alike
        ('{"payload": {"a\\\\": 1, "a\\\\": 2}}', "payload.a\\"),  # a key ending in \\
        ('{"payload": {"s": "\\u0022:", "a": 1, "a": 2}}', "payload.a"),
    ],
)
def test_duplicates_however_written_are_refused(agent_client, raw, path):
    assert list(assert_error(_post(agent_client, raw), 400)["details"]) == [path]
    assert not Breakpoint.objects.exists()


def test_the_same_key_in_different_objects_and_quotes_in_strings_are_accepted(agent_client):
    payload = {
        "question": 'He said "a": 1, "a": 2',
        "a": {"a": {"a": 1}},
        "list": [{"a": 1}, {"a": 2}],
        "context": {"files": [{"path": "x.json", "content": '{"a": 1, "a": 2}'}]},
    }
    response = _post(agent_client, json.dumps({"payload": payload}, indent=2))
    assert response.status_code == 201, response.content
    assert response.json()["payload"] == payload


def test_other_write_bodies_refuse_them_too(admin_client, reviewer_client, make_breakpoint):
    """Every API body has the one parser: a rule, a decision."""
    rule = '{"pattern": "deploy.*", "action": "auto-approve", "action": "never-auto-approve"}'
    assert list(assert_error(_post(admin_client, rule, "/api/rules"), 400)["details"]) == ["action"]
    bp = make_breakpoint()
    decision = '{"comment": "", "release": true, "approved": false, "approved": true}'
    response = _post(reviewer_client, decision, f"{URL}/{bp.pk}/feedback")
    assert list(assert_error(response, 400)["details"]) == ["approved"]
    assert Breakpoint.objects.get(pk=bp.pk).status == "waiting"


# Keys from a small alphabet (so that they repeat), values that hold quotes, colons and
# backslashes (what could fool a count), written compact, spaced or escaped.
_KEYS = st.text(alphabet='ab"\\:', max_size=3)
_VALUES = st.recursive(
    st.none() | st.integers() | st.text(alphabet='ab"\\: ', max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.lists(st.tuples(_KEYS, inner), max_size=4),
    max_leaves=12,
)


def _written(value, *, spaced: bool, ascii_only: bool) -> str:
    """JSON text of `value`, where a list of (key, value) pairs is an object that may
    repeat a key."""
    if isinstance(value, list) and value and all(isinstance(i, tuple) for i in value):
        colon = " : " if spaced else ":"
        items = (
            json.dumps(k, ensure_ascii=ascii_only)
            + colon
            + _written(v, spaced=spaced, ascii_only=ascii_only)
            for k, v in value
        )
        return "{" + ",".join(items) + "}"
    if isinstance(value, list):
        return (
            "[" + ",".join(_written(i, spaced=spaced, ascii_only=ascii_only) for i in value) + "]"
        )
    return json.dumps(value, ensure_ascii=ascii_only)


def _repeats(value) -> bool:
    if isinstance(value, list) and value and all(isinstance(i, tuple) for i in value):
        keys = [k for k, _ in value]
        return len(set(keys)) < len(keys) or any(_repeats(v) for _, v in value)
    if isinstance(value, list):
        return any(_repeats(i) for i in value)
    return False


@settings(max_examples=300, deadline=None)
@given(value=_VALUES, spaced=st.booleans(), ascii_only=st.booleans())
def test_the_scan_never_clears_a_body_that_repeats_a_key(value, spaced, ascii_only):
    text = _written(value, spaced=spaced, ascii_only=ascii_only)
    compact = json.dumps(json.loads(text), ensure_ascii=False, separators=(",", ":"))
    repeats = _repeats(value)
    if repeats:
        assert may_hold_duplicates(text, compact)
    assert (duplicate_key(text) is not None) == repeats
