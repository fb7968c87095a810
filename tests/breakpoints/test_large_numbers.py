"""A form's answer (payload.proposal, a release's values) holds numbers a valuesDigest covers
as they were sent: within ±(2^53 - 1), doubles too (issue 47).

PostgreSQL's jsonb writes the double 1e16 back as 10000000000000000, an integer RFC 8785
refuses: approving such a proposal answered 500, and an overdue one with onTimeout approve
stopped the TTL sweep on every run and made its reads, the list and its agent's cancel
answer 500. Such a number is now a 400 naming its JSON path, at creation and on a release's
values; a row stored before that (legacy data, written here with SQL) is skipped by the
sweep (logged, counted), listed and read as stored, refused with a 400 when approved as
proposed, and cancelled by its agent.
"""

import json
import logging

import pytest

from breakpoints.models import Breakpoint, Feedback
from breakpoints.services import breakpoints_expire_due
from breakpoints.services.expiry import NOT_DIGESTIBLE_SKIPPED
from core.digests import NotDigestible, values_digest
from core.receipts import verify
from tests.support.api import assert_error
from tests.support.receipts import suite_jwks
from tests.support.records import backdate_expiry, store_legacy_proposal

URL = "/api/breakpoints"
EDGE = 2**53 - 1
NUMBER_FORM = {"type": "object", "properties": {"x": {"type": "number"}}}


def create_raw(client, proposal_text: str, **fields):
    """POST a create whose payload.proposal is this exact JSON text (its literals kept)."""
    payload = {"question": "Q?", "title": "Numbers", "form": NUMBER_FORM, **fields}
    text = json.dumps({"payload": payload})[:-2] + ', "proposal": ' + proposal_text + "}}"
    return client.post(URL, data=text.encode(), content_type="application/json")


def release_raw(client, bp_id: str, values_text: str):
    body = '{"release": true, "values": ' + values_text + "}"
    return client.post(
        f"{URL}/{bp_id}/feedback", data=body.encode(), content_type="application/json"
    )


def created(client, proposal_text: str = '{"x": 1}', **fields) -> str:
    response = create_raw(client, proposal_text, **fields)
    assert response.status_code == 201, response.content
    return response.json()["breakpointId"]


# --- refused at the door -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("proposal_text", "path"),
    [
        ('{"x": 1e16}', "payload.proposal.x"),  # the value: a double, 2^53 or more
        ('{"x": 9007199254740992.0}', "payload.proposal.x"),  # 2^53 as a double
        ('{"x": -1.5e300}', "payload.proposal.x"),
        ('{"x": 1, "y": {"z": [0.5, 1e21]}}', "payload.proposal.y.z[1]"),
        ('{"x": 9007199254740993}', "payload.proposal.x"),  # an integer, as before
    ],
)
def test_a_proposal_number_no_digest_covers_is_400_naming_its_path(
    agent_client, proposal_text, path
):
    error = assert_error(create_raw(agent_client, proposal_text), 400)

    assert path in error["details"], error
    assert "2^53" in error["details"][path][0]
    assert not Breakpoint.objects.exists()


@pytest.mark.parametrize("values_text", ['{"x": 1e16}', '{"x": -9007199254740992.0}'])
def test_release_values_no_digest_covers_are_400_naming_their_path(
    agent_client, reviewer_client, values_text
):
    bp_id = created(agent_client)

    error = assert_error(release_raw(reviewer_client, bp_id, values_text), 400)

    assert "values.x" in error["details"], error
    assert Breakpoint.objects.get(pk=bp_id).status == "waiting"
    assert not Feedback.objects.exists()


def test_the_edges_are_approved_and_the_receipt_covers_the_values_returned(
    agent_client, reviewer_client
):
    """The largest exact numbers, as integers and as doubles, round-trip through storage:
    the values returned are the ones the receipt's valuesDigest covers."""
    proposal = '{"x": 9007199254740991, "y": -9007199254740991.0, "z": 1.5e15, "w": 0.1}'
    bp_id = created(agent_client, proposal)

    released = reviewer_client.post(f"{URL}/{bp_id}/feedback", {"release": True}, format="json")

    assert released.status_code == 201, released.content
    polled = json.loads(agent_client.get(f"{URL}/{bp_id}/status").content)["result"]
    assert polled["values"] == {"x": EDGE, "y": -EDGE, "z": 1.5e15, "w": 0.1}
    claims = verify(polled["receipt"], suite_jwks())
    assert claims["valuesDigest"] == values_digest(polled["values"]) == polled["valuesDigest"]


def test_a_large_double_elsewhere_in_the_payload_is_still_accepted(agent_client):
    """Only a form's answer is held to the exact range: the rest of the payload keeps its
    doubles (given back as doubles, test_payload_numbers)."""
    response = create_raw(agent_client, '{"x": 1}', size=1e16)
    assert response.status_code == 201, response.content


# --- a row stored before the door refused it -------------------------------------------------


@pytest.fixture
def legacy(agent_client) -> str:
    """An overdue breakpoint whose timeout policy approves its proposal of 1e16."""
    bp_id = created(agent_client, ttlSeconds=60, onTimeout="approve")
    store_legacy_proposal(bp_id)
    backdate_expiry(bp_id, seconds=600)
    return bp_id


def skipped_count(where: str) -> float:
    return NOT_DIGESTIBLE_SKIPPED.labels(where=where)._value.get()


def test_the_sweep_skips_a_legacy_row_logs_and_counts_it_and_ends_the_others(
    agent_client, legacy, caplog, client
):
    approve = created(agent_client, '{"x": 2}', ttlSeconds=60, onTimeout="approve")
    expire = created(agent_client, '{"x": 3}', ttlSeconds=60)
    backdate_expiry(approve, expire)
    before = skipped_count("sweep")

    with caplog.at_level(logging.WARNING, logger="breakpoints.services.expiry"):
        ended = breakpoints_expire_due()

    assert ended == 2
    statuses = dict(Breakpoint.objects.values_list("pk", "status"))
    assert statuses == {legacy: "waiting", approve: "released", expire: "expired"}
    assert Breakpoint.objects.get(pk=approve).result["values"] == {"x": 2}
    assert skipped_count("sweep") == before + 1
    [warning] = [r for r in caplog.records if legacy in r.getMessage()]
    assert warning.levelno == logging.WARNING
    assert "values.x" in warning.getMessage()
    # The next sweep meets it again, and again only skips it.
    assert breakpoints_expire_due() == 0
    # /metrics counts it, whichever process answers the scrape.
    scraped = client.get("/metrics").content.decode().splitlines()
    assert "bpm_breakpoints_overdue 1.0" in scraped


def test_the_list_and_the_reads_answer_a_legacy_row_as_stored(
    agent_client, reviewer_client, legacy
):
    plain = created(agent_client, '{"x": 4}')
    before = skipped_count("read")

    listed = reviewer_client.get(URL)
    read = agent_client.get(f"{URL}/{legacy}")
    status = agent_client.get(f"{URL}/{legacy}/status")

    assert listed.status_code == read.status_code == status.status_code == 200
    rows = {row["breakpointId"]: row for row in listed.json()["results"]}
    assert set(rows) == {legacy, plain}
    for answer in (rows[legacy], read.json()):
        assert answer["status"] == "waiting"
        assert answer["payload"]["proposal"] == {"x": 1e16}  # the double, as digested
        assert answer["payloadDigest"] == Breakpoint.objects.get(pk=legacy).payload_digest
    assert status.json()["status"] == "waiting"
    assert skipped_count("read") >= before + 3


def test_approving_a_legacy_proposal_as_it_is_is_400_and_with_values_201(reviewer_client, legacy):
    as_proposed = reviewer_client.post(f"{URL}/{legacy}/feedback", {"release": True}, format="json")

    error = assert_error(as_proposed, 400)
    assert "values.x" in error["details"], error
    assert Breakpoint.objects.get(pk=legacy).status == "waiting"

    edited = release_raw(reviewer_client, legacy, '{"x": 5}')
    assert edited.status_code == 201, edited.content
    result = edited.json()["result"]
    assert (result["values"], result["edited"]) == ({"x": 5}, True)


def test_its_agent_cancels_a_legacy_row(agent_client, legacy):
    response = agent_client.post(f"{URL}/{legacy}/cancel", {}, format="json")

    assert response.status_code == 200, response.content
    assert Breakpoint.objects.get(pk=legacy).status == "cancelled"


def test_a_value_no_digest_covers_raises_not_digestible_naming_its_path():
    with pytest.raises(NotDigestible) as caught:
        values_digest({"a": [{"b": 10**16}]})
    assert set(caught.value.details) == {"values.a[0].b"}
