"""What a grant leaves on the record: its events (created, used, revoked, expired once),
the breakpoint's auto_approved event, and a receipt that names the grant and its granter;
the beat sweep; a rule's replay counts what grants approved."""

from datetime import timedelta

from bpm_client.models import BreakpointResult
from bpm_client.receipts import check_result
from django.conf import settings
from django.utils import timezone

from audit.models import Event, GrantEvent
from core import receipts, tasknames
from core.actors import Actor
from grants.models import Grant
from grants.services import grant_revoke, grants_expire_due
from grants.tasks import expire_due_grants
from policies.replay import rule_simulate
from tests.support.grants import create, granted, payload
from tests.support.receipts import suite_jwks


def grant_events(grant: Grant) -> list[tuple[str, str, str]]:
    rows = GrantEvent.objects.filter(grant_id=grant.pk).order_by("id")
    return list(rows.values_list("type", "actor", "breakpoint_id"))


def test_a_granted_approval_is_sealed_with_the_grant_and_its_granter(reviewer):
    grant = granted(reviewer, create(run_id="r-1"), uses=2)

    bp = create(run_id="r-1")

    claims = receipts.verify(bp.result["receipt"], suite_jwks())
    assert claims["via"] == "grant"
    assert (claims["grantId"], claims["grantedBy"]) == (grant.pk, "alice")
    assert (claims["respondedBy"], claims["approved"], claims["runId"]) == (
        f"grant:{grant.pk}",
        True,
        "r-1",
    )
    # The agent's SDK verifies it as any receipt.
    result = BreakpointResult.from_json({**bp.result, "status": bp.status})
    assert check_result(result, suite_jwks(), breakpoint_id=bp.pk)["grantId"] == grant.pk


def test_the_breakpoint_and_the_grant_both_record_the_use(reviewer):
    first = create()
    grant = granted(reviewer, first, uses=1)

    bp = create()

    (auto,) = Event.objects.filter(breakpoint_id=bp.pk, type="auto_approved")
    assert auto.actor == f"grant:{grant.pk}"
    assert (auto.metadata["grantId"], auto.metadata["grantedBy"]) == (grant.pk, "alice")
    (released,) = Event.objects.filter(breakpoint_id=bp.pk, type="released")
    assert released.metadata["grantId"] == grant.pk
    assert grant_events(grant) == [
        ("created", "alice", first.pk),
        ("used", "alice", bp.pk),
        ("expired", "system:grants", ""),  # its last use spent
    ]


def test_revoking_is_recorded(reviewer):
    grant = granted(reviewer, create(), uses=3)

    grant_revoke(actor=Actor.for_user(reviewer), grant_id=grant.pk)

    assert [event[:2] for event in grant_events(grant)] == [
        ("created", "alice"),
        ("revoked", "alice"),
    ]


def test_the_sweep_records_each_expired_grant_once(reviewer):
    expiring = granted(reviewer, create(), expiresInSeconds=60)
    lasting = granted(reviewer, create(payload=payload("deploy.db")), expiresInSeconds=3600)
    uses_only = granted(reviewer, create(payload=payload("deploy.web")), uses=3)
    past = timezone.now() - timedelta(seconds=1)
    Grant.objects.filter(pk=expiring.pk).update(expires_at=past)

    assert expire_due_grants() == 1
    assert grants_expire_due() == 0

    assert [event[0] for event in grant_events(expiring)] == ["created", "expired"]
    assert [event[0] for event in grant_events(lasting)] == ["created"]
    assert [event[0] for event in grant_events(uses_only)] == ["created"]
    expiring.refresh_from_db()
    assert (expiring.status, expiring.ended_reason) == ("expired", "expired")


def test_the_sweep_is_in_the_beat_schedule():
    tasks = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert tasknames.EXPIRE_GRANTS in tasks


def test_a_replay_counts_what_grants_approved(reviewer):
    granted(reviewer, create(), uses=5)
    create(), create()  # approved by the grant
    create(agent_id="agent-b")  # not covered: waits (not finished, not in the window)
    granted(reviewer, create(payload=payload("plan.review")), uses=1)
    create(payload=payload("plan.review"))

    system = Actor.system("test")
    deploys = rule_simulate(actor=system, pattern="deploy.*").as_dict()
    everything = rule_simulate(actor=system, pattern="*").as_dict()
    after_n = rule_simulate(
        actor=system, action="autoApproveAfterN", key="deploy.api", n=2
    ).as_dict()

    assert deploys["grantApproved"] == 2
    assert everything["grantApproved"] == 3
    assert after_n["grantApproved"] == 2
    assert deploys["humanApproved"] == 1  # the grant's own approval, by alice
