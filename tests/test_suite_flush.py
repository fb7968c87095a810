"""The suite's flush between transactional tests (tests/support/flush.py) leaves the database
as Django's own flush does: the tests here run in file order (one worker takes a file), each
dirtying one checks that the one before it was emptied."""

from collections import Counter

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.core.management.color import no_style
from django.db import connection

from tests.support import flush
from tests.support.factories import ReviewerFactory


def contents() -> dict[str, object]:
    """Each table's row count, and the rows post_migrate writes by their natural keys (ids
    differ after a flush that truncates)."""
    with connection.cursor() as cursor:
        counts = {}
        for table in connection.introspection.django_table_names(only_existing=True):
            cursor.execute(f"SELECT count(*) FROM {connection.ops.quote_name(table)}")  # noqa: S608
            counts[table] = cursor.fetchone()[0]
    return {
        "counts": counts,
        "content types": sorted(ContentType.objects.values_list("app_label", "model")),
        "permissions": sorted(Permission.objects.values_list("content_type__model", "codename")),
        "groups": {
            group.name: sorted(group.permissions.values_list("codename", flat=True))
            for group in Group.objects.all()
        },
    }


def dirty() -> None:
    """Rows in many tables, and post_migrate's own rows changed."""
    ReviewerFactory(username="flush-probe")
    group = Group.objects.order_by("name").first()
    group.permissions.remove(*group.permissions.all()[:3])
    Group.objects.create(name="made-by-a-test")
    Permission.objects.filter(codename__startswith="view_").first().delete()


def assert_as_djangos_flush_leaves_it() -> None:
    ours = contents()
    call_command("flush", verbosity=0, interactive=False)  # Django's, with post_migrate
    assert ours == contents()
    assert Counter(ours["counts"].values())[0] > 0  # most tables are empty after either


@pytest.mark.parametrize("path", ["first", "deleting", "deleting again"])
def test_a_test_dirties_the_database(transactional_db, path):
    dirty()
    assert probes() == 1


def probes() -> int:
    return get_user_model().objects.filter(username="flush-probe").count()


def test_after_it_the_database_is_as_djangos_flush_leaves_it(transactional_db):
    assert probes() == 0
    assert_as_djangos_flush_leaves_it()
    dirty()
    # The next flush is the periodic TRUNCATE (without post_migrate: the kept rows back).
    flush._flushes["default"] = flush.EVERY_NTH - 1


def test_after_the_periodic_truncate_too(transactional_db):
    assert probes() == 0
    assert_as_djangos_flush_leaves_it()


def test_a_test_starts_a_tables_ids_again(transactional_db):
    """As the upgrade rehearsal does (it migrates a database from nothing)."""
    reset = connection.ops.sequence_reset_by_name_sql(
        no_style(), [{"table": "auth_group", "column": "id"}]
    )
    with connection.cursor() as cursor:
        for statement in reset:
            cursor.execute(statement)


def test_after_it_new_rows_get_ids_past_the_rows_written_back(transactional_db):
    kept = Group.objects.count()
    highest = max(Group.objects.values_list("id", flat=True))

    for number in range(highest + 1):  # from 1, every id a group written back holds
        Group.objects.create(name=f"made-after-a-restart-{number}")

    assert Group.objects.count() == kept + highest + 1
