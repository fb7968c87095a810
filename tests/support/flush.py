"""Between transactional tests, the database emptied as Django's `flush` leaves it, for less.

After each test that commits (`transactional_db`, every live test), Django's
TransactionTestCase runs `manage.py flush`: a TRUNCATE of every table (on PostgreSQL a new
file for each table and index), then post_migrate, which writes the content types, the
permissions and the role groups again (accounts.people.role_groups_sync). That costs about
half a second a test, little of it the deleting.

Here a process's first flush is Django's own, and the rows it leaves (post_migrate's) are
kept in memory. Each later flush deletes every row and writes those rows back, in one
transaction (Django's foreign keys are deferred to the commit), so each test still starts
from the database Django's flush leaves. Every EVERY_NTH flush is Django's TRUNCATE again,
without post_migrate (the kept rows are written back instead): with autovacuum off, deleted
rows would otherwise pile up in the tables and their indexes.

A test case class that flushes differently (available_apps, serialized_rollback,
reset_sequences) keeps Django's flush.
"""

from typing import Any

from django.apps import apps
from django.core.management import call_command
from django.core.management.color import no_style
from django.db import DatabaseError, connections, transaction
from django.test import TransactionTestCase

EVERY_NTH = 50

_django_fixture_teardown = TransactionTestCase._fixture_teardown
# Per database alias: the rows each table holds after Django's flush (tables left empty
# are not named), as (columns, rows).
_after_flush: dict[str, dict[str, tuple[list[str], list[tuple[Any, ...]]]]] = {}
_flushes: dict[str, int] = {}


def _django_flush(alias: str, *, post_migrate: bool) -> None:
    call_command(
        "flush",
        verbosity=0,
        interactive=False,
        database=alias,
        reset_sequences=False,
        allow_cascade=False,
        inhibit_post_migrate=not post_migrate,
    )


def _tables(alias: str) -> list[str]:
    introspection = connections[alias].introspection
    return sorted(introspection.django_table_names(only_existing=True, include_views=False))


def _rows_after_flush(alias: str) -> dict[str, tuple[list[str], list[tuple[Any, ...]]]] | None:
    """What each table holds now, or None if a value could not be written back as it was
    read (a JSON column, say: then this process keeps Django's flush)."""
    connection = connections[alias]
    quote = connection.ops.quote_name
    kept = {}
    with connection.cursor() as cursor:
        for table in _tables(alias):
            cursor.execute(f"SELECT * FROM {quote(table)}")  # noqa: S608 - a table's name
            rows = cursor.fetchall()
            if not rows:
                continue
            if any(isinstance(value, dict | list) for row in rows for value in row):
                return None
            kept[table] = ([column[0] for column in cursor.description], rows)
    return kept


def _write_back(alias: str) -> None:
    """The kept rows written back, and their tables' id sequences moved past them: a test
    may have made a table afresh (the upgrade rehearsal migrates from nothing), its
    sequence starting again below the kept ids (on SQLite, inserting them moves it)."""
    connection = connections[alias]
    quote = connection.ops.quote_name
    kept = _after_flush[alias]
    with connection.cursor() as cursor:
        for table, (columns, rows) in kept.items():
            names = ", ".join(quote(column) for column in columns)
            marks = ", ".join(["%s"] * len(columns))
            cursor.executemany(f"INSERT INTO {quote(table)} ({names}) VALUES ({marks})", rows)  # noqa: S608
        models = [model for model in apps.get_models() if model._meta.db_table in kept]
        for statement in connection.ops.sequence_reset_sql(no_style(), models):
            cursor.execute(statement)


def _empty(alias: str) -> None:
    """The database as Django's flush leaves it."""
    count = _flushes[alias] = _flushes.get(alias, 0) + 1
    if alias not in _after_flush:
        _django_flush(alias, post_migrate=True)
        kept = _rows_after_flush(alias)
        if kept is not None:
            _after_flush[alias] = kept
        return
    if count % EVERY_NTH == 0:
        _django_flush(alias, post_migrate=False)
        with transaction.atomic(using=alias):
            _write_back(alias)
        return
    quote = connections[alias].ops.quote_name
    try:
        with transaction.atomic(using=alias), connections[alias].cursor() as cursor:
            for table in _tables(alias):
                cursor.execute(f"DELETE FROM {quote(table)}")  # noqa: S608 - a table's name
            _write_back(alias)
    except DatabaseError:
        # The tables changed under the kept rows (a test migrated backwards, say): Django's
        # flush, and its rows kept afresh.
        del _after_flush[alias]
        _flushes[alias] = 0
        _empty(alias)


def _fixture_teardown(self: TransactionTestCase) -> None:
    if self.available_apps is not None or self.serialized_rollback or self.reset_sequences:
        _django_fixture_teardown(self)
        return
    for alias in self._databases_names(include_mirrors=False):
        if _flushes.get(alias, 0) and alias not in _after_flush:
            _django_flush(alias, post_migrate=True)  # this process keeps Django's flush
        else:
            _empty(alias)


def install() -> None:
    """Use the cheaper flush in this process (tests/conftest.py, at configure time)."""
    TransactionTestCase._fixture_teardown = _fixture_teardown  # type: ignore[method-assign]
