"""The benchmarks' seed rows fit the models: a column added later must not break `make bench`.

The rows go in the way seed.py writes them (COPY on PostgreSQL, bulk_create elsewhere),
so a NOT NULL column the rows leave out fails here, in `make test`, and not only in the
benchmark smoke.
"""

import random
import sys
from pathlib import Path

import pytest
from django.utils import timezone

from audit.models import Event
from breakpoints.models import Breakpoint, Feedback

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.fixture
def bench(monkeypatch):
    """benchmarks/_bulk.py and _rows.py (they import each other by bare name)."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import _bulk
    import _rows

    yield _bulk, _rows
    for name in ("_bulk", "_rows", "_common"):
        sys.modules.pop(name, None)


@pytest.mark.django_db
def test_seed_rows_write_with_the_columns_they_leave_out_defaulted(bench):
    bulk, rows = bench
    rng, now, runs = random.Random(3), timezone.now(), rows.Runs()
    made = [rows.breakpoint_rows(rng, now, now, runs, status="released") for _ in range(5)]
    bulk.rows_write(Breakpoint, [bp for bp, _, _ in made])
    bulk.rows_write(Feedback, [f for _, feedback, _ in made for f in feedback])
    bulk.rows_write(Event, [e for _, _, events in made for e in events])

    assert Breakpoint.objects.count() == 5
    assert set(Breakpoint.objects.values_list("on_timeout", "escalate_to", "reminders_sent")) == {
        ("expire", "", 0)
    }
    assert Feedback.objects.filter(via="").count() == Feedback.objects.count() > 0
    assert Event.objects.count() >= 10


def test_a_column_without_default_or_null_stops_the_seed_with_its_name(bench):
    bulk, rows = bench
    bp, _, _ = rows.breakpoint_rows(
        random.Random(1), timezone.now(), timezone.now(), rows.Runs(), status="waiting"
    )
    del bp["created_at"]
    bp["ttl"] = 60

    with pytest.raises(LookupError) as raised:
        bulk.column_defaults(Breakpoint, bp.keys())

    message = str(raised.value)
    assert "breakpoints_breakpoint.created_at has no default and is NOT NULL" in message
    assert "breakpoints_breakpoint.ttl is not a column" in message


def test_the_reset_knows_every_table_that_references_a_breakpoint(bench):
    """seed.py --reset truncates the breakpoints with every table that references them:
    one it missed (a hidden relation, related_name="+") made TRUNCATE fail."""
    from django.apps import apps

    referencing = {
        (model, field.name)
        for model in apps.get_models()
        for field in model._meta.concrete_fields
        if field.is_relation and field.related_model is Breakpoint
    }
    import seed

    try:
        assert referencing and set(seed.breakpoint_children()) == referencing
    finally:
        sys.modules.pop("seed", None)
