"""Bulk writes for the benchmarks: COPY on PostgreSQL (psycopg 3), bulk_create elsewhere.

A million breakpoints through the ORM take most of an hour; COPY takes about a minute, and
building the indexes once afterwards is several times cheaper than maintaining them per row.
"""

import contextlib
import json
from collections.abc import Iterable, Iterator, Sequence

from _rows import Row


def rows_write(model, rows: Sequence[Row]) -> int:
    """Insert `rows` (dicts keyed by attname) into `model`'s table; returns the row count.

    A column a row leaves out gets its model field's default (as the ORM would give it), so
    a column added to the model later does not break the seed; one with no default and no
    NULL allowed stops the seed with its name (see `column_defaults`).
    """
    from django.db import connection

    if not rows:
        return 0
    defaults = column_defaults(model, rows[0].keys())
    if connection.vendor != "postgresql":
        model.objects.bulk_create([model(**row, **defaults) for row in rows], batch_size=2000)
        return len(rows)
    return _copy(model, rows, defaults)


def column_defaults(model, given: Iterable[str]) -> Row:
    """The values of `model`'s columns missing from `given` (attnames): each field's default.

    The auto-incremented primary key is left to the database. Raises LookupError naming
    every column that has neither a default nor NULL allowed, and any name in `given` that
    is not a column (a renamed field).
    """
    fields = [f for f in model._meta.concrete_fields if not _database_generated(f)]
    known = {f.attname for f in fields}
    unknown = sorted(set(given) - known)
    defaults: Row = {}
    required = []
    for field in fields:
        if field.attname in given:
            continue
        value = _field_default(field)
        if value is None and not field.null:
            required.append(field.attname)
        defaults[field.attname] = value
    if unknown or required:
        table = model._meta.db_table
        problems = [f"{table}.{name} is not a column of the model" for name in unknown] + [
            f"{table}.{name} has no default and is NOT NULL: add it to benchmarks/_rows.py"
            for name in required
        ]
        raise LookupError("benchmark rows do not fit the model: " + "; ".join(problems))
    return defaults


def _database_generated(field) -> bool:
    from django.db.models.fields import AutoFieldMixin

    return isinstance(field, AutoFieldMixin) or getattr(field, "generated", False)


def _field_default(field) -> object:
    """`field`'s default as a value; None when it has none (get_default()'s "" for a text
    field without a default counts: the ORM would store it)."""
    if getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False):
        return None  # the ORM stamps these when saving; a row must carry its own time
    return field.get_default()


def _copy(model, rows: Sequence[Row], defaults: Row) -> int:
    from django.db import connection
    from django.db.models import JSONField

    fields = {f.attname: f for f in model._meta.concrete_fields}
    names = [*rows[0], *defaults]
    # The defaults are the same for every row: one COPY text each, appended to every row.
    constant = [
        json.dumps(v) if isinstance(fields[n], JSONField) and v is not None else v
        for n, v in defaults.items()
    ]
    quote = connection.ops.quote_name
    columns = ", ".join(quote(fields[name].column) for name in names)
    is_json = [isinstance(fields[name], JSONField) for name in rows[0]]
    sql = f"COPY {quote(model._meta.db_table)} ({columns}) FROM STDIN"
    dumps = json.dumps
    with connection.cursor() as cursor:
        # Text COPY: the server parses each value as its column's type (jsonb included).
        with cursor.cursor.copy(sql) as copy:
            for row in rows:
                copy.write_row(
                    [
                        *(
                            dumps(value) if json_ and value is not None else value
                            for value, json_ in zip(row.values(), is_json, strict=True)
                        ),
                        *constant,
                    ]
                )
    return len(rows)


@contextlib.contextmanager
def indexes_deferred(models: Sequence) -> Iterator[None]:
    """Drop the secondary indexes and foreign keys of `models`' tables; create them on exit.

    Use inside one transaction (PostgreSQL DDL is transactional): a load that fails or is
    interrupted rolls back with its indexes in place. Primary keys and unique constraints
    stay, so duplicates still fail. Does nothing on other databases.
    """
    from django.db import connection

    if connection.vendor != "postgresql":
        yield
        return
    quote = connection.ops.quote_name
    recreate: list[str] = []
    with connection.cursor() as cursor:
        for model in models:
            table = model._meta.db_table
            cursor.execute(
                "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
                "WHERE conrelid = %s::regclass AND contype = 'f' ORDER BY conname",
                [table],
            )
            for name, definition in cursor.fetchall():
                cursor.execute(f"ALTER TABLE {quote(table)} DROP CONSTRAINT {quote(name)}")
                recreate.append(
                    f"ALTER TABLE {quote(table)} ADD CONSTRAINT {quote(name)} {definition}"
                )
            cursor.execute(
                "SELECT i.relname, pg_get_indexdef(i.oid) FROM pg_index x "
                "JOIN pg_class i ON i.oid = x.indexrelid WHERE x.indrelid = %s::regclass "
                "AND NOT EXISTS (SELECT 1 FROM pg_constraint c "
                "WHERE c.conindid = x.indexrelid AND c.conrelid = x.indrelid) "
                "ORDER BY i.relname",
                [table],
            )
            for name, definition in cursor.fetchall():
                if "UNIQUE" in definition.split(" ON ")[0]:
                    continue  # a unique index is a rule, not only an access path: keep it
                cursor.execute(f"DROP INDEX {quote(name)}")
                recreate.append(definition)
    yield
    with connection.cursor() as cursor:
        # Index builds sort in memory when they can (the default 64 MB spills to disk).
        cursor.execute("SET LOCAL maintenance_work_mem = '512MB'")
        for statement in recreate:
            cursor.execute(statement)
