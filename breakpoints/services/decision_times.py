"""The decision-time aggregate behind expectedDecision, computed again from history."""

from datetime import datetime, timedelta

from django.db import connection, transaction
from django.utils import timezone

from breakpoints import selectors
from breakpoints.models import DecisionTimeStat
from breakpoints.representation.expected_decision import (
    MIN_SAMPLES,
    WINDOW_DAYS,
    aggregate,
    stats_of,
)


def decision_times_refresh(*, now: datetime | None = None) -> int:
    """Replace DecisionTimeStat with the p50/p90 of the last WINDOW_DAYS of human
    decisions (selectors.decision_time_groups); returns how many groups it holds.

    One transaction, so readers see the old aggregate or the new one, never a mix; on
    PostgreSQL two refreshes at once take turns (a lock that reads do not wait for).
    This process's copy is updated at once; the others read it within CACHE_SECONDS.
    """
    now = now or timezone.now()
    groups = selectors.decision_time_groups(
        since=now - timedelta(days=WINDOW_DAYS), min_samples=MIN_SAMPLES
    )
    with transaction.atomic():
        if connection.vendor == "postgresql":
            table = connection.ops.quote_name(DecisionTimeStat._meta.db_table)
            with connection.cursor() as cursor:
                cursor.execute(f"LOCK TABLE {table} IN SHARE ROW EXCLUSIVE MODE")
        DecisionTimeStat.objects.all().delete()
        DecisionTimeStat.objects.bulk_create(
            DecisionTimeStat(**group, refreshed_at=now) for group in groups
        )
    aggregate.remember(
        stats_of(
            (g["basis"], g["value"], g["p50_seconds"], g["p90_seconds"], g["samples"])
            for g in groups
        )
    )
    return len(groups)
