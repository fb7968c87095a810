"""What a JMESPath condition or template may cost: its shape is bounded when a rule is
saved (a 400 naming the limit, nothing stored), and its work when it runs (a rule saved
before the limits, or one within them over a large payload, records an error: the dry
run answers 200 with it, the worker marks the event processed with it)."""

import pytest
from django.utils import timezone

from config.celery import app
from core.actors import Actor
from core.limits import (
    MAX_EXPRESSION_DEPTH,
    MAX_EXPRESSION_FANOUT,
    MAX_FUNCTION_NESTING,
)
from triggers import services
from triggers.expressions import check_expression
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


@pytest.fixture
def admin(admin_user) -> Actor:
    return Actor.for_user(admin_user)


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
