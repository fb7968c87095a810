"""breakpoints.payload.validation: the babysitter payload keys checked, and the key derived."""

import itertools

import pytest

from breakpoints.api.payload_schema import PAYLOAD_SCHEMA
from breakpoints.payload.validation import (
    CONTEXT_KEYS,
    FALLBACK_KEY,
    FILE_KEYS,
    KEY_PATTERN,
    MAX_KEYS_COMPARED,
    MAX_WARNINGS,
    OPTION_KEYS,
    PAYLOAD_KEYS,
    Option,
    derive_key,
    options_of,
    payload_options,
    payload_warnings,
    resolve_fields,
    validate_payload,
    validate_tags,
)
from core.exceptions import InvalidInput
from core.limits import MAX_NESTING, MAX_TAGS


def errors_of(payload) -> dict:
    with pytest.raises(InvalidInput) as caught:
        validate_payload(payload)
    return caught.value.details


def file_payload(**file) -> dict:
    return {"context": {"files": [{"path": "docs/plan.md", "format": "markdown", **file}]}}


# --- accepted payloads ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "payload",
    [
        {},
        {"anything": {"free": ["form"]}, "nested": [1, 2, 3]},
        {
            "question": "Approve?",
            "title": "Plan Review",
            "context": {
                "runId": "run-1",
                "files": [
                    {"path": "docs/plan.md", "format": "markdown", "content": "# Plan"},
                    {"path": "src/app.py", "format": "code", "language": "python"},
                    {"path": "out/report.html", "format": "html"},
                    {"path": "notes.txt", "format": "text", "content": None},
                ],
            },
            "expert": ["owner", "security"],
            "tags": ["design"],
            "strategy": "collect-all",
            "previousFeedback": "Add tests",
            "attempt": 2,
            "breakpointId": "confirm.star-repo",
            "autoApproveAfterN": -1,
            "presentAlwaysApprove": True,
            "options": ["ship", "hold"],
        },
        {"expert": "owner"},
        {"autoApproveAfterN": 3},
        {"strategy": "single"},
        {"strategy": "first-response-wins"},
        {"strategy": "quorum"},
        {"breakpointId": "a.b-c.d1"},
        {"title": None, "context": None, "tags": None, "options": None},
        file_payload(path="a/b/c.md"),
        file_payload(path="./relative.md"),
        file_payload(path="name..with..dots.md"),
    ],
)
def test_valid_payloads_pass(payload):
    assert validate_payload(payload) is None


# --- refused payloads ------------------------------------------------------------------------


@pytest.mark.parametrize("payload", [[], ["a"], "text", 3, None, True])
def test_payload_must_be_an_object(payload):
    assert errors_of(payload) == {"payload": ["Must be an object."]}


@pytest.mark.parametrize(
    "path",
    [
        "/etc/passwd",
        "C:\\x",
        "C:/Windows/system.ini",
        "c:relative-but-drive.txt",
        "\\\\server\\share\\f.txt",
        "\\rooted.txt",
    ],
)
def test_absolute_file_paths_are_refused(path):
    details = errors_of(file_payload(path=path))

    assert details["payload.context.files[0].path"] == [
        "Must be relative to the run directory, not absolute."
    ]


@pytest.mark.parametrize("path", ["..", "../secret", "docs/../../etc", "docs\\..\\..\\x"])
def test_parent_directory_paths_are_refused(path):
    assert errors_of(file_payload(path=path))["payload.context.files[0].path"] == [
        "Must not contain '..'."
    ]


@pytest.mark.parametrize("path", ["", "   ", None, 5])
def test_empty_or_non_string_paths_are_refused(path):
    assert "payload.context.files[0].path" in errors_of(file_payload(path=path))


def test_nul_in_path_is_refused():
    assert "payload.context.files[0].path" in errors_of(file_payload(path="a\x00b"))


def test_overlong_path_is_refused():
    assert "payload.context.files[0].path" in errors_of(file_payload(path="a/" * 600))


@pytest.mark.parametrize("fmt", ["pdf", "Markdown", "", 1, ["text"]])
def test_unknown_file_format_is_refused(fmt):
    assert "payload.context.files[0].format" in errors_of(file_payload(format=fmt))


@pytest.mark.parametrize("file", [{"path": "a.md"}, {"path": "a.md", "format": None}])
def test_an_omitted_or_null_file_format_is_accepted(file):
    """Issue 13: the format is then inferred from the path (core.fileformats)."""
    validate_payload({"context": {"files": [file]}})


@pytest.mark.parametrize(
    "payload, path",
    [
        ({"question": 1}, "payload.question"),
        ({"question": None}, "payload.question"),
        ({"question": "x" * 20_001}, "payload.question"),
        ({"title": ["t"]}, "payload.title"),
        ({"title": "t" * 501}, "payload.title"),
        ({"context": "run-1"}, "payload.context"),
        ({"context": {"runId": 5}}, "payload.context.runId"),
        ({"context": {"files": "a.md"}}, "payload.context.files"),
        ({"context": {"files": ["a.md"]}}, "payload.context.files[0]"),
        ({"context": {"files": [{"path": "a", "format": "text"}] * 101}}, "payload.context.files"),
        (file_payload(language=3), "payload.context.files[0].language"),
        (file_payload(content=["x"]), "payload.context.files[0].content"),
        ({"expert": []}, "payload.expert"),
        ({"expert": 5}, "payload.expert"),
        ({"expert": [""]}, "payload.expert[0]"),
        ({"expert": ["ok", 3]}, "payload.expert[1]"),
        ({"tags": "design"}, "payload.tags"),
        ({"tags": ["ok", 1]}, "payload.tags[1]"),
        ({"strategy": "majority"}, "payload.strategy"),
        ({"strategy": None}, "payload.strategy"),
        ({"previousFeedback": 1}, "payload.previousFeedback"),
        ({"attempt": 0}, "payload.attempt"),
        ({"attempt": True}, "payload.attempt"),
        ({"attempt": "2"}, "payload.attempt"),
        ({"breakpointId": "Has Spaces"}, "payload.breakpointId"),
        ({"breakpointId": "UPPER"}, "payload.breakpointId"),
        ({"breakpointId": "trailing-"}, "payload.breakpointId"),
        ({"breakpointId": "double..dot"}, "payload.breakpointId"),
        ({"breakpointId": "under_score"}, "payload.breakpointId"),
        ({"breakpointId": ""}, "payload.breakpointId"),
        ({"breakpointId": 7}, "payload.breakpointId"),
        ({"breakpointId": "a" * 256}, "payload.breakpointId"),
        ({"autoApproveAfterN": 0}, "payload.autoApproveAfterN"),
        ({"autoApproveAfterN": -2}, "payload.autoApproveAfterN"),
        ({"autoApproveAfterN": False}, "payload.autoApproveAfterN"),
        ({"presentAlwaysApprove": "yes"}, "payload.presentAlwaysApprove"),
        ({"options": "yes"}, "payload.options"),
        ({"options": []}, "payload.options"),
        ({"options": ["ok", ""]}, "payload.options[1]"),
        ({"options": ["x" * 501]}, "payload.options[0]"),
    ],
)
def test_malformed_known_keys_are_reported_by_json_path(payload, path):
    assert path in errors_of(payload)


@pytest.mark.parametrize(
    "payload",
    [
        {"question": "a\x00b"},
        {"free": {"form": ["ok", "a\x00b"]}},
        {"key\x00": "value"},
        {"nested": {"key\x00": 1}},
    ],
)
def test_nul_characters_anywhere_are_refused(payload):
    assert "Must not contain NUL characters." in errors_of(payload)["payload"]


def test_nesting_up_to_the_limit_is_accepted_and_beyond_is_refused():
    def nested(depth: int) -> dict:
        value: dict = {}
        for _ in range(depth - 1):
            value = {"x": value}
        return value

    assert validate_payload(nested(MAX_NESTING)) is None
    assert errors_of(nested(MAX_NESTING + 1))["payload"] == [
        f"Must not be nested more than {MAX_NESTING} levels deep."
    ]


def test_nesting_check_survives_depths_beyond_the_recursion_limit():
    value: list = []
    for _ in range(5000):
        value = [value]

    assert "payload" in errors_of({"x": value})


def test_nul_in_a_tag_is_refused():
    errors: dict = {}

    validate_tags(errors, "tags", ["ok", "a\x00b"])

    assert errors == {"tags[1]": ["Must not contain NUL characters."]}


def test_every_problem_is_reported_and_the_message_names_the_first():
    with pytest.raises(InvalidInput) as caught:
        validate_payload({"question": 1, "strategy": "nope", "attempt": 0})

    assert set(caught.value.details) == {"payload.question", "payload.strategy", "payload.attempt"}
    assert caught.value.message.startswith("payload.question: ")


# --- tags ---------------------------------------------------------------------------------------


def test_tags_are_stripped_and_deduplicated_in_order():
    errors: dict = {}

    assert validate_tags(errors, "tags", [" b", "a", "b ", "a"]) == ["b", "a"]
    assert errors == {}


def test_too_many_tags_are_refused():
    errors: dict = {}

    validate_tags(errors, "tags", [f"t{i}" for i in range(MAX_TAGS + 1)])

    assert "tags" in errors


def test_overlong_tag_is_refused():
    errors: dict = {}

    validate_tags(errors, "tags", ["x" * 101])

    assert "tags[0]" in errors


# --- key derivation and field resolution -----------------------------------------------------------


def test_payload_breakpoint_id_wins_over_title():
    assert derive_key({"breakpointId": "confirm.star-repo"}, "Some Title") == "confirm.star-repo"


@pytest.mark.parametrize(
    "title, key",
    [
        ("Review Design Document", "review-design-document"),
        ("  Deploy   to  PROD!  ", "deploy-to-prod"),
        ("Überprüfung der Pläne", "uberprufung-der-plane"),
        ("--edge--", "edge"),
    ],
)
def test_key_is_the_slug_of_the_title(title, key):
    assert derive_key({}, title) == key


@pytest.mark.parametrize("title", [None, "", "!!!", "   "])
def test_key_falls_back_when_the_title_has_no_slug(title):
    assert derive_key({}, title) == FALLBACK_KEY


def test_key_from_a_long_title_is_capped_at_255_characters():
    key = derive_key({}, "word " * 200)

    assert len(key) <= 255
    assert not key.endswith("-")


def test_resolve_fields_top_level_title_and_tags_win():
    fields = resolve_fields(
        payload={"title": "Inner", "tags": ["inner"], "question": "Q?"},
        title="Outer Title",
        tags=["outer"],
    )

    assert fields.title == "Outer Title"
    assert fields.key == "outer-title"
    assert fields.tags == ["outer"]
    assert fields.question == "Q?"


def test_resolve_fields_falls_back_to_the_payload():
    fields = resolve_fields(payload={"title": "Inner Title", "tags": ["x"]}, title=None, tags=None)

    assert (fields.title, fields.key, fields.tags, fields.question) == (
        "Inner Title",
        "inner-title",
        ["x"],
        None,
    )


def test_resolve_fields_validates_the_payload_first():
    with pytest.raises(InvalidInput) as caught:
        resolve_fields(payload={"strategy": "vote"}, title="T", tags=["ok"])

    assert "payload.strategy" in caught.value.details


@pytest.mark.parametrize("tags", ["design", ["ok", 3], [""]])
def test_resolve_fields_refuses_bad_top_level_tags(tags):
    with pytest.raises(InvalidInput) as caught:
        resolve_fields(payload={}, title=None, tags=tags)

    assert any(path.startswith("tags") for path in caught.value.details)


def test_payload_options_lists_options_or_nothing():
    assert payload_options({"options": ["a", "b"]}) == ["a", "b"]
    assert payload_options({}) == []
    assert payload_options({"options": None}) == []


# --- options that carry their verdict (issue 9, defect 12) ------------------------------------


def test_options_may_be_objects_with_a_label_and_a_verdict():
    payload = {
        "options": [
            {"label": "Deploy", "approved": True},
            {"label": "Hold", "approved": False},
            {"label": "Ask later"},
            "Plain",
        ]
    }

    assert validate_payload(payload) is None
    assert payload_options(payload) == ["Deploy", "Hold", "Ask later", "Plain"]
    assert options_of(payload) == [
        Option("Deploy", True),
        Option("Hold", False),
        Option("Ask later"),
        Option("Plain"),
    ]


@pytest.mark.parametrize(
    ("option", "path"),
    [
        ({}, "payload.options[0].label"),
        ({"approved": False}, "payload.options[0].label"),
        ({"label": None}, "payload.options[0].label"),
        ({"label": 7}, "payload.options[0].label"),
        ({"label": "  "}, "payload.options[0].label"),
        ({"label": "o" * 201}, "payload.options[0].label"),
        ({"label": "Hold", "approved": "no"}, "payload.options[0].approved"),
        ({"label": "Hold", "approved": 0}, "payload.options[0].approved"),
        ({"label": "Hold", "approved": None}, "payload.options[0].approved"),
        (["Hold"], "payload.options[0]"),
        (7, "payload.options[0]"),
    ],
)
def test_malformed_option_objects_are_reported_by_json_path(option, path):
    assert path in errors_of({"options": [option]})


def test_an_option_objects_label_may_be_200_characters():
    assert validate_payload({"options": [{"label": "o" * 200, "approved": False}]}) is None


@pytest.mark.parametrize(
    ("options", "path"),
    [
        ([{"label": "Hold", "approved": False}, {"label": "Hold", "approved": True}], "[1].label"),
        ([{"label": "Hold", "approved": False}, "Hold"], "[1]"),
        (["Hold", {"label": "Hold", "approved": False}], "[1].label"),
    ],
)
def test_a_label_carried_by_an_option_object_is_unique(options, path):
    assert f"payload.options{path}" in errors_of({"options": options})


def test_plain_string_options_may_still_repeat():
    assert validate_payload({"options": ["ship", "ship"]}) is None


def test_over_many_option_objects_are_one_error():
    errors = errors_of({"options": [{"label": "o", "approved": 1}] * 200_000})

    assert errors["payload.options"] == ["At most 20 options."]
    assert set(errors) <= {"payload.options", "payload"}


def test_key_from_a_title_with_underscores_is_kebab_case():
    key = derive_key({}, "Plan_Review -- Phase 2")
    assert key == "plan-review-phase-2"
    assert KEY_PATTERN.match(key)


# --- caps on every list and string of the known keys (issue 9, defect 3) -----------------------


def files_payload(count: int = 1, **file) -> dict:
    entry = {"path": "docs/plan.md", "format": "markdown", **file}
    return {"context": {"files": [dict(entry) for _ in range(count)]}}


# (what is capped, payload at the limit, payload one over it, the JSON path named)
CAPS = [
    (
        "expert count",
        {"expert": [f"e{i}" for i in range(20)]},
        {"expert": [f"e{i}" for i in range(21)]},
        "payload.expert",
    ),
    ("expert name length", {"expert": ["e" * 150]}, {"expert": ["e" * 151]}, "payload.expert[0]"),
    (
        "options count",
        {"options": [f"o{i}" for i in range(20)]},
        {"options": [f"o{i}" for i in range(21)]},
        "payload.options",
    ),
    ("option length", {"options": ["o" * 200]}, {"options": ["o" * 201]}, "payload.options[0]"),
    ("question length", {"question": "q" * 20_000}, {"question": "q" * 20_001}, "payload.question"),
    ("title length", {"title": "t" * 500}, {"title": "t" * 501}, "payload.title"),
    (
        "tag count",
        {"tags": [f"t{i}" for i in range(50)]},
        {"tags": [f"t{i}" for i in range(51)]},
        "payload.tags",
    ),
    ("tag length", {"tags": ["t" * 100]}, {"tags": ["t" * 101]}, "payload.tags[0]"),
    (
        "previousFeedback length",
        {"previousFeedback": "f" * 10_000},
        {"previousFeedback": "f" * 10_001},
        "payload.previousFeedback",
    ),
    (
        "context.runId length",
        {"context": {"runId": "r" * 128}},
        {"context": {"runId": "r" * 129}},
        "payload.context.runId",
    ),
    ("file count", files_payload(100), files_payload(101), "payload.context.files"),
    (
        "file path length",
        files_payload(path="p" * 1000),
        files_payload(path="p" * 1001),
        "payload.context.files[0].path",
    ),
    # Every value counts, at any depth: here the key "x" and the items of its list(s).
    ("values in all", {"x": [0] * 99_999}, {"x": [0] * 100_000}, "payload"),
    ("values in all, nested", {"x": [[0] * 998] * 100}, {"x": [[0] * 999] * 100}, "payload"),
    (
        "file language length",
        files_payload(language="l" * 50),
        files_payload(language="l" * 51),
        "payload.context.files[0].language",
    ),
]


@pytest.mark.parametrize(
    "at_limit, over_limit, path",
    [case[1:] for case in CAPS],
    ids=[case[0] for case in CAPS],
)
def test_each_cap_accepts_the_limit_and_refuses_one_more_naming_the_field(
    at_limit, over_limit, path
):
    assert validate_payload(at_limit) is None
    assert path in errors_of(over_limit)


@pytest.mark.parametrize(
    "payload, path, message",
    [
        ({"expert": ["e"] * 100_000}, "payload.expert", "At most 20 names."),
        ({"expert": [7] * 100_000}, "payload.expert", "At most 20 names."),
        ({"options": ["o"] * 200_000}, "payload.options", "At most 20 options."),
        ({"options": [""] * 200_000}, "payload.options", "At most 20 options."),
        ({"tags": [""] * 100_000}, "payload.tags", "At most 50 tags."),
    ],
    ids=["100k experts", "100k bad experts", "200k options", "200k bad options", "100k tags"],
)
def test_an_over_long_list_is_one_error_for_the_list_not_one_per_item(payload, path, message):
    errors = errors_of(payload)

    assert errors[path] == [message]
    # Besides the list's own error, at most the cap on values in all: no error per item.
    assert set(errors) <= {path, "payload"}


@pytest.mark.parametrize("value", [1_001, 10**30, 2**62, 1.5, True])
def test_auto_approve_after_n_beyond_its_cap_is_refused(value):
    """It bounds a query (LIMIT N): a huge one was a 500 (bigint out of range)."""
    assert "payload.autoApproveAfterN" in errors_of({"autoApproveAfterN": value})


# --- near-misses of the known keys (warnings, issue 31 defect 7) -----------------------------


def test_near_misses_are_found_in_each_object_that_has_known_keys():
    payload = {
        "Question": "Deploy?",
        "context": {"runid": "r-1", "files": [{"path": "a.md", "formt": "markdown"}]},
        "options": [{"lable": "ship"}, "hold"],
    }

    assert payload_warnings(payload) == [
        "payload.Question: did you mean question?",
        "payload.context.runid: did you mean runId?",
        "payload.context.files[0].formt: did you mean format?",
        "payload.options[0].lable: did you mean label?",
    ]


def test_a_key_that_cannot_be_printed_is_shown_quoted():
    assert payload_warnings({"titl\n": "x"}) == ['payload."titl\\n": did you mean title?']


def test_warnings_cost_a_bounded_number_of_comparisons():
    """Any number of keys may come: only the first MAX_KEYS_COMPARED unknown ones are compared
    with the known ones, and at most MAX_WARNINGS are answered."""
    cases = ("".join(letters) for letters in itertools.product(*zip("title", "TITLE", strict=True)))
    misspelt = {key: 1 for key in cases if key != "title"}  # 31 ways to write Title

    found = payload_warnings(misspelt)

    assert len(found) == MAX_WARNINGS
    assert payload_warnings({**{f"key-{i}": i for i in range(MAX_KEYS_COMPARED)}, "titel": 1}) == []


def test_the_known_keys_are_the_documented_ones():
    """PAYLOAD_SCHEMA (the OpenAPI description) and the warnings know the same keys."""
    properties = PAYLOAD_SCHEMA["properties"]
    context = properties["context"]["properties"]
    file_item = context["files"]["items"]["properties"]
    option_object = properties["options"]["items"]["anyOf"][1]["properties"]
    assert set(properties) == PAYLOAD_KEYS
    assert set(context) == CONTEXT_KEYS
    assert set(file_item) == FILE_KEYS
    assert set(option_object) == OPTION_KEYS
