"""Shadow mode: a rule that decides nothing records the breakpoints it would have approved
(an `auto_approval.shadow` event, `autoApproval.shadow`), the console and the metrics count
what people then decided, and one audited action promotes it to live."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from accounts.tokens import token_create_for_agent
from audit.models import Event, RuleEvent
from breakpoints.services import breakpoint_always_approve, breakpoint_delete
from core.actors import Actor
from policies import autoapproval
from policies.foureyes import FOUR_EYES_REASON
from policies.models import AutoApprovalRule, ShadowFire
from policies.shadow import ShadowCounts, shadow_counts
from tests.conftest import bearer_client
from tests.support.api import assert_error
from tests.support.console import messages, session_client
from tests.support.metrics import scrape, value

RULES = "/api/rules"
CREATE = "/api/breakpoints"
RULES_URL = "/admin/policies/autoapprovalrule/"
SYSTEM = Actor.system("test")


def shadow_rule(admin_client, pattern: str = "deploy.*", **body) -> str:
    response = admin_client.post(
        RULES, {"pattern": pattern, "mode": "shadow", **body}, format="json"
    )
    assert response.status_code == 201, response.json()
    assert response.json()["mode"] == "shadow"
    return response.json()["id"]


def ask(agent_client, key: str = "deploy.web", **payload) -> dict:
    body = {"payload": {"question": "Deploy?", "breakpointId": key, **payload}}
    response = agent_client.post(CREATE, body, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def decide(reviewer_client, breakpoint_id: str, *, approved: bool) -> None:
    body = {"release": True, "approved": approved, "comment": "" if approved else "Not now."}
    response = reviewer_client.post(f"{CREATE}/{breakpoint_id}/feedback", body, format="json")
    assert response.status_code in (200, 201), response.json()


def event_types(breakpoint_id: str) -> list[str]:
    return list(Event.objects.filter(breakpoint_id=breakpoint_id).values_list("type", flat=True))


# --- a shadow rule never decides ---------------------------------------------------------


def test_a_shadow_rule_leaves_the_breakpoint_waiting_and_records_its_event(
    admin_client, agent_client
):
    rule_id = shadow_rule(admin_client)

    body = ask(agent_client)

    assert body["status"] == "waiting"
    assert body["autoApproval"] == {
        "recommended": False,
        "reason": "No matching rule",
        "matchedRule": None,
        "consecutiveApprovals": 0,
        "shadow": True,
        "shadowRules": [rule_id],
    }
    events = agent_client.get(f"{CREATE}/{body['breakpointId']}/events").json()["results"]
    assert [event["type"] for event in events] == ["created", "auto_approval.shadow"]
    assert events[1]["actor"] == f"rule:{rule_id}"
    assert events[1]["metadata"]["matchedRule"] == rule_id
    polled = agent_client.get(f"{CREATE}/{body['breakpointId']}").json()
    assert polled["autoApproval"]["shadow"] is True
    assert shadow_counts() == {rule_id: ShadowCounts(fires=1)}


def test_a_breakpoint_no_shadow_rule_matches_carries_no_shadow_key(admin_client, agent_client):
    shadow_rule(admin_client, "confirm.*")

    body = ask(agent_client, "deploy.web")

    assert "shadow" not in body["autoApproval"]
    assert event_types(body["breakpointId"]) == ["created"]
    assert not ShadowFire.objects.exists()


def test_every_matching_shadow_rule_fires(admin_client, agent_client):
    broad, narrow = shadow_rule(admin_client, "deploy.*"), shadow_rule(admin_client, "deploy.web")

    body = ask(agent_client)

    assert body["autoApproval"]["shadowRules"] == [broad, narrow]
    assert event_types(body["breakpointId"]).count("auto_approval.shadow") == 2


def test_a_live_rule_that_approves_leaves_the_shadow_rule_silent(admin_client, agent_client):
    shadow_rule(admin_client, "deploy.*")
    live = admin_client.post(RULES, {"pattern": "deploy.web"}, format="json").json()["id"]

    body = ask(agent_client)

    assert body["status"] == "released"
    assert body["result"]["respondedBy"] == f"rule:{live}"
    assert "shadow" not in body["autoApproval"]
    assert "auto_approval.shadow" not in event_types(body["breakpointId"])


# --- the precedence: what would stop a live rule stops a shadow one ------------------------


def test_a_never_auto_approve_rule_wins_over_a_shadow_rule(admin_client, agent_client):
    shadow_rule(admin_client, "deploy.*")
    never = admin_client.post(
        RULES, {"pattern": "deploy.web", "action": "never-auto-approve"}, format="json"
    ).json()["id"]

    body = ask(agent_client)

    assert body["status"] == "waiting"
    assert body["autoApproval"]["matchedRule"] == never
    assert "shadow" not in body["autoApproval"]
    assert not ShadowFire.objects.exists()


def test_a_shadow_rule_under_four_eyes_does_not_fire(admin_client, db):
    shadow_rule(admin_client)
    owned = bearer_client(token_create_for_agent(agent_id="agent-d", owner="dana")[1])

    body = ask(owned, preventSelfReview=True)  # four eyes needs a requester: the owner

    assert body["status"] == "waiting"
    assert body["autoApproval"]["reason"] == FOUR_EYES_REASON
    assert "shadow" not in body["autoApproval"]
    assert "auto_approval.shadow" not in event_types(body["breakpointId"])


def test_an_always_break_on_tag_wins_over_a_shadow_rule(admin_client, agent_client):
    shadow_rule(admin_client)
    autoapproval.always_break_on_add(actor=SYSTEM, tag="prod")

    response = agent_client.post(
        CREATE, {"payload": {"breakpointId": "deploy.web"}, "tags": ["prod"]}, format="json"
    )

    assert "shadow" not in response.json()["autoApproval"]
    assert not ShadowFire.objects.exists()


def test_a_streak_that_approves_leaves_the_shadow_rule_silent(
    admin_client, agent_client, reviewer_client
):
    shadow_rule(admin_client)
    first = ask(agent_client, autoApproveAfterN=1)
    decide(reviewer_client, first["breakpointId"], approved=True)

    second = ask(agent_client, autoApproveAfterN=1)

    assert second["status"] == "released"
    assert second["result"]["respondedBy"] == "auto:after-1"
    assert "shadow" not in second["autoApproval"]


def test_evaluate_reports_what_the_shadow_rule_would_do(admin_client):
    rule_id = shadow_rule(admin_client)

    verdict = admin_client.get(f"{RULES}/evaluate?key=deploy.web").json()

    assert (verdict["recommended"], verdict["shadow"], verdict["shadowRules"]) == (
        False,
        True,
        [rule_id],
    )


def test_shadow_rules_cost_no_extra_query_at_creation(admin_client, agent_client):
    """Live and shadow rules are read together: a shadow rule that does not match adds no
    query to a creation (nor does any number of them)."""
    ask(agent_client, "warm.up")  # first-request costs (token cache, content types) paid

    with CaptureQueriesContext(connection) as without:
        ask(agent_client, "deploy.one")
    for number in range(5):
        shadow_rule(admin_client, f"other-{number}.*")
    with CaptureQueriesContext(connection) as with_shadow_rules:
        ask(agent_client, "deploy.two")

    assert len(with_shadow_rules) == len(without)


@pytest.mark.django_db
def test_rule_list_holds_the_live_rules_only():
    live = autoapproval.rule_create(actor=SYSTEM, pattern="a.*")
    shadow = autoapproval.rule_create(actor=SYSTEM, pattern="b.*", mode="shadow")

    assert list(autoapproval.rule_list()) == [live]
    assert list(autoapproval.shadow_rule_list()) == [shadow]
    assert list(autoapproval.rule_list_all()) == [live, shadow]


# --- creation: the mode ---------------------------------------------------------------------


def test_a_rule_is_live_unless_told_and_the_list_shows_both(admin_client):
    live = admin_client.post(RULES, {"pattern": "a.*"}, format="json").json()
    shadow_id = shadow_rule(admin_client, "b.*")

    listed = admin_client.get(RULES).json()["results"]

    assert live["mode"] == "live"
    assert [(rule["id"], rule["mode"]) for rule in listed] == [
        (live["id"], "live"),
        (shadow_id, "shadow"),
    ]
    assert admin_client.get(f"{RULES}/{shadow_id}").json()["mode"] == "shadow"


@pytest.mark.parametrize(
    "body",
    [
        {"pattern": "a.*", "mode": "sometimes"},
        {"pattern": "a.*", "mode": None},
        {"pattern": "a.*", "mode": "shadow", "action": "never-auto-approve"},
    ],
)
def test_an_unknown_mode_or_a_shadow_never_rule_is_400(admin_client, body):
    error = assert_error(admin_client.post(RULES, body, format="json"), 400)
    assert "mode" in error["details"]
    assert not AutoApprovalRule.objects.exists()


# --- agreements ---------------------------------------------------------------------------


def test_people_agree_or_disagree_and_only_their_decisions_count(
    admin_client, agent_client, reviewer_client
):
    rule_id = shadow_rule(admin_client)
    approved, rejected, waiting, cancelled = (ask(agent_client, f"deploy.{n}") for n in "abcd")

    decide(reviewer_client, approved["breakpointId"], approved=True)
    decide(reviewer_client, rejected["breakpointId"], approved=False)
    cancel = agent_client.post(f"{CREATE}/{cancelled['breakpointId']}/cancel", {}, format="json")
    assert cancel.status_code == 200, cancel.json()

    assert shadow_counts([rule_id]) == {rule_id: ShadowCounts(fires=4, agreed=1, disagreed=1)}
    assert shadow_counts([rule_id])[rule_id].undecided == 2
    assert waiting["status"] == "waiting"


def test_a_deleted_breakpoint_takes_its_fires_with_it(admin_client, agent_client, admin_user):
    rule_id = shadow_rule(admin_client)
    kept, deleted = ask(agent_client, "deploy.a"), ask(agent_client, "deploy.b")

    breakpoint_delete(breakpoint_id=deleted["breakpointId"], actor=Actor.for_user(admin_user))

    assert shadow_counts() == {rule_id: ShadowCounts(fires=1)}
    assert ShadowFire.objects.get().breakpoint_id == kept["breakpointId"]


# --- promotion: the API ---------------------------------------------------------------------


def test_promotion_makes_the_rule_decide_for_the_next_breakpoint_and_is_audited(
    admin_client, agent_client, reviewer_client, admin_user
):
    rule_id = shadow_rule(admin_client)
    before = ask(agent_client, "deploy.before")
    decide(reviewer_client, before["breakpointId"], approved=True)

    response = admin_client.post(f"{RULES}/{rule_id}/promote")

    assert response.status_code == 200
    assert response.json()["mode"] == "live"
    assert AutoApprovalRule.objects.get(pk=rule_id).mode == "live"
    event = RuleEvent.objects.get(type="promoted")
    assert (event.type, event.rule_id, event.pattern, event.actor) == (
        "promoted",
        rule_id,
        "deploy.*",
        admin_user.username,
    )
    assert event.metadata == {
        "modeFrom": "shadow",
        "modeTo": "live",
        "shadowFires": 1,
        "shadowAgreed": 1,
        "shadowDisagreed": 0,
    }
    after = ask(agent_client, "deploy.after")
    assert after["status"] == "released"
    assert after["result"]["respondedBy"] == f"rule:{rule_id}"
    assert "shadow" not in after["autoApproval"]


def test_promoting_a_live_rule_is_409_and_recorded_once(admin_client):
    rule_id = shadow_rule(admin_client)
    assert admin_client.post(f"{RULES}/{rule_id}/promote/").status_code == 200

    assert_error(admin_client.post(f"{RULES}/{rule_id}/promote"), 409, "conflict")
    assert RuleEvent.objects.filter(type="promoted").count() == 1


def test_promoting_an_unknown_rule_is_404_and_a_body_is_400(admin_client):
    assert_error(admin_client.post(f"{RULES}/rule-00000000/promote"), 404, "not_found")
    rule_id = shadow_rule(admin_client)
    response = admin_client.post(f"{RULES}/{rule_id}/promote", {"mode": "live"}, format="json")
    assert_error(response, 400)
    assert AutoApprovalRule.objects.get(pk=rule_id).mode == "shadow"


@pytest.mark.parametrize("who", ["reviewer_client", "agent_client", "nobody_client"])
def test_only_admins_promote(request, admin_client, who):
    rule_id = shadow_rule(admin_client)

    assert_error(request.getfixturevalue(who).post(f"{RULES}/{rule_id}/promote"), 403, "permission_denied")  # fmt: skip

    assert AutoApprovalRule.objects.get(pk=rule_id).mode == "shadow"
    assert not RuleEvent.objects.filter(type="promoted").exists()


def test_the_schema_documents_the_mode_and_the_promotion(admin_client):
    schema = admin_client.get("/api/schema?format=json").json()
    promote = schema["paths"]["/api/rules/{id}/promote"]["post"]
    assert set(promote["responses"]) >= {"200", "403", "404", "409"}
    assert schema["components"]["schemas"]["Rule"]["properties"]["mode"]
    auto_approval = schema["components"]["schemas"]["AutoApproval"]
    assert {"shadow", "shadowRules"} <= set(auto_approval["properties"])
    assert "shadow" not in auto_approval["required"]


# --- the console ----------------------------------------------------------------------------


def _shadow_history(admin_client, agent_client, reviewer_client) -> str:
    """A shadow rule that fired on four breakpoints: two approved, one rejected, one waiting."""
    rule_id = shadow_rule(admin_client)
    fired = [ask(agent_client, f"deploy.{n}")["breakpointId"] for n in "abcd"]
    decide(reviewer_client, fired[0], approved=True)
    decide(reviewer_client, fired[1], approved=True)
    decide(reviewer_client, fired[2], approved=False)
    return rule_id


def test_the_console_shows_fires_agreements_and_disagreements(
    admin_client, agent_client, reviewer_client, admin_browser
):
    rule_id = _shadow_history(admin_client, agent_client, reviewer_client)

    listing = admin_browser.get(RULES_URL)

    assert listing.status_code == 200
    [row] = listing.context["cl"].result_list
    assert (row.pk, row.shadow_fired, row.shadow_agreed, row.shadow_disagreed) == (rule_id, 4, 2, 1)
    html = listing.content.decode()
    for label in ("Would have fired", "Agreed (approved)", "Disagreed (rejected)", "shadow"):
        assert label in html
    page = admin_browser.get(f"{RULES_URL}{rule_id}/change/")
    assert page.status_code == 200
    assert "Promote to live" in page.content.decode()


def test_the_rule_list_costs_the_same_queries_for_one_or_many_shadow_rules(
    admin_client, agent_client, reviewer_client, admin_browser
):
    _shadow_history(admin_client, agent_client, reviewer_client)
    admin_browser.get(RULES_URL)
    with CaptureQueriesContext(connection) as one:
        admin_browser.get(RULES_URL)
    for number in range(5):
        shadow_rule(admin_client, f"more-{number}.*")
        ask(agent_client, f"more-{number}.x")
    with CaptureQueriesContext(connection) as six:
        listing = admin_browser.get(RULES_URL)

    assert len(listing.context["cl"].result_list) == 6
    assert len(six) == len(one)


def test_the_console_promotes_through_the_button_and_the_list_action(
    admin_client, agent_client, admin_browser, console_admin
):
    by_button, by_action = (
        shadow_rule(admin_client, "deploy.*"),
        shadow_rule(admin_client, "plan.*"),
    )

    response = admin_browser.post(f"{RULES_URL}{by_button}/promote/")
    assert response.status_code == 302
    assert f"Promoted rule {by_button}: it now decides." in messages(response)
    response = admin_browser.post(
        RULES_URL, {"action": "promote_selected", "_selected_action": [by_action, by_button]}
    )
    assert response.status_code == 302
    assert f"Rule {by_button} is already live." in messages(response)

    assert set(AutoApprovalRule.objects.values_list("mode", flat=True)) == {"live"}
    assert set(RuleEvent.objects.filter(type="promoted").values_list("rule_id", "actor")) == {
        (by_button, console_admin.username),
        (by_action, console_admin.username),
    }
    assert ask(agent_client, "plan.x")["result"]["respondedBy"] == f"rule:{by_action}"
    # The rule events are in the console's audit trail.
    assert by_action in admin_browser.get("/admin/audit/ruleevent/").content.decode()


def test_the_console_evaluator_names_the_shadow_rules_that_would_approve(
    admin_client, admin_browser
):
    rule_id = shadow_rule(admin_client)

    page = admin_browser.get(f"{RULES_URL}evaluate/", {"key": "deploy.web"})

    assert page.context["verdict"].shadow_rules == (rule_id,)
    assert "Shadow rules that would approve" in page.content.decode()
    assert rule_id in page.content.decode()


def test_the_console_adds_a_shadow_rule(admin_browser):
    response = admin_browser.post(
        f"{RULES_URL}add/", {"pattern": "deploy.*", "action": "auto-approve", "mode": "shadow"}
    )
    assert response.status_code == 302
    assert AutoApprovalRule.objects.get().mode == "shadow"


def test_reviewers_cannot_promote_in_the_console(admin_client, console_reviewer):
    rule_id = shadow_rule(admin_client)
    browser = session_client(console_reviewer)

    assert browser.post(f"{RULES_URL}{rule_id}/promote/").status_code == 403
    assert AutoApprovalRule.objects.get(pk=rule_id).mode == "shadow"


def test_the_promote_address_takes_posts_only(admin_client, admin_browser):
    rule_id = shadow_rule(admin_client)
    assert admin_browser.get(f"{RULES_URL}{rule_id}/promote/").status_code == 405
    assert AutoApprovalRule.objects.get(pk=rule_id).mode == "shadow"


# --- metrics --------------------------------------------------------------------------------


def test_metrics_count_fires_and_agreements_per_shadow_rule(
    client, admin_client, agent_client, reviewer_client
):
    rule_id = _shadow_history(admin_client, agent_client, reviewer_client)
    promoted = shadow_rule(admin_client, "plan.*")
    ask(agent_client, "plan.x")
    admin_client.post(f"{RULES}/{promoted}/promote")
    idle = shadow_rule(admin_client, "idle.*")

    samples = scrape(client)

    assert value(samples, "bpm_shadow_rule_fires", rule=rule_id) == 4
    assert value(samples, "bpm_shadow_rule_agreed", rule=rule_id) == 2
    assert value(samples, "bpm_shadow_rule_disagreed", rule=rule_id) == 1
    assert value(samples, "bpm_shadow_rule_fires", rule=idle) == 0
    # Labels: the rules in shadow mode now, no others.
    labelled = {dict(labels).get("rule") for name, labels in samples if name == "bpm_shadow_rule_fires"}  # fmt: skip
    assert labelled == {rule_id, idle}


# --- "Always approve" and the management commands ------------------------------------------


def test_always_approve_adds_a_live_rule_beside_a_shadow_one_for_the_key(
    admin_client, agent_client, reviewer
):
    shadow_id = shadow_rule(admin_client, "deploy.web")
    body = ask(agent_client)

    _, _, rule = breakpoint_always_approve(
        breakpoint_id=body["breakpointId"], actor=Actor.for_user(reviewer)
    )

    assert rule.pk != shadow_id and rule.mode == "live"
    assert shadow_counts([shadow_id]) == {shadow_id: ShadowCounts(fires=1, agreed=1)}
    assert ask(agent_client)["result"]["respondedBy"] == f"rule:{rule.pk}"


def run(*args) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


@pytest.mark.django_db
def test_the_commands_add_list_and_promote_a_shadow_rule():
    added = run("approve_rule", "deploy.*", "--shadow").strip().splitlines()
    assert added[0] == "Added shadow auto-approve rule for deploy.*"
    rule_id = added[-1]
    assert run("list_rules").splitlines() == [f"{rule_id}\tshadow:auto-approve\tdeploy.*"]
    assert json.loads(run("list_rules", "--json"))[0]["mode"] == "shadow"

    assert f"Promoted rule {rule_id}: it now decides." in run("promote_rule", rule_id)

    assert json.loads(run("list_rules", "--json"))[0]["mode"] == "live"
    assert RuleEvent.objects.get(type="promoted").actor == "system:cli"
    with pytest.raises(CommandError, match="already live"):
        run("promote_rule", rule_id)
    with pytest.raises(CommandError, match="Only auto-approve rules"):
        run("approve_rule", "gate.*", "--action", "never-auto-approve", "--shadow")
