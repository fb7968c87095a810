"""A form costs little to check, whatever the agent declares (issue 47, items 2 and 3).

Patterns are RE2's (linear time): `^a{0,99}` six times against 100 `a` and a `b` froze a
web worker for ~28 s under Python's backtracking `re`, in a form's `pattern`, in a
`propertyNames` pattern and in a reviewer's values. A `$defs` node applying itself K
times at each level (`allOf` of `$ref`) made checking a 16-deep proposal exponential:
such a form is refused when declared (breakpoints.payload.form_expansion), and every check spends
a budget (BPM_FORM_VALIDATION_STEPS) and stops past it with a 400 naming where. Through
the API, on the real database; no timed assertion (the outcomes tell RE2 from `re`).
"""

import pytest

from breakpoints.models import Breakpoint
from breakpoints.payload import form_schema
from tests.support.api import assert_error

URL = "/api/breakpoints"
SLOW_IN_PYTHON = "^a{0,99}a{0,99}a{0,99}a{0,99}a{0,99}a{0,99}$"
# Python's `$` also matches before a final newline; RE2's (as ECMA-262's) only at the end.
# A text Python's `re` would match and RE2 does not tells which matched.
NOT_MATCHING = "a" * 100 + "b"
NEWLINE_ENDED = "a" * 100 + "\n"


def create(client, **payload):
    body = {"payload": {"question": "Deploy?", "title": "Deploy", **payload}}
    return client.post(URL, body, format="json")


def release(client, bp_id: str, **body):
    return client.post(f"{URL}/{bp_id}/feedback", {"release": True, **body}, format="json")


def pattern_form(pattern: str = SLOW_IN_PYTHON) -> dict:
    return {"type": "object", "properties": {"x": {"type": "string", "pattern": pattern}}}


def ref_graph_form(k: int) -> dict:
    """The issue's form: $defs/n applies itself k times below its field c."""
    node = {
        "type": "object",
        "properties": {"c": {"allOf": [{"$ref": "#/$defs/n"}] * k}, "s": {"type": "string"}},
    }
    return {"type": "object", "$defs": {"n": node}, "$ref": "#/$defs/n"}


def nested(depth: int) -> dict:
    """A proposal `depth` levels deep, about 400 bytes at 16."""
    value: dict = {"s": "x" * 10}
    for _ in range(depth - 1):
        value = {"c": value, "s": "x" * 10}
    return value


# --- patterns ------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [NEWLINE_ENDED, NOT_MATCHING])
def test_a_costly_form_pattern_is_matched_by_re2_at_creation(agent_client, text):
    error = assert_error(create(agent_client, form=pattern_form(), proposal={"x": text}), 400)

    assert error["details"]["payload.proposal/x"] == [
        f"Does not match the pattern {SLOW_IN_PYTHON!r}."
    ]
    assert not Breakpoint.objects.exists()


def test_a_costly_form_pattern_accepts_what_it_matches(agent_client):
    response = create(agent_client, form=pattern_form(), proposal={"x": "a" * 100})

    assert response.status_code == 201, response.content


@pytest.mark.parametrize("text", [NEWLINE_ENDED, NOT_MATCHING])
def test_a_costly_property_names_pattern_is_matched_by_re2(agent_client, text):
    form = {"type": "object", "propertyNames": {"pattern": SLOW_IN_PYTHON}}

    error = assert_error(create(agent_client, form=form, proposal={text: 1}), 400)

    assert any("Does not match" in message for message in error["details"]["payload.proposal"])


@pytest.mark.parametrize("text", [NEWLINE_ENDED, NOT_MATCHING])
def test_a_reviewers_values_are_matched_by_re2(agent_client, reviewer_client, text):
    bp = create(agent_client, form=pattern_form(), proposal={"x": "aa"}).json()

    error = assert_error(release(reviewer_client, bp["breakpointId"], values={"x": text}), 400)

    assert error["details"]["/x"] == [f"Does not match the pattern {SLOW_IN_PYTHON!r}."]
    assert Breakpoint.objects.get(pk=bp["breakpointId"]).status == "waiting"


def test_re2_syntax_is_accepted_and_ecma_unicode_escapes_are_translated(agent_client):
    form = {
        "type": "object",
        "properties": {
            "letter": {"type": "string", "pattern": r"^\p{L}+$"},
            "hex": {"type": "string", "pattern": r"^\x{41}\u0042$"},
            "nested": {"type": "string", "pattern": "^(a+)+$"},
        },
    }
    proposal = {"letter": "é", "hex": "AB", "nested": "a" * 50}

    assert create(agent_client, form=form, proposal=proposal).status_code == 201
    error = assert_error(create(agent_client, form=form, proposal={"nested": "a" * 50 + "b"}), 400)
    assert "Does not match" in error["details"]["payload.proposal/nested"][0]


@pytest.mark.parametrize(
    "pattern",
    [r"(a)\1", "^(?=a)", "(?<!a)b", "(?!x)y"],
)
def test_a_pattern_re2_cannot_match_is_refused_naming_its_path(agent_client, pattern):
    form = {"type": "object", "properties": {"x": {"propertyNames": {"pattern": pattern}}}}

    error = assert_error(create(agent_client, form=form), 400)

    (problem,) = error["details"]["payload.form"]
    assert problem.startswith("/properties/x/propertyNames/pattern: Not a pattern RE2 can match")
    assert "no back-references and no lookarounds" in problem


# --- the $ref graph ------------------------------------------------------------------------


@pytest.mark.parametrize("k", [2, 3, 4])
def test_a_ref_graph_that_multiplies_at_each_level_is_refused_naming_its_path(agent_client, k):
    proposal = nested(16)

    error = assert_error(create(agent_client, form=ref_graph_form(k), proposal=proposal), 400)

    (problem,) = error["details"]["payload.form"]
    assert problem.startswith("/$defs/n")
    assert "could apply more than 10,000 schemas" in problem
    assert not Breakpoint.objects.exists()


def test_a_ref_graph_applied_once_at_each_level_is_accepted(agent_client):
    response = create(agent_client, form=ref_graph_form(1), proposal=nested(16))

    assert response.status_code == 201, response.content


def test_a_form_applying_itself_in_place_without_end_is_refused(agent_client):
    form = {
        "type": "object",
        "$defs": {"n": {"allOf": [{"$ref": "#/$defs/n"}]}},
        "$ref": "#/$defs/n",
    }

    error = assert_error(create(agent_client, form=form), 400)

    assert error["details"]["payload.form"][0].startswith("/$defs/n: Applies itself without end")


def doubling_chain(levels: int) -> dict:
    """$defs d0..d{levels}: each applies the next twice, in place, without a cycle: 2**levels
    schemas on every value of the list, within the declared bound, past the budget."""
    defs = {f"d{n}": {"allOf": [{"$ref": f"#/$defs/d{n + 1}"}] * 2} for n in range(levels)}
    defs[f"d{levels}"] = {"type": "integer"}
    return {
        "type": "object",
        "$defs": defs,
        "properties": {"list": {"type": "array", "items": {"$ref": "#/$defs/d0"}}},
    }


def test_a_check_past_its_step_budget_is_a_400_naming_where(agent_client, settings):
    settings.BPM_FORM_VALIDATION_STEPS = 2_000
    settings.BPM_FORM_VALIDATION_SECONDS = 3600  # the steps stop it, not the clock
    form = doubling_chain(8)

    with form_schema.budgets_recorded() as budgets:
        response = create(agent_client, form=form, proposal={"list": list(range(50))})

    error = assert_error(response, 400)
    ((where, (problem,)),) = error["details"].items()
    assert where in ("payload.proposal", "payload.proposal/list")
    assert problem.startswith("Stopped after 2,000 steps (BPM_FORM_VALIDATION_STEPS)")
    assert "It stopped at the form's /$defs/d" in problem
    assert budgets and all(budget.spent <= budget.steps for budget in budgets)
    assert not Breakpoint.objects.exists()


def test_a_check_past_its_time_budget_is_a_400(agent_client, settings, monkeypatch):
    ticks = iter(range(10**6))
    monkeypatch.setattr(form_schema, "clock", lambda: float(next(ticks)))
    settings.BPM_FORM_VALIDATION_SECONDS = 3

    response = create(agent_client, form=doubling_chain(8), proposal={"list": list(range(50))})

    error = assert_error(response, 400)
    (problem,) = next(iter(error["details"].values()))
    assert problem.startswith("Stopped after 3 s (BPM_FORM_VALIDATION_SECONDS)")


def test_a_releases_values_are_checked_once_before_the_row_is_locked(agent_client, reviewer_client):
    bp = create(agent_client, form=pattern_form("^a+$"), proposal={"x": "a"}).json()

    with form_schema.budgets_recorded() as budgets:
        response = release(reviewer_client, bp["breakpointId"], values={"x": "aaa"})

    assert response.status_code == 201, response.content
    assert len(budgets) == 1
    assert response.json()["result"]["values"] == {"x": "aaa"}
