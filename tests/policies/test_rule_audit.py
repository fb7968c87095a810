"""Every change of the auto-approval rules is recorded, in the change's transaction: a
rule added (API, command, a reviewer's Always approve), removed, promoted."""

import pytest
from django.core.management import call_command

from audit.models import RuleEvent
from core.actors import Actor
from policies import autoapproval

pytestmark = pytest.mark.django_db


def events() -> list[tuple[str, str, str]]:
    return list(RuleEvent.objects.order_by("id").values_list("type", "pattern", "actor"))


def test_a_rule_added_and_removed_through_the_api_is_recorded_with_who(admin_client):
    created = admin_client.post(
        "/api/rules", {"pattern": "deploy.*", "note": "routine"}, format="json"
    )
    assert created.status_code == 201, created.content
    rule_id = created.json()["id"]
    assert admin_client.delete(f"/api/rules/{rule_id}").status_code == 204
    assert [(t, p) for t, p, _ in events()] == [("created", "deploy.*"), ("removed", "deploy.*")]
    added, removed = RuleEvent.objects.order_by("id")
    assert added.rule_id == removed.rule_id == rule_id
    assert added.actor == removed.actor != ""
    assert added.metadata == {"action": "auto-approve", "mode": "live", "note": "routine"}


def test_a_refused_change_records_nothing(admin_client, reviewer_client):
    assert reviewer_client.post("/api/rules", {"pattern": "x.*"}, format="json").status_code == 403
    assert admin_client.post("/api/rules", {"pattern": "x.*("}, format="json").status_code == 400
    assert admin_client.delete("/api/rules/rule-00000000").status_code == 404
    assert events() == []


def test_a_command_and_always_approve_are_recorded_as_who_made_them():
    call_command("approve_rule", "plan.*", stdout=None)
    autoapproval.rule_always_approve_key(actor=Actor(name="alice"), key="confirm.star", note="")
    autoapproval.rule_always_approve_key(actor=Actor(name="bob"), key="confirm.star", note="")
    recorded = events()
    assert [(t, p) for t, p, _ in recorded] == [("created", "plan.*"), ("created", "confirm.star")]
    assert recorded[1][2] == "alice"  # bob's reused the rule: nothing new to record
