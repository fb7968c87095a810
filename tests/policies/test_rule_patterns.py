"""Tests for policies.patterns (pure Python; no Django, no database)."""

from __future__ import annotations

import ast
import pickle
import re
import string
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies import patterns as rule_patterns
from policies.patterns import (
    MAX_PATTERN_LENGTH,
    Pattern,
    PatternError,
    Predicate,
    parse_pattern,
)

# --------------------------------------------------------------------------------------
# The seed guide's "Pattern Syntax" table
# --------------------------------------------------------------------------------------

DESIGN_REVIEW = "*.review(tags contains 'design')"
GATE_WITH_BOTH = "gate.*(tags contains 'prerequisites' AND expert = 'owner')"


@pytest.mark.parametrize(
    ("pattern", "key", "expected"),
    [
        # `confirm.*` -- any key starting with `confirm.`
        ("confirm.*", "confirm.star-repo", True),
        ("confirm.*", "confirm.a.b.c", True),
        ("confirm.*", "confirm.", True),
        ("confirm.*", "confirm", False),
        ("confirm.*", "confirmx.a", False),
        ("confirm.*", "other.confirm.x", False),
        ("confirm.*", "Confirm.star-repo", False),
        # `*.review` -- any key ending with `.review`
        ("*.review", "plan.review", True),
        ("*.review", "a.b.review", True),
        ("*.review", ".review", True),
        ("*.review", "review", False),
        ("*.review", "plan.reviewer", False),
        ("*.review", "plan.Review", False),
        ("*.review", "planreview", False),
        # `gate.deploy-production` -- exact match only
        ("gate.deploy-production", "gate.deploy-production", True),
        ("gate.deploy-production", "gate.deploy-production-eu", False),
        ("gate.deploy-production", "gate.deploy-productio", False),
        ("gate.deploy-production", "xgate.deploy-production", False),
        ("gate.deploy-production", "gate.deploy_production", False),
        ("gate.deploy-production", "GATE.DEPLOY-PRODUCTION", False),
    ],
)
def test_seed_table_key_globs_match_only_the_documented_keys(
    pattern: str, key: str, expected: bool
) -> None:
    assert parse_pattern(pattern).matches(key) is expected


@pytest.mark.parametrize(
    ("key", "tags", "expected"),
    [
        ("plan.review", ["design"], True),
        ("a.b.review", ["ux", "design"], True),
        ("plan.review", [], False),
        ("plan.review", ["ux"], False),
        ("plan.review", ["Design"], False),
        ("plan.review", ["designs"], False),
        ("plan.reviewer", ["design"], False),
        ("review", ["design"], False),
    ],
)
def test_seed_table_tag_predicate_requires_glob_match_and_exact_tag(
    key: str, tags: list[str], expected: bool
) -> None:
    assert parse_pattern(DESIGN_REVIEW).matches(key, tags=tags) is expected


@pytest.mark.parametrize(
    ("key", "tags", "experts", "expected"),
    [
        ("gate.deploy", ["prerequisites"], ["owner"], True),
        ("gate.a.b", ["x", "prerequisites"], ["security", "owner"], True),
        ("gate.deploy", ["prerequisites"], [], False),
        ("gate.deploy", [], ["owner"], False),
        ("gate.deploy", ["owner"], ["prerequisites"], False),
        ("gate.deploy", ["prerequisites"], ["owners"], False),
        ("other.deploy", ["prerequisites"], ["owner"], False),
    ],
)
def test_seed_table_and_predicates_all_must_hold(
    key: str, tags: list[str], experts: list[str], expected: bool
) -> None:
    pattern = parse_pattern(GATE_WITH_BOTH)
    assert pattern.matches(key, tags=tags, experts=experts) is expected


def test_seed_table_patterns_parse_into_expected_structure() -> None:
    assert parse_pattern("confirm.*") == Pattern("confirm.*", ())
    assert parse_pattern(DESIGN_REVIEW) == Pattern(
        "*.review", (Predicate("tags", "contains", "design"),)
    )
    assert parse_pattern(GATE_WITH_BOTH) == Pattern(
        "gate.*",
        (
            Predicate("tags", "contains", "prerequisites"),
            Predicate("expert", "=", "owner"),
        ),
    )


# --------------------------------------------------------------------------------------
# Globs
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("glob", "key", "expected"),
    [
        ("*", "", True),
        ("*", "anything.at-all", True),
        ("a*b", "ab", True),
        ("a*b", "a.x.b", True),
        ("a*b", "a.x.bc", False),
        ("*a*", "xyz", False),
        ("*a*", "xaz", True),
        ("a*a", "a", False),
        ("a*a", "aa", True),
        ("*.*", "nodot", False),
        ("*.*", "one.dot", True),
        ("a**b", "ab", True),
        ("*-*-*", "a-b", False),
        ("*-*-*", "a-b-c", True),
        ("*ab*b", "ab", False),  # a middle part may not overlap the suffix
        ("*ab*b", "abb", True),
        ("a*ba*a", "aba", False),
        ("a*ba*a", "abaa", True),
    ],
)
def test_star_matches_any_run_including_empty_and_is_anchored(
    glob: str, key: str, expected: bool
) -> None:
    assert parse_pattern(glob).matches(key) is expected


def test_star_prefix_matches_any_key_ending_with_suffix() -> None:
    pattern = parse_pattern("*.review")
    assert pattern.matches("x.review")
    assert pattern.matches("deep.nested.review")
    assert not pattern.matches("x.review.extra")


def test_glob_without_predicates_ignores_tags_and_experts() -> None:
    assert parse_pattern("confirm.*").matches("confirm.x", tags=["a"], experts=["b"])
    assert not parse_pattern("confirm.*").matches("deny.x", tags=["a"], experts=["b"])


# --------------------------------------------------------------------------------------
# Predicates
# --------------------------------------------------------------------------------------


def test_expert_contains_is_a_synonym_of_expert_equals_but_keeps_its_operator() -> None:
    with_contains = parse_pattern("gate.*(expert contains 'owner')")
    with_equals = parse_pattern("gate.*(expert = 'owner')")
    assert with_contains.predicates == (Predicate("expert", "contains", "owner"),)
    assert str(with_contains) == "gate.*(expert contains 'owner')"
    for experts, expected in [(["owner"], True), (["a", "owner"], True), (["other"], False)]:
        assert with_contains.matches("gate.x", experts=experts) is expected
        assert with_equals.matches("gate.x", experts=experts) is expected


def test_expert_predicate_checks_experts_not_tags() -> None:
    pattern = parse_pattern("a(expert = 'owner')")
    assert not pattern.matches("a", tags=["owner"])
    assert pattern.matches("a", experts=["owner"])


def test_tags_predicate_checks_tags_not_experts() -> None:
    pattern = parse_pattern("a(tags contains 'design')")
    assert not pattern.matches("a", experts=["design"])
    assert pattern.matches("a", tags=["design"])


def test_predicates_accept_one_shot_iterators_for_tags_and_experts() -> None:
    pattern = parse_pattern("a(tags contains 'x' AND tags contains 'y' AND expert = 'e')")
    assert pattern.matches("a", tags=iter(["y", "x"]), experts=(e for e in ["e"]))


def test_keywords_field_names_and_operators_are_case_insensitive() -> None:
    expected = Pattern(
        "gate.*",
        (Predicate("tags", "contains", "x"), Predicate("expert", "=", "y")),
    )
    assert parse_pattern("gate.*(TAGS CONTAINS 'x' and Expert = 'y')") == expected
    assert parse_pattern("gate.*(Tags Contains 'x' aNd EXPERT = 'y')") == expected
    assert parse_pattern("gate.*(tags contains 'x' AND expert CONTAINS 'y')").predicates[
        1
    ] == Predicate("expert", "contains", "y")


def test_string_values_stay_case_sensitive() -> None:
    pattern = parse_pattern("a(TAGS CONTAINS 'Design')")
    assert pattern.predicates == (Predicate("tags", "contains", "Design"),)
    assert pattern.matches("a", tags=["Design"])
    assert not pattern.matches("a", tags=["design"])


def test_whitespace_around_tokens_is_free_and_surrounding_whitespace_is_stripped() -> None:
    expected = Pattern(
        "gate.*",
        (Predicate("tags", "contains", "x"), Predicate("expert", "=", "y")),
    )
    assert parse_pattern("gate.*(tags contains'x'AND expert='y')") == expected
    assert (
        parse_pattern("  gate.*(\n  tags\tcontains  'x'\n  AND   expert  =  'y'  )\n ") == expected
    )


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('a(tags contains "design")', "design"),
        ('a(tags contains "it\'s")', "it's"),
        ("a(tags contains 'it\\'s')", "it's"),
        ('a(tags contains "say \\"hi\\"")', 'say "hi"'),
        ("a(tags contains 'back\\\\slash')", "back\\slash"),
        ("a(tags contains '')", ""),
        ("a(tags contains ' padded ')", " padded "),
        ("a(tags contains 'AND ) ( = contains')", "AND ) ( = contains"),
    ],
)
def test_string_literals_support_both_quotes_and_backslash_escapes(text: str, value: str) -> None:
    assert parse_pattern(text).predicates == (Predicate("tags", "contains", value),)


# --------------------------------------------------------------------------------------
# Canonical text
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("confirm.*", "confirm.*"),
        ("  confirm.*  ", "confirm.*"),
        (
            "gate.*(TAGS contains \"x\" and expert='o')",
            "gate.*(tags contains 'x' AND expert = 'o')",
        ),
        ('a(tags contains "it\'s")', "a(tags contains 'it\\'s')"),
        ("a(tags contains 'a\\\\b')", "a(tags contains 'a\\\\b')"),
        ("a(EXPERT Contains 'o')", "a(expert contains 'o')"),
    ],
)
def test_str_renders_canonical_text(text: str, canonical: str) -> None:
    pattern = parse_pattern(text)
    assert str(pattern) == canonical
    assert parse_pattern(str(pattern)) == pattern


# --------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "position"),
    [
        ("", 0),
        ("   ", 0),
        ("(tags contains 'x')", 0),  # empty glob
        ("a.*()", 4),  # empty parentheses
        ("a.*( )", 5),
        ("a.*(color contains 'x')", 4),  # unknown field
        ("a.*(1tags contains 'x')", 4),
        ("a.*(tagscontains 'x')", 4),
        ("a.*(tags has 'x')", 9),  # unknown operator
        ("a.*(tags = 'x')", 9),  # '=' is not supported for tags
        ("a.*(expert == 'x')", 11),
        ("a.*(expert != 'x')", 11),
        ("a.*(tags)", 8),  # missing operator
        ("a.*(tags contains)", 17),  # missing string
        ("a.*(tags contains x)", 18),  # unquoted value
        ("a.*(tags contains 'x", 18),  # unterminated string -> opening quote
        ("a.*(tags contains \"x')", 18),
        ("a.*(tags contains 'x\\')", 18),  # the quote is escaped, so still unterminated
        ("a.*(tags contains 'x\\n')", 20),  # unsupported escape -> the backslash
        ("a.*(tags contains 'x' expert = 'y')", 22),  # missing AND
        ("a.*(tags contains 'x' OR expert = 'y')", 22),
        ("a.*(tags contains 'x' ANDexpert = 'y')", 22),
        ("a.*(tags contains 'x' AND)", 25),  # dangling AND
        ("a.*(tags contains 'x' AND AND expert = 'y')", 26),
        ("a.*(tags contains 'x'", 21),  # missing ')' -> end of input
        ("a.*(tags contains 'x') extra", 23),  # trailing garbage
        ("a.*(tags contains 'x'))", 22),
        ("a.*(tags contains 'x')(expert = 'y')", 22),
        ("a.* (tags contains 'x')", 3),  # predicates must follow the glob directly
        ("confirm.*x y", 10),
        ("a?b", 1),  # fnmatch-style metacharacters are not glob syntax
        ("a[b]", 1),
        ("a/b", 1),
        ("  a?b", 3),  # positions index the text as passed in
    ],
)
def test_malformed_pattern_raises_pattern_error_at_exact_position(text: str, position: int) -> None:
    with pytest.raises(PatternError) as excinfo:
        parse_pattern(text)
    assert excinfo.value.position == position
    assert str(excinfo.value).endswith(f"at position {position}")


def test_pattern_error_is_a_value_error_with_readable_message() -> None:
    with pytest.raises(ValueError, match=r"expected 'AND' or '\)'.* at position 21$"):
        parse_pattern("a.*(tags contains 'x'")


def test_pattern_error_survives_pickling() -> None:
    err = PatternError("boom", 7)
    clone = pickle.loads(pickle.dumps(err))
    assert (clone.message, clone.position, str(clone)) == ("boom", 7, "boom at position 7")


def test_pattern_of_max_length_is_accepted_and_longer_is_rejected_at_position_500() -> None:
    assert MAX_PATTERN_LENGTH == 500
    assert parse_pattern("a" * 500).glob == "a" * 500
    with pytest.raises(PatternError) as excinfo:
        parse_pattern("a" * 501)
    assert excinfo.value.position == 500
    # Surrounding whitespace does not count towards the limit ...
    assert parse_pattern("  " + "a" * 500 + "  ").glob == "a" * 500
    # ... but positions still index the original text.
    with pytest.raises(PatternError) as excinfo:
        parse_pattern("   " + "a" * 501)
    assert excinfo.value.position == 503


def _expert_pattern(value_length: int) -> str:
    # Raw text is value_length + 12 characters; canonical text adds two spaces around '='.
    return "a(expert='" + "v" * value_length + "')"


def test_pattern_whose_canonical_text_fits_the_limit_round_trips() -> None:
    text = _expert_pattern(486)
    pattern = parse_pattern(text)
    assert len(str(pattern)) == MAX_PATTERN_LENGTH
    assert parse_pattern(str(pattern)) == pattern


def test_pattern_whose_canonical_predicate_exceeds_the_limit_is_rejected_at_that_predicate() -> (
    None
):
    text = _expert_pattern(488)
    assert len(text) == MAX_PATTERN_LENGTH
    with pytest.raises(PatternError) as excinfo:
        parse_pattern(text)
    assert excinfo.value.position == 2


def test_pattern_whose_canonical_closing_paren_exceeds_the_limit_is_rejected_at_the_paren() -> None:
    text = _expert_pattern(487)
    with pytest.raises(PatternError) as excinfo:
        parse_pattern(text)
    assert excinfo.value.position == len(text) - 1
    assert text[excinfo.value.position] == ")"


# --------------------------------------------------------------------------------------
# Module hygiene
# --------------------------------------------------------------------------------------


def test_rule_patterns_module_does_not_import_django() -> None:
    tree = ast.parse(Path(rule_patterns.__file__).read_text(encoding="utf-8"))
    imported: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.append(node.module)
    assert imported, "expected to find at least the module's own imports"
    assert not [name for name in imported if name.split(".")[0] in {"django", "rest_framework"}]


def test_rule_patterns_module_does_not_use_fnmatch() -> None:
    source = Path(rule_patterns.__file__).read_text(encoding="utf-8")
    assert "fnmatch" not in source


# --------------------------------------------------------------------------------------
# Property-based tests
# --------------------------------------------------------------------------------------

KEY_ALPHABET = string.ascii_letters + string.digits + "._-"
GLOB_ALPHABET = KEY_ALPHABET + "*"
WHITESPACE = " \t\n"

globs = st.text(GLOB_ALPHABET, min_size=1, max_size=40)
star_free_globs = st.text(KEY_ALPHABET, min_size=1, max_size=40)
keys = st.text(KEY_ALPHABET, max_size=40)
optional_ws = st.text(WHITESPACE, max_size=3)
required_ws = st.text(WHITESPACE, min_size=1, max_size=3)
values = st.text(
    st.one_of(st.sampled_from("'\"\\ ()=*"), st.characters()),
    max_size=20,
)

# Fragments that steer arbitrary text towards the interesting corners of the grammar.
GRAMMAR_FRAGMENTS = [
    "a", "b.", "*", "(", ")", " ", "\t", "tags", "TAGS", "expert", "contains", "=",
    "==", "AND", "and", "OR", "'", '"', "\\", "x", "-", "?", "[",
]  # fmt: skip
grammarish_text = st.lists(st.sampled_from(GRAMMAR_FRAGMENTS), max_size=30).map("".join)


@st.composite
def random_case(draw: st.DrawFn, word: str) -> str:
    flips = draw(st.lists(st.booleans(), min_size=len(word), max_size=len(word)))
    return "".join(c.upper() if flip else c.lower() for c, flip in zip(word, flips, strict=True))


def _quote_as_source(value: str, quote: str) -> str:
    escaped = value.replace("\\", "\\\\").replace(quote, "\\" + quote)
    return quote + escaped + quote


@st.composite
def predicate_sources(draw: st.DrawFn) -> tuple[str, Predicate]:
    """Draw (source text, expected Predicate) with random spelling, quoting and spacing."""
    field, op = draw(
        st.sampled_from([("tags", "contains"), ("expert", "="), ("expert", "contains")])
    )
    value = draw(values)
    quote = draw(st.sampled_from(["'", '"']))
    field_text = draw(random_case(field))
    op_text = draw(random_case(op))
    gap = draw(required_ws if op == "contains" else optional_ws)
    source = field_text + gap + op_text + draw(optional_ws) + _quote_as_source(value, quote)
    return source, Predicate(field, op, value)


@st.composite
def valid_patterns(draw: st.DrawFn) -> tuple[str, Pattern]:
    """Draw (pattern text, expected Pattern); sizes keep canonical text under the limit."""
    glob = draw(globs)
    preds = draw(st.lists(predicate_sources(), max_size=4))
    text = glob
    if preds:
        parts = [preds[0][0]]
        for source, _ in preds[1:]:
            parts.append(draw(optional_ws) + draw(random_case("and")) + draw(required_ws) + source)
        text += "(" + draw(optional_ws) + "".join(parts) + draw(optional_ws) + ")"
    text = draw(optional_ws) + text + draw(optional_ws)
    return text, Pattern(glob, tuple(p for _, p in preds))


def _reference_glob_regex(glob: str) -> re.Pattern[str]:
    return re.compile("".join(".*" if c == "*" else re.escape(c) for c in glob), re.DOTALL)


@given(st.one_of(st.text(), grammarish_text))
def test_parse_pattern_returns_pattern_or_raises_pattern_error_only(text: str) -> None:
    try:
        pattern = parse_pattern(text)
    except PatternError as err:
        assert 0 <= err.position <= len(text)
    else:
        assert isinstance(pattern, Pattern)
        # The round-trip law holds for anything the parser accepts.
        assert parse_pattern(str(pattern)) == pattern


@given(valid_patterns())
def test_generated_valid_patterns_parse_as_built_and_round_trip_through_str(
    case: tuple[str, Pattern],
) -> None:
    text, expected = case
    parsed = parse_pattern(text)
    assert parsed == expected
    canonical = str(parsed)
    assert parse_pattern(canonical) == parsed
    assert str(parse_pattern(canonical)) == canonical


@given(star_free_globs, keys)
def test_glob_without_star_matches_exactly_the_identical_key(glob: str, key: str) -> None:
    pattern = parse_pattern(glob)
    assert pattern.matches(glob)
    assert pattern.matches(key) is (key == glob)
    assert not pattern.matches(glob + "x")
    assert not pattern.matches(glob[:-1])


@given(st.text(), st.lists(st.text(max_size=5)), st.lists(st.text(max_size=5)))
def test_lone_star_matches_any_key(key: str, tags: list[str], experts: list[str]) -> None:
    assert parse_pattern("*").matches(key, tags=tags, experts=experts)


@settings(max_examples=500)
@given(st.text("ab.*", min_size=1, max_size=8), st.text("ab.", max_size=10))
def test_glob_matching_agrees_with_an_anchored_regex_reference(glob: str, key: str) -> None:
    expected = _reference_glob_regex(glob).fullmatch(key) is not None
    assert parse_pattern(glob).matches(key) is expected


@given(
    st.sampled_from(["tags", "expert"]),
    st.text("xyz", max_size=3),
    st.lists(st.text("xyz", max_size=3), max_size=4),
)
def test_single_predicate_holds_exactly_when_value_is_among_the_attribute_values(
    field: str, value: str, present: list[str]
) -> None:
    op = "contains" if field == "tags" else "="
    pattern = parse_pattern(f"k.*({field} {op} {_quote_as_source(value, chr(39))})")
    attrs = {"tags": present} if field == "tags" else {"experts": present}
    assert pattern.matches("k.x", **attrs) is (value in present)
    assert not pattern.matches("other", **attrs)
