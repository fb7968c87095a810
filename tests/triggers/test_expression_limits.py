"""What a JMESPath condition or template may cost: its shape is bounded when a rule is
saved (a 400 naming the limit, nothing stored), and its work when it runs, in steps per
expression and in time per rule and event (a rule saved before the limits, or one within
them over a large payload, records an error: the dry run answers 200 with it, the worker
marks the event processed with it), and the size of the events rules are evaluated on.

Time is read from a counting clock (each read one second later), so the time budget is
tested without waiting and without depending on the machine's speed."""

import pytest
from django.utils import timezone

from breakpoints.models import Breakpoint
from config.celery import app
from core.limits import (
    MAX_EXPRESSION_DEPTH,
    MAX_EXPRESSION_FANOUT,
    MAX_FUNCTION_NESTING,
)
from triggers import expressions, services
from triggers.expressions import Budget, ExpressionError, check_expression, holds, search
from triggers.models import EventSource, EventStatus, ExternalEvent, TriggerRule
from triggers.tasks import evaluate_event

TRIGGERS = "/api/triggers"
DOUBLINGS = "|".join(["[@,@]"] * MAX_EXPRESSION_FANOUT)  # 2**16 copies, within the limits
COSTLY = f"{DOUBLINGS} | length(to_string(@)) > `0`"
LARGE = {"a": "x" * 1000}  # 2**16 copies of this are far past the budget
TOO_DEEP = f"Nesting deeper than {MAX_EXPRESSION_DEPTH}"
TOO_WIDE = f"More than {MAX_EXPRESSION_FANOUT} projections"
TOO_NESTED = f"Function calls nested deeper than {MAX_FUNCTION_NESTING}"
OVER_BUDGET = "Stopped after 1000000 steps"  # BPM_TRIGGER_EXPRESSION_STEPS, the default
# The issue's condition: 4.6 s on a 4 MB event, under the step budget; 10 of them, 37 s.
NESTED_FILTERS = "a[?b[?d[?@ > `5`]]] == `[]`"
TIME_BUDGET = 50  # the counting clock's seconds: about 50 x STEPS_PER_CLOCK_READ steps
OUT_OF_TIME = f"Stopped after {TIME_BUDGET} s (the time limit per rule and event)."


def nested(numbers: int) -> dict:
    """An event the nested filters walk whole: `numbers` values in one `d`."""
    return {"a": [{"b": [{"d": [1] * numbers}]}]}


@pytest.fixture(autouse=True)
def _time_to_spare(settings) -> None:
    """The step budget is what most tests here look at: time enough, however slow the
    machine (the time budget's tests set theirs)."""
    settings.BPM_TRIGGER_RULE_SECONDS = 600


class CountingClock:
    """The time budget's clock, one second later at each read."""

    def __init__(self) -> None:
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        return float(self.reads)


@pytest.fixture
def clock(monkeypatch, settings) -> CountingClock:
    """A counting clock, and a rule budget of TIME_BUDGET of its seconds."""
    counting = CountingClock()
    monkeypatch.setattr(expressions, "clock", counting)
    settings.BPM_TRIGGER_RULE_SECONDS = TIME_BUDGET
    return counting


def assert_400(response) -> dict:
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "validation_error"
    return error


@pytest.mark.parametrize(
    ("expression", "limit"),
    [
        ("!" * 466 + "a", TOO_DEEP),  # the probe's: a RecursionError, a 500
        ("!" * 900 + "a", TOO_DEEP),
        ("(" * 400 + "a" + ")" * 400, TOO_DEEP),
        ("[" * 300 + "a" + "]" * 300, TOO_DEEP),
        ("a[*]." * 190 + "a", TOO_DEEP),
        ("!" * (MAX_EXPRESSION_DEPTH + 1) + "a", TOO_DEEP),
        ("|".join(["[@,@]"] * (MAX_EXPRESSION_FANOUT + 1)), TOO_WIDE),
        ("abs(" * (MAX_FUNCTION_NESTING + 1) + "n" + ")" * (MAX_FUNCTION_NESTING + 1), TOO_NESTED),
    ],
)
def test_a_condition_past_a_limit_is_400_naming_it(admin_client, expression, limit):
    body = {"name": "costly", "action": "forward", "conditions": ["a", expression]}

    error = assert_400(admin_client.post(TRIGGERS, body, format="json"))

    assert error["message"].startswith(f"conditions[1]: {limit}"), error
    assert limit in error["details"]["conditions[1]"][0]
    assert not TriggerRule.objects.exists()


def test_a_template_past_a_limit_is_400_naming_it(admin_client):
    params = {"question": "Deploy {{ " + "!" * 466 + "a }}?"}
    body = {"name": "costly", "action": "create", "params": params}

    error = assert_400(admin_client.post(TRIGGERS, body, format="json"))

    assert TOO_DEEP in error["details"]["params.question"][0]
    assert not TriggerRule.objects.exists()


@pytest.mark.parametrize(
    "expression",
    [
        "!" * (MAX_EXPRESSION_DEPTH - 1) + "a",  # and the field: 32 levels
        "(" * 30 + "a" + ")" * 30,
        COSTLY,
        "abs(" * MAX_FUNCTION_NESTING + "n" + ")" * MAX_FUNCTION_NESTING,
        "workflow_run.conclusion == 'success' && contains(labels[].name, 'deploy')",
    ],
)
def test_an_expression_at_the_limits_is_accepted(expression):
    assert check_expression(expression) is None


def dry_run(client, rule: str, payload: dict):
    return client.post(f"{TRIGGERS}/{rule}/test", {"type": "x", "payload": payload}, format="json")


def test_a_rule_saved_before_the_limits_dry_runs_to_its_error(admin_client, admin_user):
    TriggerRule.objects.create(
        name="old", action="forward", conditions=["!" * 900 + "a"], owner=admin_user
    )

    response = dry_run(admin_client, "old", {"a": 1})

    assert response.status_code == 200, response.content
    assert TOO_DEEP in response.json()["error"]
    assert response.json()["matched"] is False


def test_an_expression_within_the_limits_stops_at_the_budget_in_the_dry_run(admin_client, admin):
    services.rule_add(actor=admin, name="costly", action="forward", conditions=[COSTLY])

    answer = dry_run(admin_client, "costly", LARGE).json()

    assert OVER_BUDGET in answer["error"] and answer["matched"] is False
    assert dry_run(admin_client, "costly", {"a": 1}).json()["matched"] is True  # small: fine


def test_a_template_within_the_limits_stops_at_the_budget(admin_client, admin):
    question = "{{ " + DOUBLINGS + " }}"
    services.rule_add(actor=admin, name="costly", action="create", params={"question": question})

    answer = dry_run(admin_client, "costly", LARGE).json()

    assert OVER_BUDGET in answer["error"], answer


def test_the_worker_records_the_budget_error_and_the_other_rules_act(admin, admin_user):
    source = EventSource.objects.create(name="ci", kind="generic-hmac", secret="s" * 20)
    services.rule_add(actor=admin, name="costly", action="forward", conditions=[COSTLY])
    TriggerRule.objects.create(
        name="old", action="forward", conditions=["[" * 300 + "a" + "]" * 300], owner=admin_user
    )
    services.rule_add(
        actor=admin, name="fine", action="cancel", params={"selector": {"runId": "r"}}
    )
    event = ExternalEvent.objects.create(
        source=source, type="x", delivery_id="d", payload=LARGE, next_attempt_at=timezone.now()
    )

    assert services.event_evaluate(event.pk) == "processed"

    event.refresh_from_db()
    by_rule = {result["rule"]: result for result in event.results}
    assert event.status == EventStatus.PROCESSED
    assert OVER_BUDGET in by_rule["costly"]["error"]
    assert TOO_DEEP in by_rule["old"]["error"]
    assert "error" not in by_rule["fine"] and by_rule["fine"]["matched"] is True


def test_no_task_runs_without_a_time_limit():
    assert 0 < app.conf.task_soft_time_limit < app.conf.task_time_limit
    assert 0 < evaluate_event.soft_time_limit < evaluate_event.time_limit


# --- time: a budget per rule and event, in the worker and in the dry run ---------------------


def test_the_issues_nested_filters_stop_at_the_time_budget_under_the_step_budget(clock):
    """120,000 values: within the step budget (about 360,000 steps; 720,000 when == paid twice), so before the time
    budget nothing stopped it (seconds on a loaded machine, 37 s for a rule of ten)."""
    with pytest.raises(ExpressionError) as stopped:
        holds(NESTED_FILTERS, nested(120_000))

    assert str(stopped.value) == f"{NESTED_FILTERS}: {OUT_OF_TIME}"
    assert clock.reads <= TIME_BUDGET + 2  # stopped at the deadline, not at the end


def test_the_filters_inner_evaluation_is_paid_per_element(settings):
    settings.BPM_TRIGGER_EXPRESSION_STEPS = 10_000

    with pytest.raises(ExpressionError, match="Stopped after 10000 steps"):
        holds(NESTED_FILTERS, nested(10_000))  # one filtered value in each: about 3 steps
    assert holds(NESTED_FILTERS, nested(1_000)) is True


def test_an_equality_pays_for_its_sides_once():
    """jmespath's comparator evaluated both sides again after ours had (paid for) them:
    twice the work for every == and !=."""
    left = NESTED_FILTERS.split(" == ")[0]
    budget = Budget(steps=10**9)
    search(left, nested(10_000), budget)
    interpreter = expressions._Budgeted(budget)
    interpreter.visit(expressions._parse(left), nested(10_000))
    left_cost = budget.steps - interpreter.left

    assert holds(NESTED_FILTERS, nested(10_000), Budget(steps=left_cost * 3 // 2)) is True


def test_ordering_a_number_and_text_is_null_not_an_error(admin_client, admin):
    """jmespath raised TypeError ('>' not supported between 'str' and 'int'): the dry
    run was a 500 and the worker's whole evaluation failed."""
    services.rule_add(actor=admin, name="big", action="forward", conditions=["a[?@ > `5`]"])

    answer = dry_run(admin_client, "big", {"a": ["x", 7, True, None]})

    assert answer.status_code == 200, answer.content
    assert (answer.json()["matched"], answer.json()["error"]) == (True, None)
    assert search("a[?@ > `5`]", {"a": ["x", 7]}) == [7]
    assert search("a[?@ < 'b']", {"a": ["a", 1, "c"]}) == ["a"]


def test_the_dry_run_of_a_rule_of_ten_costly_conditions_stops_at_one_budget(
    admin_client, admin, clock
):
    """The issue's dry run held a web thread 37 s: each condition had a budget of its own
    and none reached it. The time budget is the rule's, for all its conditions."""
    conditions = [f"{NESTED_FILTERS.split(' == ')[0]}{' ' * n} == `[]`" for n in range(10)]
    services.rule_add(actor=admin, name="costly", action="forward", conditions=conditions)

    response = dry_run(admin_client, "costly", nested(20_000))

    assert response.status_code == 200, response.content
    answer = response.json()
    assert answer["error"].endswith(OUT_OF_TIME) and answer["matched"] is False
    assert answer["error"].startswith(conditions[0])  # the first one used it all
    assert clock.reads <= TIME_BUDGET + 3


def test_a_template_stops_at_the_rules_time_budget(admin_client, admin, clock):
    question = "Deploy {{ a[?b[?d[?@ > `0`]]] | length(@) }}?"
    services.rule_add(actor=admin, name="costly", action="create", params={"question": question})

    answer = dry_run(admin_client, "costly", nested(20_000)).json()

    assert answer["error"].endswith(OUT_OF_TIME), answer
    assert answer["matched"] is True and answer["actions"] == []


def test_the_worker_records_the_time_budget_error_and_the_other_rules_act(
    admin, clock, make_breakpoint
):
    source = EventSource.objects.create(name="ci", kind="generic-hmac", secret="s" * 20)
    services.rule_add(actor=admin, name="costly", action="forward", conditions=[NESTED_FILTERS])
    services.rule_add(
        actor=admin, name="fine", action="cancel", params={"selector": {"runId": "r"}}
    )
    waiting = make_breakpoint(run_id="r")
    event = ExternalEvent.objects.create(
        source=source,
        type="x",
        delivery_id="d",
        payload=nested(20_000),
        next_attempt_at=timezone.now(),
    )

    assert services.event_evaluate(event.pk) == "processed"

    by_rule = {result["rule"]: result for result in ExternalEvent.objects.get(pk=event.pk).results}
    assert by_rule["costly"]["error"] == f"{NESTED_FILTERS}: {OUT_OF_TIME}"
    assert by_rule["fine"]["actions"][0]["outcome"] == "cancelled"
    assert Breakpoint.objects.get(pk=waiting.pk).status == "cancelled"


# --- size: rules are not evaluated on events past BPM_TRIGGER_MAX_EVENT_BYTES ----------------


def test_an_event_past_the_size_bound_is_stored_and_each_rules_outcome_says_why(
    admin, settings, make_breakpoint
):
    settings.BPM_TRIGGER_MAX_EVENT_BYTES = 1000
    source = EventSource.objects.create(name="ci", kind="generic-hmac", secret="s" * 20)
    services.rule_add(
        actor=admin, name="cancel-run", action="cancel", params={"selector": {"runId": "r"}}
    )
    waiting = make_breakpoint(run_id="r")
    small, large = ({"run": "r", "pad": "x" * size} for size in (900, 1000))
    events = [
        ExternalEvent.objects.create(
            source=source,
            type="x",
            delivery_id=name,
            payload=payload,
            next_attempt_at=timezone.now(),
        )
        for name, payload in (("large", large), ("small", small))
    ]

    assert services.event_evaluate(events[0].pk) == "processed"
    (outcome,) = ExternalEvent.objects.get(pk=events[0].pk).results
    assert outcome == {
        "rule": "cancel-run",
        "action": "cancel",
        "error": "Not evaluated: the event is 1,020 bytes, rules evaluate events of at most "
        "1,000 (BPM_TRIGGER_MAX_EVENT_BYTES).",
    }
    assert Breakpoint.objects.get(pk=waiting.pk).status == "waiting"

    assert services.event_evaluate(events[1].pk) == "processed"  # 920 bytes: evaluated
    assert Breakpoint.objects.get(pk=waiting.pk).status == "cancelled"


def test_the_dry_run_refuses_a_sample_past_the_size_bound_the_same_way(
    admin_client, admin, settings
):
    settings.BPM_TRIGGER_MAX_EVENT_BYTES = 1000
    services.rule_add(actor=admin, name="any", action="forward")

    response = dry_run(admin_client, "any", {"pad": "x" * 1000})

    assert response.status_code == 200, response.content
    assert response.json()["error"].startswith("Not evaluated: the event is 1,010 bytes")
    assert (response.json()["matched"], response.json()["actions"]) == (False, [])
    assert dry_run(admin_client, "any", {"pad": "x"}).json()["matched"] is True
