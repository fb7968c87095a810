"""A grant approves the same agent's next breakpoints of its key (and run) at creation, within
its uses, its expiry and its values, while its granter may still approve them; nothing
else does it approve."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from breakpoints.models import Breakpoint
from core.actors import Actor
from grants.models import Grant
from grants.services import grant_revoke
from policies import configuration
from policies.autoapproval import always_break_on_add, rule_create
from tests.support.grants import KEY, create, granted, payload, proposing

SYSTEM = Actor.system("test")


def released_by(bp: Breakpoint) -> str | None:
    bp.refresh_from_db()
    return bp.result["respondedBy"] if bp.status == "released" else None


def test_a_key_grant_approves_the_next_breakpoints_of_its_agent_and_key_up_to_its_uses(
    reviewer,
):
    grant = granted(reviewer, create(run_id="r-1"), uses=2)

    first, second = create(run_id="r-2"), create(run_id=None)
    third = create(run_id="r-1")

    assert released_by(first) == released_by(second) == f"grant:{grant.pk}"
    assert released_by(third) is None
    assert first.auto_approval == {
        "recommended": True,
        "reason": f"Granted by alice (grant {grant.pk})",
        "matchedRule": None,
        "consecutiveApprovals": first.auto_approval["consecutiveApprovals"],
        "grantId": grant.pk,
        "grantedBy": "alice",
    }
    grant.refresh_from_db()
    assert (grant.uses_left, grant.status, grant.ended_reason) == (0, "used", "used")


def test_a_run_grant_covers_its_run_only(reviewer):
    grant = granted(reviewer, create(run_id="r-1"), scope="run", uses=5)

    same_run, other_run, no_run = create(run_id="r-1"), create(run_id="r-2"), create()

    assert released_by(same_run) == f"grant:{grant.pk}"
    assert released_by(other_run) is None and released_by(no_run) is None
    grant.refresh_from_db()
    assert grant.uses_left == 4


def test_neither_another_agent_nor_another_key_is_covered(reviewer):
    granted(reviewer, create(), uses=5)

    other_agent = create(agent_id="agent-b")
    other_key = create(payload=payload("deploy.db"))

    assert released_by(other_agent) is None and released_by(other_key) is None


def test_a_grant_past_its_expiry_approves_nothing(reviewer):
    grant = granted(reviewer, create(), expiresInSeconds=3600)
    assert released_by(create()) == f"grant:{grant.pk}"

    Grant.objects.filter(pk=grant.pk).update(expires_at=timezone.now() - timedelta(seconds=1))

    assert released_by(create()) is None
    grant.refresh_from_db()
    assert grant.status == "expired" and grant.uses_left is None


def test_a_revoked_grant_approves_nothing(reviewer):
    grant = granted(reviewer, create(), uses=5)

    grant_revoke(actor=Actor.for_user(reviewer), grant_id=grant.pk)

    assert released_by(create()) is None


@pytest.mark.parametrize(
    ("proposal", "approved"),
    [
        ({"path": "/srv/app/main.py", "env": "staging"}, True),
        ({"path": "/etc/passwd", "env": "staging"}, False),
        ({"path": "/srv/app/../../etc/passwd", "env": "staging"}, False),
        ({"path": "/srv/app/x", "env": "production"}, False),
        ({"path": "/srv/app/x"}, False),  # a field missing is outside
        ({"path": 7, "env": "staging"}, False),
    ],
)
def test_values_constraints_bind_the_grant_to_the_proposal(reviewer, proposal, approved):
    values = {"path": {"prefix": "/srv/app/"}, "env": {"equals": "staging"}}
    first = create(payload=proposing(path="/srv/app/a.py", env="staging"))
    granted(reviewer, first, uses=5, values=values)

    later = create(payload=proposing(**proposal))

    assert (released_by(later) is not None) is approved
    if approved:
        assert later.result["values"] == proposal


def test_equals_is_json_equality(reviewer):
    granted(
        reviewer, create(payload=proposing(replicas=2)), uses=5, values={"replicas": {"equals": 2}}
    )

    assert released_by(create(payload=proposing(replicas=2.0))) is not None
    assert released_by(create(payload=proposing(replicas="2"))) is None
    assert released_by(create(payload=proposing(replicas=True))) is None


def test_a_rule_that_approves_wins_and_spends_no_use(reviewer):
    grant = granted(reviewer, create(), uses=3)
    rule = rule_create(actor=SYSTEM, pattern=KEY)

    bp = create()

    assert released_by(bp) == f"rule:{rule.pk}"
    grant.refresh_from_db()
    assert grant.uses_left == 3


def test_what_forbids_an_automatic_approval_forbids_a_grant(reviewer, settings):
    granted(reviewer, create(), uses=10)
    rule_create(
        actor=SYSTEM, pattern="deploy.api(tags contains 'hold')", action="never-auto-approve"
    )
    always_break_on_add(actor=SYSTEM, tag="prod")
    needing = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}

    held = [
        create(tags=["hold"]),
        create(tags=["prod"]),
        create(payload=payload(form=needing)),  # a form only a person can answer
        create(payload=payload(preventSelfReview=True), requested_by="alice"),
        create(payload=payload(strategy="quorum", expert=["a", "b", "c"])),
    ]
    settings.BPM_PREVENT_SELF_REVIEW = True
    held.append(create(requested_by="alice"))

    assert [released_by(bp) for bp in held] == [None] * len(held)
    assert Grant.objects.get().uses_left == 10


def test_a_granter_who_lost_the_reviewer_role_grants_nothing_more(reviewer):
    granted(reviewer, create(), uses=5)

    reviewer.groups.remove(Group.objects.get(name="reviewers"))

    assert released_by(create()) is None


def test_a_granter_made_inactive_grants_nothing_more(reviewer):
    granted(reviewer, create(), uses=5)

    reviewer.is_active = False
    reviewer.save()

    assert released_by(create()) is None


def test_a_routed_key_needs_the_granter_in_one_of_its_seats(expert_member):
    dba = expert_member("dana", "dba")
    routed = payload(expert="dba")
    grant = granted(dba, create(payload=routed), uses=5)
    assert released_by(create(payload=routed)) == f"grant:{grant.pk}"

    dba.groups.remove(Group.objects.get(name="dba"))

    assert released_by(create(payload=routed)) is None


def test_a_create_without_a_live_grant_for_its_pair_costs_no_query_more(reviewer):
    """The hot path: the process's copy of the live pairs answers, read with the rest of the
    configuration in the create's one statement for it; no query of grants of its own."""
    create()  # every copy read
    with CaptureQueriesContext(connection) as before:
        create()
    granted(reviewer, create(payload=payload("other.key")), uses=5)
    create()  # the copies read again once after the change

    with CaptureQueriesContext(connection) as captured:
        create()

    assert len(captured.captured_queries) == len(before.captured_queries)
    own = [
        query["sql"]
        for query in captured.captured_queries
        if "grants_grant" in query["sql"] and configuration.TABLE not in query["sql"]
    ]
    assert own == []


def test_a_grant_created_or_ended_is_seen_by_the_next_create(reviewer):
    """Creating and ending a grant move the configuration's generation: no stale copy."""
    assert released_by(create()) is None
    grant = granted(reviewer, create(), uses=1)
    assert released_by(create()) == f"grant:{grant.pk}"  # its last use: it ended
    assert released_by(create()) is None
    assert not Grant.objects.filter(ended_at=None).exists()


def test_a_use_leaves_the_configuration_alone_and_an_end_moves_it(reviewer):
    """Every process's copies are read again after a grant is created or ends, never after
    a mere use (a table written at each granted create must not make every create read
    its configuration again)."""
    before = configuration.generation()
    grant = granted(reviewer, create(), uses=2)
    created = configuration.generation()

    create()  # one use, one left
    used = configuration.generation()
    create()  # the last use: it ends
    ended = configuration.generation()

    assert before != created
    assert used == created
    assert ended != used
    grant.refresh_from_db()
    assert grant.ended_reason == "used"
