"""payload.onTimeout (expire, approve, reject, escalate): validation through the API, the
TTL sweep, the agent's status poll, the rules that forbid an approval, and overlapping
sweeps on real row locks (PostgreSQL)."""

from collections import Counter
from datetime import timedelta

import pytest
from django.utils import timezone

from audit.models import Event
from breakpoints.models import Breakpoint
from breakpoints.services import (
    breakpoint_create,
    breakpoint_expire_if_due,
    breakpoints_expire_due,
    feedback_add,
)
from core.actors import Actor
from core.exceptions import Forbidden, InvalidState
from core.limits import MAX_EXPERT_NAME_LENGTH, MAX_TTL_SECONDS
from core.timestamps import timestamp
from notifications import outbox
from notifications import services as webhooks
from notifications.models import Delivery, Webhook
from policies.autoapproval import always_break_on_add, rule_create
from tests.support.api import parse_time
from tests.support.receipts import unsealed
from tests.support.records import backdate_expiry, deliveries_of, events_of, history
from tests.support.threads import run_together

URL = "/api/breakpoints"
SYSTEM = Actor.system("test")
TTL = 60
TTL_RESULT = {
    "approved": False,
    "feedback": f"Expired: no decision within {TTL} seconds.",
    "respondedBy": "system:ttl",
}


def ask(on_timeout: str | None = None, **extra) -> dict:
    """A payload with this onTimeout policy (and any other keys)."""
    payload = {"question": "Ship it?", "title": "Ship", **extra}
    if on_timeout is not None:
        payload["onTimeout"] = on_timeout
    return payload


def subscribe(url: str, events: list[str]) -> Webhook:
    return webhooks.webhook_add(url=url, event_types=events)


def assert_policy_result(result: dict, *, approved: bool) -> None:
    """What the agent receives when onTimeout approve/reject released it."""
    policy = "approve" if approved else "reject"
    feedback = result["feedback"]
    assert "timeout policy" in feedback
    assert f"onTimeout: {policy}" in feedback
    assert f"{TTL} seconds" in feedback
    [response] = result["allResponses"]
    parse_time(response["respondedAt"])
    assert unsealed(result, via="system") == {
        "approved": approved,
        "response": feedback,
        "feedback": feedback,
        "respondedBy": "timeout-policy",
        "allResponses": [
            {
                "respondedBy": "timeout-policy",
                "approved": approved,
                "feedback": feedback,
                "respondedAt": response["respondedAt"],
            }
        ],
        "timeoutPolicy": {"requested": policy, "applied": policy},
    }


# --- validation through the API ----------------------------------------------------------


TOO_LONG_NAME = "x" * (MAX_EXPERT_NAME_LENGTH + 1)


@pytest.mark.parametrize(
    "policy, field",
    [
        ({"onTimeout": "approved"}, "payload.onTimeout"),
        ({"onTimeout": "APPROVE"}, "payload.onTimeout"),
        ({"onTimeout": ""}, "payload.onTimeout"),
        ({"onTimeout": ["approve"]}, "payload.onTimeout"),
        ({"onTimeout": True}, "payload.onTimeout"),
        ({"onTimeout": "escalate"}, "payload.escalateTo"),
        ({"escalateAfterSeconds": 120}, "payload.escalateTo"),
        ({"onTimeout": "escalate", "escalateTo": "   "}, "payload.escalateTo"),
        ({"onTimeout": "escalate", "escalateTo": 7}, "payload.escalateTo"),
        ({"onTimeout": "escalate", "escalateTo": ["ops-lead"]}, "payload.escalateTo"),
        ({"onTimeout": "escalate", "escalateTo": TOO_LONG_NAME}, "payload.escalateTo"),
        ({"escalateAfterSeconds": 120, "escalateTo": TOO_LONG_NAME}, "payload.escalateTo"),
        ({"escalateAfterSeconds": 0, "escalateTo": "ops-lead"}, "payload.escalateAfterSeconds"),
        ({"escalateAfterSeconds": -5, "escalateTo": "ops-lead"}, "payload.escalateAfterSeconds"),
        ({"escalateAfterSeconds": 1.5, "escalateTo": "ops-lead"}, "payload.escalateAfterSeconds"),
        ({"escalateAfterSeconds": "60", "escalateTo": "ops-lead"}, "payload.escalateAfterSeconds"),
        ({"escalateAfterSeconds": True, "escalateTo": "ops-lead"}, "payload.escalateAfterSeconds"),
        (
            {"escalateAfterSeconds": MAX_TTL_SECONDS + 1, "escalateTo": "ops-lead"},
            "payload.escalateAfterSeconds",
        ),
        ({"remindEverySeconds": 299}, "payload.remindEverySeconds"),
        ({"remindEverySeconds": 0}, "payload.remindEverySeconds"),
        ({"remindEverySeconds": 300.5}, "payload.remindEverySeconds"),
        ({"remindEverySeconds": 300.0}, "payload.remindEverySeconds"),
        ({"remindEverySeconds": "600"}, "payload.remindEverySeconds"),
        ({"remindEverySeconds": False}, "payload.remindEverySeconds"),
        ({"remindEverySeconds": MAX_TTL_SECONDS + 1}, "payload.remindEverySeconds"),
    ],
)
def test_a_bad_timeout_policy_is_400_naming_the_field_and_creates_nothing(
    agent_client, policy, field
):
    response = agent_client.post(URL, {"payload": ask(**policy), "ttlSeconds": TTL}, format="json")

    assert response.status_code == 400, response.content
    body = response.json()
    assert set(body) == {"error"}
    error = body["error"]
    assert set(error) == {"code", "message", "details"}
    assert error["code"] == "validation_error"
    assert list(error["details"]) == [field]
    assert error["details"][field] and all(isinstance(m, str) for m in error["details"][field])
    assert error["message"].startswith(f"{field}: ")
    assert Breakpoint.objects.count() == 0
    assert Event.objects.count() == 0


def test_every_bad_timeout_field_is_reported_at_once(agent_client):
    policy = {"onTimeout": "later", "remindEverySeconds": 10, "escalateAfterSeconds": "soon"}

    response = agent_client.post(URL, {"payload": ask(**policy)}, format="json")

    assert response.status_code == 400, response.content
    assert set(response.json()["error"]["details"]) == {
        "payload.onTimeout",
        "payload.remindEverySeconds",
        "payload.escalateAfterSeconds",
        "payload.escalateTo",
    }
    assert Breakpoint.objects.count() == 0


def test_a_valid_timeout_policy_is_stored_with_its_schedule(agent_client):
    longest_name = "o" * MAX_EXPERT_NAME_LENGTH
    policy = {
        "onTimeout": "escalate",
        "escalateTo": longest_name,
        "escalateAfterSeconds": 120,
        "remindEverySeconds": 300,  # the smallest allowed
    }
    before = timezone.now()

    response = agent_client.post(URL, {"payload": ask(**policy), "ttlSeconds": 600}, format="json")

    after = timezone.now()
    assert response.status_code == 201, response.content
    body = response.json()
    assert {name: body["payload"][name] for name in policy} == policy
    bp = Breakpoint.objects.get(pk=body["breakpointId"])
    assert bp.on_timeout == "escalate"
    assert before + timedelta(seconds=120) <= bp.escalate_at <= after + timedelta(seconds=120)
    # One clock for the whole schedule: expiresAt, escalation and the first reminder.
    assert bp.expires_at - bp.escalate_at == timedelta(seconds=600 - 120)
    assert bp.remind_at - bp.escalate_at == timedelta(seconds=300 - 120)
    assert (bp.escalated_at, bp.reminders_sent, bp.experts) == (None, 0, [])


@pytest.mark.parametrize("policy", [{}, {"onTimeout": None}, {"onTimeout": "expire"}])
def test_without_a_policy_a_breakpoint_expires_and_is_never_nudged(agent_client, policy):
    response = agent_client.post(URL, {"payload": ask(**policy), "ttlSeconds": TTL}, format="json")

    assert response.status_code == 201, response.content
    bp = Breakpoint.objects.get(pk=response.json()["breakpointId"])
    assert (bp.on_timeout, bp.escalate_at, bp.remind_at) == ("expire", None, None)
    backdate_expiry(bp.pk)
    assert breakpoints_expire_due() == 1
    stored = Breakpoint.objects.get(pk=bp.pk)
    assert (stored.status, unsealed(stored.result)) == ("expired", TTL_RESULT)


# --- approve and reject ----------------------------------------------------------------------


@pytest.mark.parametrize("policy, approved", [("approve", True), ("reject", False)])
def test_the_sweep_releases_by_the_policy_and_the_agent_reads_it(
    make_breakpoint, agent_client, policy, approved
):
    hook = subscribe("https://example.com/released", ["released"])
    subscribe("https://example.com/expired", ["expired"])
    bp = make_breakpoint(ttl_seconds=TTL, payload=ask(policy))
    backdate_expiry(bp.pk)

    assert breakpoints_expire_due() == 1

    stored = Breakpoint.objects.get(pk=bp.pk)
    assert stored.status == "released"
    assert stored.released_at is not None and stored.expired_at is None
    assert_policy_result(stored.result, approved=approved)
    polled = agent_client.get(f"{URL}/{bp.pk}/status").json()
    assert polled["status"] == "released"
    assert polled["result"] == stored.result
    assert history(bp.pk) == ["released"]
    [event] = events_of(bp.pk, "released")
    assert event.actor == "timeout-policy"
    assert event.metadata == {
        "statusFrom": "waiting",
        "statusTo": "released",
        "approved": approved,
        "timeoutPolicy": policy,
    }
    [delivery] = deliveries_of(bp.pk, "released")
    assert delivery.webhook_id == hook.pk
    assert delivery.body["type"] == "breakpoint.released"
    assert delivery.body["data"]["status"] == "released"
    assert delivery.body["data"]["result"] == stored.result
    assert deliveries_of(bp.pk, "expired") == []
    # Done once: a second sweep and further reads change nothing.
    assert breakpoints_expire_due() == 0
    agent_client.get(f"{URL}/{bp.pk}")
    assert history(bp.pk) == ["released"]


@pytest.mark.parametrize(
    "policy, approved, path",
    [
        ("approve", True, "/status"),
        ("reject", False, "/status"),
        ("approve", True, ""),
        ("reject", False, ""),
    ],
)
def test_the_agents_read_of_an_overdue_breakpoint_applies_the_policy_at_once(
    make_breakpoint, agent_client, policy, approved, path
):
    subscribe("https://example.com/released", ["released"])
    bp = make_breakpoint(ttl_seconds=TTL, payload=ask(policy))
    assert agent_client.get(f"{URL}/{bp.pk}{path}").json()["status"] == "waiting"
    backdate_expiry(bp.pk)

    body = agent_client.get(f"{URL}/{bp.pk}{path}").json()  # no sweep runs here

    assert body["status"] == "released"
    assert_policy_result(body["result"], approved=approved)
    assert Breakpoint.objects.get(pk=bp.pk).result == body["result"]
    assert [e.actor for e in events_of(bp.pk, "released")] == ["timeout-policy"]
    assert len(deliveries_of(bp.pk, "released")) == 1
    # Polling again, or the sweep arriving late, does not release it twice.
    assert agent_client.get(f"{URL}/{bp.pk}{path}").json()["result"] == body["result"]
    assert breakpoints_expire_due() == 0
    assert history(bp.pk) == ["released"]


def test_polling_many_applies_each_overdue_ones_policy(make_breakpoint, agent_client):
    approve = make_breakpoint(ttl_seconds=TTL, payload=ask("approve"))
    reject = make_breakpoint(ttl_seconds=TTL, payload=ask("reject"))
    plain = make_breakpoint(ttl_seconds=TTL, payload=ask())
    not_due = make_breakpoint(ttl_seconds=3600, payload=ask("approve"))
    backdate_expiry(approve.pk, reject.pk, plain.pk)

    ids = [approve.pk, reject.pk, plain.pk, not_due.pk]
    response = agent_client.get(f"{URL}/status", {"id": ids})

    assert response.status_code == 200, response.content
    results = {row["breakpointId"]: row for row in response.json()["results"]}
    assert [results[i]["status"] for i in ids] == ["released", "released", "expired", "waiting"]
    assert_policy_result(results[approve.pk]["result"], approved=True)
    assert_policy_result(results[reject.pk]["result"], approved=False)
    assert unsealed(results[plain.pk]["result"]) == TTL_RESULT
    assert results[not_due.pk]["result"] is None


def test_a_reviewers_release_after_expires_at_loses_to_the_policy(make_breakpoint, reviewer):
    bp = make_breakpoint(ttl_seconds=TTL, payload=ask("reject"))
    backdate_expiry(bp.pk)

    with pytest.raises(InvalidState):
        feedback_add(
            breakpoint_id=bp.pk, actor=Actor.for_user(reviewer), comment="ok", release=True
        )

    stored = Breakpoint.objects.get(pk=bp.pk)
    assert stored.status == "released"
    assert_policy_result(stored.result, approved=False)
    assert [e.actor for e in events_of(bp.pk, "released")] == ["timeout-policy"]


def test_one_sweep_times_out_each_breakpoint_by_its_own_policy(make_breakpoint):
    made = {
        policy: make_breakpoint(ttl_seconds=TTL, payload=ask(policy, escalateTo="ops-lead"))
        for policy in ("expire", "approve", "reject", "escalate")
    }
    not_due = make_breakpoint(ttl_seconds=3600, payload=ask("approve"))
    backdate_expiry(*(bp.pk for bp in made.values()))

    assert breakpoints_expire_due() == 3  # expired or released; the escalated one still waits

    stored = {policy: Breakpoint.objects.get(pk=bp.pk) for policy, bp in made.items()}
    assert {policy: bp.status for policy, bp in stored.items()} == {
        "expire": "expired",
        "approve": "released",
        "reject": "released",
        "escalate": "waiting",
    }
    assert unsealed(stored["expire"].result) == TTL_RESULT
    assert_policy_result(stored["approve"].result, approved=True)
    assert_policy_result(stored["reject"].result, approved=False)
    assert {policy: history(bp.pk) for policy, bp in made.items()} == {
        "expire": ["expired"],
        "approve": ["released"],
        "reject": ["released"],
        "escalate": ["escalated"],
    }
    assert Breakpoint.objects.get(pk=not_due.pk).status == "waiting"
    assert history(not_due.pk) == []


def test_the_sweep_works_through_more_policy_rows_than_one_batch(make_breakpoint):
    approve = [make_breakpoint(ttl_seconds=TTL, payload=ask("approve")) for _ in range(5)]
    plain = [make_breakpoint(ttl_seconds=TTL, payload=ask()) for _ in range(3)]
    backdate_expiry(*(bp.pk for bp in approve + plain))

    assert breakpoints_expire_due(batch_size=2) == 8

    assert set(
        Breakpoint.objects.filter(pk__in=[b.pk for b in approve]).values_list("status", flat=True)
    ) == {"released"}
    assert set(
        Breakpoint.objects.filter(pk__in=[b.pk for b in plain]).values_list("status", flat=True)
    ) == {"expired"}
    assert Event.objects.filter(type="released", actor="timeout-policy").count() == 5
    assert Event.objects.filter(type="expired").count() == 3


# --- approve refused by the rules that forbid auto-approval ------------------------------


def assert_refused(bp_id: str, reason: str) -> dict:
    stored = Breakpoint.objects.get(pk=bp_id)
    assert stored.status == "expired"
    assert stored.released_at is None and stored.expired_at is not None
    result = stored.result
    assert result["approved"] is False
    assert result["respondedBy"] == "system:ttl"
    assert result["timeoutPolicy"] == {
        "requested": "approve",
        "applied": "expire",
        "reason": reason,
    }
    assert result["feedback"].startswith(TTL_RESULT["feedback"])
    assert "onTimeout: approve was not applied" in result["feedback"]
    assert reason in result["feedback"]
    assert history(bp_id) == ["expired"]
    [event] = events_of(bp_id, "expired")
    assert event.actor == "system:ttl"
    assert event.metadata["timeoutPolicy"] == result["timeoutPolicy"]
    assert event.metadata["reason"] == result["feedback"]
    assert events_of(bp_id, "released") == []
    return result


def test_an_always_break_on_tag_turns_approve_into_expire(make_breakpoint, agent_client):
    always_break_on_add(actor=SYSTEM, tag="prod")
    subscribe("https://example.com/all", ["released", "expired"])
    bp = make_breakpoint(ttl_seconds=TTL, payload=ask("approve", tags=["db", "prod"]))
    backdate_expiry(bp.pk)

    assert breakpoints_expire_due() == 1

    result = assert_refused(bp.pk, "Tag 'prod' is in alwaysBreakOn")
    polled = agent_client.get(f"{URL}/{bp.pk}/status").json()
    assert (polled["status"], polled["result"]) == ("expired", result)
    [delivery] = deliveries_of(bp.pk, "expired")
    assert delivery.body["data"]["result"] == result
    assert deliveries_of(bp.pk, "released") == []


def test_a_never_auto_approve_rule_made_after_creation_turns_approve_into_expire_on_poll(
    make_breakpoint, agent_client
):
    blocked = make_breakpoint(ttl_seconds=TTL, payload=ask("approve", breakpointId="deploy.prod"))
    other = make_breakpoint(ttl_seconds=TTL, payload=ask("approve", breakpointId="lint.fix"))
    rule = rule_create(actor=SYSTEM, pattern="deploy.*", action="never-auto-approve")
    backdate_expiry(blocked.pk, other.pk)

    polled = agent_client.get(f"{URL}/{blocked.pk}/status").json()

    reason = f"Matched never-auto-approve rule: {rule.pk}"
    assert polled["status"] == "expired"
    assert polled["result"] == assert_refused(blocked.pk, reason)
    # The rule does not match the other key: that one is approved.
    polled = agent_client.get(f"{URL}/{other.pk}/status").json()
    assert polled["status"] == "released"
    assert_policy_result(polled["result"], approved=True)


def test_the_rules_do_not_stop_a_rejection_by_the_policy(make_breakpoint):
    always_break_on_add(actor=SYSTEM, tag="prod")
    rule_create(actor=SYSTEM, pattern="deploy.*", action="never-auto-approve")
    bp = make_breakpoint(
        ttl_seconds=TTL, payload=ask("reject", tags=["prod"], breakpointId="deploy.prod")
    )
    backdate_expiry(bp.pk)

    assert breakpoints_expire_due() == 1

    stored = Breakpoint.objects.get(pk=bp.pk)
    assert stored.status == "released"
    assert_policy_result(stored.result, approved=False)


# --- approvals by the policy are not manual approvals (autoApproveAfterN) -----------------


def test_approvals_by_the_timeout_policy_do_not_count_towards_auto_approve_after_n(
    make_breakpoint,
):
    # BUG: autoapproval.consecutive_approvals counts every released breakpoint of the key
    # that no rule auto-approved, so unanswered breakpoints approved by onTimeout count as
    # "manual" approvals: N of them make the next breakpoint auto-approve at birth without
    # any human ever having approved one.
    payload = ask("approve", breakpointId="deploy.staging", autoApproveAfterN=2)
    timed_out = [make_breakpoint(ttl_seconds=TTL, payload=payload) for _ in range(2)]
    backdate_expiry(*(bp.pk for bp in timed_out))
    assert breakpoints_expire_due() == 2

    following = make_breakpoint(ttl_seconds=TTL, payload=payload)

    assert following.auto_approval["consecutiveApprovals"] == 0
    assert following.auto_approval["recommended"] is False
    assert following.status == "waiting"


def test_a_rejection_by_the_timeout_policy_does_not_reset_the_manual_approval_streak(
    make_breakpoint, reviewer
):
    # BUG (as above): a rejection by the policy is not a manual decision, so it should
    # neither count nor reset the streak, as expiries and cancellations do not.
    key = "deploy.staging"
    for _ in range(2):
        bp = make_breakpoint(payload=ask(breakpointId=key))
        feedback_add(
            breakpoint_id=bp.pk, actor=Actor.for_user(reviewer), comment="ok", release=True
        )
    timed_out = make_breakpoint(ttl_seconds=TTL, payload=ask("reject", breakpointId=key))
    backdate_expiry(timed_out.pk)
    assert breakpoints_expire_due() == 1

    following = make_breakpoint(payload=ask(breakpointId=key, autoApproveAfterN=2))

    assert following.auto_approval["consecutiveApprovals"] == 2
    assert following.status == "released"


# --- escalate at expiresAt ---------------------------------------------------------------


def test_on_timeout_escalate_routes_to_escalate_to_waits_one_more_ttl_then_expires(
    make_breakpoint, expert_member, agent_client
):
    expert_member("tina", "tech-lead")
    expert_member("oscar", "ops-lead")
    hook = subscribe("https://example.com/escalated", ["escalated"])
    bp = make_breakpoint(
        ttl_seconds=TTL, payload=ask("escalate", expert="tech-lead", escalateTo="ops-lead")
    )
    backdate_expiry(bp.pk)
    before = timezone.now()

    assert breakpoints_expire_due() == 0  # nothing ended

    after = timezone.now()
    stored = Breakpoint.objects.get(pk=bp.pk)
    assert (stored.status, stored.result, stored.expired_at) == ("waiting", None, None)
    assert stored.experts == ["tech-lead", "ops-lead"]
    assert before + timedelta(seconds=TTL) <= stored.expires_at <= after + timedelta(seconds=TTL)
    assert before <= stored.escalated_at <= after
    assert history(bp.pk) == ["escalated"]
    [event] = events_of(bp.pk, "escalated")
    assert event.actor == "system:escalation"
    assert event.metadata == {
        "escalateTo": "ops-lead",
        "experts": ["tech-lead", "ops-lead"],
        "expiresAt": timestamp(stored.expires_at),
    }
    [delivery] = deliveries_of(bp.pk, "escalated")
    assert delivery.webhook_id == hook.pk
    assert delivery.body["type"] == "breakpoint.escalated"
    data = delivery.body["data"]
    assert data["status"] == "waiting"
    assert parse_time(data["expiresAt"]) == stored.expires_at
    assert data["experts"] == [
        {"name": "tech-lead", "resolved": True, "kind": "group"},
        {"name": "ops-lead", "resolved": True, "kind": "group"},
    ]
    polled = agent_client.get(f"{URL}/{bp.pk}").json()
    assert polled["status"] == "waiting"
    assert parse_time(polled["expiresAt"]) == stored.expires_at
    assert [seat["name"] for seat in polled["experts"]] == ["tech-lead", "ops-lead"]

    # Once: when the extra TTL runs out too, it expires.
    backdate_expiry(bp.pk)
    assert breakpoints_expire_due() == 1
    stored = Breakpoint.objects.get(pk=bp.pk)
    assert (stored.status, unsealed(stored.result)) == ("expired", TTL_RESULT)
    assert stored.experts == ["tech-lead", "ops-lead"]
    assert history(bp.pk) == ["escalated", "expired"]
    assert len(deliveries_of(bp.pk, "escalated")) == 1


def test_on_timeout_escalate_by_the_agents_poll_then_expiry_by_the_next_poll(
    make_breakpoint, agent_client
):
    bp = make_breakpoint(ttl_seconds=TTL, payload=ask("escalate", escalateTo="ops-lead"))
    backdate_expiry(bp.pk)

    first = agent_client.get(f"{URL}/{bp.pk}/status").json()

    assert (first["status"], first["result"]) == ("waiting", None)
    stored = Breakpoint.objects.get(pk=bp.pk)
    assert stored.experts == ["ops-lead"]
    assert stored.expires_at > timezone.now() + timedelta(seconds=TTL - 5)
    assert agent_client.get(f"{URL}/{bp.pk}/status").json()["status"] == "waiting"
    assert history(bp.pk) == ["escalated"]

    backdate_expiry(bp.pk)
    second = agent_client.get(f"{URL}/{bp.pk}/status").json()
    assert (second["status"], unsealed(second["result"])) == ("expired", TTL_RESULT)
    assert history(bp.pk) == ["escalated", "expired"]


def test_after_escalation_the_new_expert_may_release_and_the_first_still_may(
    make_breakpoint, expert_member
):
    tina = expert_member("tina", "tech-lead")
    oscar = expert_member("oscar", "ops-lead")
    payload = ask("escalate", expert="tech-lead", escalateTo="ops-lead")
    by_oscar, by_tina = [make_breakpoint(ttl_seconds=TTL, payload=payload) for _ in range(2)]
    with pytest.raises(Forbidden):  # not routed to ops-lead yet
        feedback_add(
            breakpoint_id=by_oscar.pk, actor=Actor.for_user(oscar), comment="", release=True
        )
    backdate_expiry(by_oscar.pk, by_tina.pk)
    assert breakpoints_expire_due() == 0

    feedback_add(breakpoint_id=by_oscar.pk, actor=Actor.for_user(oscar), comment="", release=True)
    feedback_add(breakpoint_id=by_tina.pk, actor=Actor.for_user(tina), comment="", release=True)

    for bp, who in ((by_oscar, "oscar"), (by_tina, "tina")):
        stored = Breakpoint.objects.get(pk=bp.pk)
        assert stored.status == "released"
        assert (stored.result["respondedBy"], stored.result["approved"]) == (who, True)
        refused = ["refused"] if who == "oscar" else []  # his first try, on the record
        assert history(bp.pk) == [*refused, "escalated", "feedback", "released"]


# --- overlapping sweeps and polls (real row locks: PostgreSQL) ----------------------------


@pytest.mark.postgres  # row locks: SELECT ... FOR UPDATE SKIP LOCKED
@pytest.mark.django_db(transaction=True)
def test_overlapping_sweeps_and_polls_apply_each_timeout_policy_once(monkeypatch):
    monkeypatch.setattr(outbox, "publish_deliveries", lambda ids: len(ids))  # no broker here
    subscribe("https://example.com/all", ["released", "expired", "escalated"])
    always_break_on_add(actor=SYSTEM, tag="prod")
    agent = Actor.for_agent("agent-a")
    policies = {
        "expire": ask(),
        "approve": ask("approve"),
        "reject": ask("reject"),
        "escalate": ask("escalate", escalateTo="ops-lead"),
        "refused": ask("approve", tags=["prod"]),
    }
    ids = {
        name: [
            breakpoint_create(actor=agent, payload=payload, ttl_seconds=TTL)[0].pk
            for _ in range(16)
        ]
        for name, payload in policies.items()
    }
    every_id = [bp_id for group in ids.values() for bp_id in group]
    backdate_expiry(*every_id)

    def poll_all() -> int:
        # An agent polling meanwhile applies the policy on read, racing the sweeps.
        for bp_id in reversed(every_id):
            breakpoint_expire_if_due(bp_id)
        return 0

    results = run_together(
        {
            "sweep-1": lambda: breakpoints_expire_due(batch_size=3),
            "sweep-2": lambda: breakpoints_expire_due(batch_size=3),
            "sweep-3": lambda: breakpoints_expire_due(batch_size=5),
            "poller": poll_all,
        }
    )

    ended = len(every_id) - len(ids["escalate"])
    assert results["sweep-1"] + results["sweep-2"] + results["sweep-3"] <= ended
    expected = {
        "expire": ("expired", ["expired"]),
        "approve": ("released", ["released"]),
        "reject": ("released", ["released"]),
        "escalate": ("waiting", ["escalated"]),
        "refused": ("expired", ["expired"]),
    }
    statuses = dict(Breakpoint.objects.values_list("pk", "status"))
    deliveries = Counter(Delivery.objects.values_list("breakpoint_id", "event_type"))
    for name, (status, events) in expected.items():
        for bp_id in ids[name]:
            assert (name, statuses[bp_id], history(bp_id)) == (name, status, events)
            assert deliveries[(bp_id, events[0])] == 1, (name, bp_id)
    assert sum(deliveries.values()) == len(every_id)
    for bp_id in ids["approve"]:
        assert Breakpoint.objects.get(pk=bp_id).result["approved"] is True
    for bp_id in ids["refused"]:
        assert Breakpoint.objects.get(pk=bp_id).result["timeoutPolicy"]["applied"] == "expire"


@pytest.mark.postgres  # row locks: SELECT ... FOR UPDATE SKIP LOCKED
@pytest.mark.django_db(transaction=True)
def test_overlapping_sweeps_escalate_on_timeout_once_then_expire_once():
    agent = Actor.for_agent("agent-a")
    payload = ask("escalate", escalateTo="ops-lead")
    ids = [
        breakpoint_create(actor=agent, payload=payload, ttl_seconds=TTL)[0].pk for _ in range(60)
    ]
    sweeps = {f"sweep-{i}": lambda: breakpoints_expire_due(batch_size=4) for i in range(4)}

    backdate_expiry(*ids)
    results = run_together(sweeps)

    assert sum(results.values()) == 0
    escalated = Counter(
        Event.objects.filter(type="escalated").values_list("breakpoint_id", flat=True)
    )
    assert escalated == dict.fromkeys(ids, 1)
    assert set(Breakpoint.objects.values_list("status", flat=True)) == {"waiting"}

    backdate_expiry(*ids)
    results = run_together(sweeps)

    assert sum(results.values()) == len(ids)
    assert set(Breakpoint.objects.values_list("status", flat=True)) == {"expired"}
    for bp_id in ids:
        assert history(bp_id) == ["escalated", "expired"]
