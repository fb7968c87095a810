"""One way to write a time (core.timestamps): UTC with `Z`, whatever TIME_ZONE says,
in the representation (GET detail, webhooks) and in the status answers alike."""

from datetime import datetime
from zoneinfo import ZoneInfo

from breakpoints.models import Breakpoint
from core.timestamps import timestamp
from tests.support.api import parse_time

PARIS = ZoneInfo("Europe/Paris")


def test_an_aware_time_in_another_zone_is_written_in_utc():
    noon_in_paris = datetime(2024, 7, 1, 12, 30, 5, 123456, tzinfo=PARIS)  # summer: UTC+2

    assert timestamp(noon_in_paris) == "2024-07-01T10:30:05.123456Z"


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
