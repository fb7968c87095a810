"""Beat's TTL sweep and the list survive a row no digest covers (issue 47).

Real processes (web, a Celery worker, beat, Redis, PostgreSQL). An overdue breakpoint whose
onTimeout approves a proposal of 1e16, as 08031bb stored it (written with SQL: jsonb gives
it back as 10000000000000000, which no valuesDigest covers), made every sweep fail, so no
breakpoint expired through beat any more, and GET /api/breakpoints answered 500 for
everyone while it was on the first page. Now beat's sweep skips it (the worker logs a
warning naming it) and ends the others; the list answers all of them.
"""

import pytest

from breakpoints.models import Breakpoint
from tests.support.records import backdate_expiry, store_legacy_proposal

pytestmark = pytest.mark.django_db(transaction=True)

FORM = {"type": "object", "properties": {"x": {"type": "number"}}}


def create(agent_http, on_timeout: str, x: int) -> str:
    payload = {"question": "Scale?", "form": FORM, "proposal": {"x": x}, "onTimeout": on_timeout}
    response = agent_http.post("/api/breakpoints", json={"payload": payload, "ttlSeconds": 600})
    assert response.status_code == 201, response.text
    return response.json()["breakpointId"]


def test_beat_skips_a_legacy_row_and_ends_the_others(system, agent_http, reviewer_http):
    legacy = create(agent_http, "approve", 1)
    store_legacy_proposal(legacy)
    approve = create(agent_http, "approve", 2)
    expire = create(agent_http, "expire", 3)
    backdate_expiry(legacy, approve, expire)

    system.wait_until(
        lambda: (
            set(
                Breakpoint.objects.filter(pk__in=[approve, expire]).values_list("status", flat=True)
            )
            == {"released", "expired"}
        ),
        what="beat's sweep to end the two good breakpoints",
    )
    warning = f"Breakpoint {legacy} is overdue but its timeout policy cannot end it"
    worker = system.worker
    assert worker is not None
    system.wait_until(lambda: warning in worker.output(last=200_000), what="the warning")

    assert Breakpoint.objects.get(pk=legacy).status == "waiting"
    assert Breakpoint.objects.get(pk=approve).result["values"] == {"x": 2}
    listed = reviewer_http.get("/api/breakpoints")
    assert listed.status_code == 200, listed.text
    statuses = {row["breakpointId"]: row["status"] for row in listed.json()["results"]}
    assert statuses == {legacy: "waiting", approve: "released", expire: "expired"}
