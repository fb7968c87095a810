"""One way to write a time (core.timestamps): UTC with `Z`, whatever TIME_ZONE says,
in the representation (GET detail, webhooks) and in the status answers alike."""

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest
from django.test import override_settings
from django.utils import timezone

from breakpoints.models import Breakpoint
from core.timestamps import timestamp
from notifications.models import Delivery
from notifications.services import webhook_add
from policies.models import AutoApprovalRule
from tests.support.api import parse_time

PARIS = ZoneInfo("Europe/Paris")


def test_an_aware_time_in_another_zone_is_written_in_utc():
    noon_in_paris = datetime(2024, 7, 1, 12, 30, 5, 123456, tzinfo=PARIS)  # summer: UTC+2

    assert timestamp(noon_in_paris) == "2024-07-01T10:30:05.123456Z"


@pytest.mark.parametrize(
    "moment",
    [
        datetime(2024, 7, 1, 10, 30, 5, tzinfo=UTC),  # whole seconds: no fraction written
        datetime(2024, 7, 1, 10, 30, 5, 7, tzinfo=UTC),
        datetime(1, 1, 1, tzinfo=UTC),
        datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    ],
)
def test_a_time_already_in_utc_is_written_as_the_same_instant_in_any_zone(moment):
    """Times read from the database are in UTC already (written without converting them)."""
    in_utc = timestamp(moment)

    assert in_utc.endswith("Z") and "+" not in in_utc
    assert in_utc == timestamp(moment.replace(tzinfo=ZoneInfo("UTC")))
    assert datetime.fromisoformat(in_utc) == moment


def test_a_naive_time_is_read_in_the_current_time_zone(settings):
    settings.TIME_ZONE = "Europe/Paris"

    assert timestamp(datetime(2024, 1, 15, 9, 0)) == "2024-01-15T08:00:00Z"  # winter: UTC+1


def test_none_stays_none_and_a_written_time_passes_as_is():
    assert timestamp(None) is None
    assert timestamp("2024-01-15T08:00:00Z") == "2024-01-15T08:00:00Z"


def test_detail_and_status_write_the_same_updated_at_in_utc(
    settings, make_breakpoint, agent_client
):
    settings.TIME_ZONE = "Europe/Paris"
    bp = make_breakpoint()

    detail = agent_client.get(f"/api/breakpoints/{bp.pk}")
    status = agent_client.get(f"/api/breakpoints/{bp.pk}/status")
    many = agent_client.get(f"/api/breakpoints/status?id={bp.pk}")

    assert detail.status_code == status.status_code == many.status_code == 200
    updated_at = detail.json()["updatedAt"]
    assert updated_at.endswith("Z")
    assert status.json()["updatedAt"] == updated_at
    assert many.json()["results"][0]["updatedAt"] == updated_at
    assert parse_time(updated_at) == Breakpoint.objects.get(pk=bp.pk).updated_at


@override_settings(TIME_ZONE="Europe/Paris", USE_TZ=True)
def test_every_contract_time_is_utc_whatever_the_time_zone(
    make_breakpoint, agent_client, reviewer_client, admin_client
):
    with override_settings(BPM_WEBHOOK_ALLOWED_HOSTS=["127.0.0.1"]):
        webhook_add(url="http://127.0.0.1:9/hook", event_types=["released"])
    bp = make_breakpoint()

    before = timezone.now()
    released = reviewer_client.post(
        f"/api/breakpoints/{bp.pk}/feedback", {"comment": "Fine", "release": True}, format="json"
    )
    after = timezone.now()
    rule = admin_client.post("/api/rules", {"pattern": "confirm.*"}, format="json")
    detail = agent_client.get(f"/api/breakpoints/{bp.pk}")

    assert released.status_code == 201 and rule.status_code == 201
    stored = Breakpoint.objects.get(pk=bp.pk)
    delivery = Delivery.objects.get(breakpoint=bp, event_type="released")
    written = {
        "releasedAt": (detail.json()["releasedAt"], stored.released_at),
        "rule createdAt": (
            rule.json()["createdAt"],
            AutoApprovalRule.objects.get(pk=rule.json()["id"]).created_at,
        ),
        "envelope timestamp": (delivery.body["timestamp"], delivery.next_attempt_at),
        "envelope releasedAt": (delivery.body["data"]["releasedAt"], stored.released_at),
    }
    for name, (text, instant) in written.items():
        assert text.endswith("Z"), name
        assert parse_time(text) == instant, name
    responded_at = released.json()["result"]["allResponses"][0]["respondedAt"]
    assert responded_at.endswith("Z")
    assert before <= parse_time(responded_at) <= after
    assert detail.json()["result"]["allResponses"][0]["respondedAt"] == responded_at
    assert delivery.body["data"]["result"]["allResponses"][0]["respondedAt"] == responded_at
