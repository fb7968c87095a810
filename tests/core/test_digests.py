"""core.digests writes RFC 8785's canonical form: its fast path (the standard library's
encoder, for JSON without floats) agrees with the rfc8785 package on every value, and what
either cannot write is refused the same way."""

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from core.digests import NotDigestible, canonical_json, content_digest

# Text from every plane: control characters, quotes and backslashes, the U+E000-U+FFFF
# range where UTF-16 and code-point order differ, and characters past U+FFFF.
TEXT = st.text(
    alphabet=st.one_of(
        st.characters(codec="utf-8"),
        st.sampled_from(['"', "\\", "\x00", "\x1f", "\x7f", "\u2028", "\ue000", "\uffff"]),
        st.characters(min_codepoint=0x10000, max_codepoint=0x10FFFF),
    ),
    max_size=12,
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    TEXT,
)


def json_of(scalars):
    return st.recursive(
        scalars,
        lambda children: st.one_of(
            st.lists(children, max_size=5), st.dictionaries(TEXT, children, max_size=5)
        ),
        max_leaves=30,
    )


@settings(max_examples=400, deadline=None)
@given(json_of(SCALARS))
def test_the_canonical_form_is_rfc8785s_for_any_json(value):
    assert canonical_json(value) == rfc8785.dumps(value)


@settings(max_examples=400, deadline=None)
@given(json_of(st.one_of(st.none(), st.booleans(), st.integers(-(2**53) + 1, 2**53 - 1), TEXT)))
def test_the_canonical_form_is_rfc8785s_for_json_without_floats(value):  # the fast path's
    assert canonical_json(value) == rfc8785.dumps(value)


@pytest.mark.parametrize(
    "value",
    [
        {"b": 1, "a": [True, None, "x"]},
        {"\ue000": 1, "\U0001f600": 2},  # UTF-16 puts the emoji first, code points last
        {"text": 'quote " backslash \\ newline \n tab \t bell \x07 del \x7f'},
        {"n": 2**53 - 1, "m": -(2**53) + 1},
        {"float": 1.0, "small": 1e-7, "big": 1e21},
        ("tuple", "of", "strings"),
    ],
)
def test_the_cases_where_the_encoders_could_part_agree(value):
    assert canonical_json(value) == rfc8785.dumps(value)


@pytest.mark.parametrize(
    "value",
    [
        {"n": 2**53},  # past JSON's safe integers
        {"f": float("nan")},
        {1: "a key that is not a string"},
        {"s": "lone surrogate \ud800"},
        {"set": {1}},
    ],
)
def test_what_rfc8785_refuses_is_refused(value):
    """As NotDigestible: a 400 where a person asked, skipped where the system did."""
    with pytest.raises(NotDigestible) as caught:
        canonical_json(value)
    assert isinstance(caught.value.__cause__, rfc8785.CanonicalizationError)


def test_a_digest_is_the_sha256_of_the_canonical_form():
    import hashlib

    payload = {"z": [1, "ü"], "a": {"y": None}}
    expected = rfc8785.dumps({"question": "Q?", "title": None, "payload": payload})
    assert content_digest(question="Q?", title=None, payload=payload) == (
        "sha256:" + hashlib.sha256(expected).hexdigest()
    )
