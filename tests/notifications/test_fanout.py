"""Who hears about a breakpoint: the outbox rows (Delivery with a channel and a
target) that breakpoints are created, nudged and decided with, through the API.

Routes are managed through /api/routes, breakpoints created and decided through the
breakpoint API. Nothing is sent: these tests read the rows written in the change's
transaction (non-transactional `db`: the after-commit publish never runs).
"""

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from breakpoints.models import Breakpoint
from breakpoints.services import (
    breakpoints_escalate_due,
    breakpoints_expire_due,
    breakpoints_remind_due,
)
from core.actors import Actor
from core.exceptions import InvalidInput
from notifications.models import Delivery
from policies.routes import NO_NULL, route_add
from tests.support.factories import AdminFactory, ReviewerFactory

SLACK = {"kind": "slack", "channel": "C0123"}
OPS_MAIL = {"kind": "email", "to": ["ops@example.com", "sre@example.com"]}
JIRA = {"kind": "jira", "project": "OPS"}
SLACK_EXPERTS = {"kind": "slack", "to": "experts"}
EMAIL_EXPERTS = {"kind": "email", "to": "experts"}
ANNOUNCED = [
    ("email", {"email": "ops@example.com"}),
    ("email", {"email": "sre@example.com"}),
    ("jira", {"project": "OPS"}),
    ("slack", {"channel": "C0123"}),
]


@pytest.fixture
def channels_on(settings):
    """Slack, email and JIRA configured (no server is ever contacted here)."""
    settings.SLACK_BOT_TOKEN = "xoxb-test"
    settings.BPM_NOTIFY_EMAIL = True
    settings.JIRA_URL = "http://127.0.0.1:9"
    return settings


@pytest.fixture
def route(admin_client):
    """Add a route through the API: route(name, pattern, channels, **fields)."""

    def add(name: str, pattern: str, channels: list, **fields) -> dict:
        body = {"name": name, "pattern": pattern, "channels": channels, **fields}
        response = admin_client.post("/api/routes", body, format="json")
        assert response.status_code == 201, response.content
        return response.json()

    return add


@pytest.fixture
def create(agent_client):
    """Create a breakpoint through the API; returns its id."""

    def make(key: str = "deploy.web", tags: list | None = None, **payload) -> str:
        body = {"payload": {"question": "Ship it?", "breakpointId": key, **payload}}
        if tags is not None:
            body["tags"] = tags
        response = agent_client.post("/api/breakpoints", body, format="json")
        assert response.status_code == 201, response.content
        return response.json()["breakpointId"]

    return make


def _order(row) -> str:
    return json.dumps(row, sort_keys=True)  # jsonb keeps its own key order


def targets(breakpoint_id: str, event: str = "created") -> list[tuple[str, dict]]:
    """The channel targets of one event, sorted (webhook rows left out)."""
    rows = Delivery.objects.filter(
        breakpoint_id=breakpoint_id, event_type=event, webhook__isnull=True
    )
    return sorted(((row.channel, row.target) for row in rows), key=_order)


def experts(*pairs) -> list[tuple[str, dict]]:
    """(channel, user) -> the expert target rows, sorted like targets()."""
    rows = [(channel, {"email": user.email, "user": user.pk}) for channel, user in pairs]
    return sorted(rows, key=_order)


def release(client, breakpoint_id: str):
    response = client.post(
        f"/api/breakpoints/{breakpoint_id}/feedback",
        {"comment": "ok", "release": True},
        format="json",
    )
    assert response.status_code == 201, response.content


def later(seconds: int):
    return timezone.now() + timedelta(seconds=seconds)


# --- created: the routes' channels ----------------------------------------------------------


def test_a_route_announces_on_each_of_its_channels(channels_on, route, create):
    route("deploys", "deploy.*", [SLACK, OPS_MAIL, JIRA])

    bp_id = create()

    assert targets(bp_id) == ANNOUNCED
    rows = Delivery.objects.filter(breakpoint_id=bp_id, webhook__isnull=True)
    for row in rows:
        assert row.body["type"] == "breakpoint.created"
        assert row.body["data"]["breakpointId"] == bp_id
        assert row.status == "pending"


@pytest.mark.parametrize(
    ("slack", "email", "jira", "expected"),
    [
        ("", False, "", []),
        ("xoxb-test", False, "", [("slack", {"channel": "C0123"})]),
        ("", True, "", ANNOUNCED[:2]),
        ("", False, "http://127.0.0.1:9", [("jira", {"project": "OPS"})]),
    ],
)
def test_an_unconfigured_channel_is_skipped(settings, route, create, slack, email, jira, expected):
    settings.SLACK_BOT_TOKEN, settings.BPM_NOTIFY_EMAIL, settings.JIRA_URL = slack, email, jira
    route("deploys", "deploy.*", [SLACK, OPS_MAIL, JIRA])

    assert targets(create()) == expected


def test_experts_are_every_seat_holder_with_an_email(channels_on, route, create, expert_member):
    tina = expert_member("tina", "tech-lead")
    tom = expert_member("tom", "tech-lead")
    tom.email = ""
    tom.save()
    sam = ReviewerFactory(username="sam")
    olga = ReviewerFactory(username="olga")
    ReviewerFactory(username="gone", is_active=False)
    channels_on.BPM_PROJECT_OWNERS = ["olga", "tina"]
    route("experts", "deploy.*", [SLACK_EXPERTS, EMAIL_EXPERTS])

    bp_id = create(expert=["tech-lead", "sam", "owner", "gone", "ghost"])

    people = [tina, sam, olga]
    assert targets(bp_id) == experts(
        *[("slack", user) for user in people], *[("email", user) for user in people]
    )


def test_without_a_route_the_routed_experts_get_an_email(channels_on, create, three_experts):
    bp_id = create(expert=["tech-lead", "ops-lead"])

    assert targets(bp_id) == experts(
        ("email", three_experts["tech-lead"]), ("email", three_experts["ops-lead"])
    )


def test_without_a_route_an_unrouted_breakpoint_reaches_nobody(channels_on, create):
    bp_id = create()

    assert not Delivery.objects.filter(breakpoint_id=bp_id).exists()


def test_without_a_route_and_email_off_nobody_hears(settings, create, three_experts):
    settings.SLACK_BOT_TOKEN = "xoxb-test"  # Slack alone is no default

    assert targets(create(expert=["tech-lead"])) == []


def test_a_matching_route_replaces_the_default(channels_on, route, create, three_experts):
    route("deploys", "deploy.*", [SLACK])

    assert targets(create(expert=["tech-lead"])) == [("slack", {"channel": "C0123"})]


def test_a_disabled_route_is_ignored(channels_on, route, create, three_experts):
    route("deploys", "deploy.*", [SLACK], enabled=False)

    assert targets(create()) == []
    assert targets(create(expert=["tech-lead"])) == experts(("email", three_experts["tech-lead"]))


def test_every_matching_route_adds_its_targets_once(channels_on, route, create):
    route("all", "*", [SLACK, JIRA])
    route("deploys", "deploy.*", [SLACK, OPS_MAIL])
    route("others", "other.*", [{"kind": "slack", "channel": "C9"}])

    assert targets(create()) == ANNOUNCED  # C0123 once, no C9


def test_predicates_are_respected(channels_on, route, create, three_experts):
    route("prod", "*(tags contains 'prod')", [SLACK])
    route("security", "*(expert = 'security-lead')", [JIRA])

    assert targets(create(tags=["prod", "web"])) == [("slack", {"channel": "C0123"})]
    assert targets(create(tags=["dev"])) == []
    assert targets(create(expert=["security-lead"])) == [("jira", {"project": "OPS"})]
    assert targets(create(expert=["ops-lead"])) == experts(("email", three_experts["ops-lead"]))


# --- nudges: the routes again, JIRA only once ----------------------------------------------


def test_reminders_and_escalations_go_to_the_routes_but_not_jira(channels_on, route, create):
    route("deploys", "deploy.*", [SLACK, JIRA])
    reminded = create(remindEverySeconds=300)
    escalated = create(escalateAfterSeconds=60, escalateTo="ops-lead")

    assert breakpoints_remind_due(now=later(301)) == 1
    assert breakpoints_escalate_due(now=later(61)) == 1

    assert targets(reminded, "reminder") == [("slack", {"channel": "C0123"})]
    assert targets(escalated, "escalated") == [("slack", {"channel": "C0123"})]
    assert targets(escalated, "created") == [("jira", {"project": "OPS"}), ("slack", {"channel": "C0123"})]  # fmt: skip


# --- outcomes: every target that showed it -------------------------------------------------


# How each outcome is reached through the API: (client fixture, action, body, status).
ENDINGS = {
    "released": ("reviewer_client", "feedback", {"release": True}, 201),
    "expired": ("admin_client", "expire", {}, 200),
    "cancelled": ("agent_client", "cancel", {"reason": "moot"}, 200),
}


@pytest.mark.parametrize("outcome", ENDINGS)
def test_the_outcome_goes_to_each_target_that_showed_it(
    request, channels_on, route, create, outcome
):
    route("deploys", "deploy.*", [SLACK, OPS_MAIL, JIRA])
    bp_id = create()
    route("late", "*", [{"kind": "slack", "channel": "C9LATE"}])  # after it was shown
    who, action, body, status = ENDINGS[outcome]

    client = request.getfixturevalue(who)
    response = client.post(f"/api/breakpoints/{bp_id}/{action}", body, format="json")

    assert response.status_code == status, response.content

    assert targets(bp_id, outcome) == ANNOUNCED  # one each, no C9LATE
    rows = Delivery.objects.filter(breakpoint_id=bp_id, event_type=outcome)
    assert {row.body["data"]["status"] for row in rows} == {outcome}


def test_a_later_route_that_showed_a_reminder_hears_the_outcome(
    channels_on, route, create, reviewer_client
):
    route("deploys", "deploy.*", [SLACK])
    bp_id = create(remindEverySeconds=300)
    late = {"kind": "slack", "channel": "C9LATE"}
    route("late", "*", [late, JIRA])  # JIRA opens issues on created only
    assert breakpoints_remind_due(now=later(301)) == 1

    release(reviewer_client, bp_id)

    assert targets(bp_id, "released") == [
        ("slack", {"channel": "C0123"}),
        ("slack", {"channel": "C9LATE"}),
    ]


def test_an_outcome_of_a_breakpoint_nobody_was_shown_goes_nowhere(
    channels_on, route, create, reviewer_client
):
    bp_id = create()
    route("late", "*", [SLACK])

    release(reviewer_client, bp_id)

    assert targets(bp_id, "released") == []


def test_the_ttl_sweep_writes_the_outcome_as_the_single_path_does(
    channels_on, route, create, admin_client, three_experts
):
    route("deploys", "deploy.*", [SLACK, OPS_MAIL, JIRA, EMAIL_EXPERTS])
    by_hand = create(expert=["tech-lead"])
    swept = [create(expert=["tech-lead"]) for _ in range(3)]
    Breakpoint.objects.filter(pk__in=swept).update(expires_at=later(-1))

    assert admin_client.post(f"/api/breakpoints/{by_hand}/expire").status_code == 200
    assert breakpoints_expire_due() == 3

    expected = sorted([*ANNOUNCED, *experts(("email", three_experts["tech-lead"]))], key=_order)
    assert targets(by_hand, "expired") == expected
    for bp_id in swept:
        assert targets(bp_id, "expired") == expected
        rows = Delivery.objects.filter(breakpoint_id=bp_id, event_type="expired")
        assert {row.body["data"]["status"] for row in rows} == {"expired"}
        assert {row.body["type"] for row in rows} == {"breakpoint.expired"}


def test_feedback_goes_to_the_jira_issues_only(channels_on, route, create, reviewer_client):
    route("deploys", "deploy.*", [SLACK, OPS_MAIL, JIRA])
    bp_id = create()

    response = reviewer_client.post(
        f"/api/breakpoints/{bp_id}/feedback", {"comment": "Checking"}, format="json"
    )

    assert response.status_code == 201
    assert targets(bp_id, "feedback") == [("jira", {"project": "OPS"})]


def test_feedback_without_a_jira_issue_goes_to_no_channel(channels_on, route, create, reviewer_client):  # fmt: skip
    route("deploys", "deploy.*", [SLACK, OPS_MAIL])
    bp_id = create()

    reviewer_client.post(f"/api/breakpoints/{bp_id}/feedback", {"comment": "Hm"}, format="json")

    assert targets(bp_id, "feedback") == []


def test_an_expert_shown_it_on_escalation_hears_the_outcome(
    channels_on, route, create, client_for, three_experts
):
    route("experts", "deploy.*", [SLACK_EXPERTS])
    bp_id = create(expert=["tech-lead"], escalateAfterSeconds=60, escalateTo="ops-lead")
    assert breakpoints_escalate_due(now=later(61)) == 1
    oscar = experts(("slack", three_experts["ops-lead"]))[0]
    assert oscar in targets(bp_id, "escalated")

    release(client_for(three_experts["tech-lead"]), bp_id)

    assert oscar in targets(bp_id, "released")


# --- route defaults: the timeout policy a payload leaves out -----------------------------


def test_route_defaults_fill_what_the_payload_leaves_out(route, create):
    route("b-second", "deploy.*", [SLACK], defaults={"onTimeout": "reject", "escalateAfterSeconds": 120, "escalateTo": "ops-lead"})  # fmt: skip
    route("a-first", "deploy.*", [SLACK], defaults={"onTimeout": "approve", "remindEverySeconds": 600})  # fmt: skip
    before = timezone.now()

    bp = Breakpoint.objects.get(pk=create())

    assert bp.on_timeout == "approve"  # a-first names onTimeout first (by name, not age)
    assert bp.remind_every_seconds == 600
    assert bp.escalate_to == "ops-lead"  # only b-second names it
    assert before + timedelta(seconds=119) < bp.escalate_at < later(121)
    assert before + timedelta(seconds=599) < bp.remind_at < later(601)


def test_the_payload_wins_over_route_defaults(route, create):
    route("a", "deploy.*", [SLACK], defaults={"onTimeout": "approve", "remindEverySeconds": 600, "escalateAfterSeconds": 60, "escalateTo": "ops-lead"})  # fmt: skip

    bp = Breakpoint.objects.get(
        pk=create(
            onTimeout="expire", remindEverySeconds=900, escalateAfterSeconds=30, escalateTo="sec"
        )  # fmt: skip
    )

    assert (bp.on_timeout, bp.remind_every_seconds, bp.escalate_to) == ("expire", 900, "sec")
    assert bp.escalate_at < later(31)


def test_defaults_of_routes_that_do_not_match_or_are_off_do_not_apply(route, create):
    route("prod", "*(tags contains 'prod')", [SLACK], defaults={"onTimeout": "approve"})
    route("off", "deploy.*", [SLACK], defaults={"remindEverySeconds": 600}, enabled=False)

    plain = Breakpoint.objects.get(pk=create(tags=["dev"]))
    prod = Breakpoint.objects.get(pk=create(tags=["prod"]))

    assert (plain.on_timeout, plain.remind_every_seconds) == ("expire", None)
    assert (prod.on_timeout, prod.remind_every_seconds) == ("approve", None)


def test_a_route_default_policy_runs_at_expiry(route, create):
    route("auto", "deploy.*", [SLACK], defaults={"onTimeout": "approve"})
    bp_id = create()
    Breakpoint.objects.filter(pk=bp_id).update(expires_at=later(-1))

    breakpoints_expire_due()

    bp = Breakpoint.objects.get(pk=bp_id)
    assert (bp.status, bp.result["approved"]) == ("released", True)


def test_a_null_default_is_refused_by_the_service_as_by_the_api_and_the_console(route, create):
    """One validator (policies.routes): a stored null would hide the next route's value."""
    route("b-second", "deploy.*", [SLACK], defaults={"onTimeout": "approve"})
    admin = Actor.for_user(AdminFactory(username="route-admin"))
    with pytest.raises(InvalidInput) as refused:
        route_add(
            actor=admin, name="a-first", pattern="*", channels=[SLACK], defaults={"onTimeout": None}
        )

    assert refused.value.details == {"defaults.onTimeout": [NO_NULL]}
    assert Breakpoint.objects.get(pk=create()).on_timeout == "approve"
