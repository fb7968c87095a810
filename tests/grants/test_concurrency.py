"""Concurrent creates against a grant's last uses: one conditional UPDATE per use, so 20
creates at once against a grant of 5 uses approve exactly 5.

Real concurrency needs a database that runs transactions side by side: PostgreSQL (the
row's lock and the re-checked WHERE do the work). SQLite serialises writers."""

from collections import Counter

import pytest

from audit.models import GrantEvent
from grants.models import Grant
from tests.support.grants import create, granted
from tests.support.threads import run_indexed

CREATES = 20
CLIENTS = 10  # threads, each with its own connection: fewer than the test pool's (12)
USES = 5

pytestmark = pytest.mark.postgres  # SQLite serialises writers


def test_twenty_concurrent_creates_against_five_uses_approve_exactly_five(
    transactional_db, reviewer
):
    grant = granted(reviewer, create(), uses=USES)

    def creates(_: int) -> list[str]:
        return [create().status for _ in range(CREATES // CLIENTS)]

    statuses = [status for share in run_indexed(CLIENTS, creates) for status in share]

    assert Counter(statuses) == {"released": USES, "waiting": CREATES - USES}
    grant.refresh_from_db()
    assert (grant.uses_left, grant.status) == (0, "used")
    used = GrantEvent.objects.filter(grant_id=grant.pk, type="used")
    assert used.count() == USES
    assert GrantEvent.objects.filter(grant_id=grant.pk, type="expired").count() == 1
    assert not Grant.objects.filter(ended_at=None).exists()
