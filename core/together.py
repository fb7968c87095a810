"""Several of a write's statements sent as one: each round trip saved is a hand-off
between the view's thread and the database, and at ten per write they set its pace
(docs/benchmarks.md, issue 39).

- `insert_together(*groups)`: the new rows of several models (a breakpoint, its event, its
  outbox rows) in ONE INSERT statement, as data-modifying WITH queries;
- `inserts_held()`: every core.prepared.insert() within the block, written that way when
  the block ends;
- `insert_and_read(rows, read, *values)`: rows inserted, and a read of their table, in one.

PostgreSQL only; elsewhere (the embedded SQLite default) each statement is sent alone, with
the same result. The statements are built once per shape, as core.prepared builds its own.
"""

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import Model

from core.prepared import (
    InsertStatement,
    Prepared,
    auto_key,
    db_converted,
    held_inserts,
    insert,
    insert_statement,
    insert_values,
    prepared_cursor,
)

M = TypeVar("M", bound=Model)


@contextmanager
def inserts_held() -> Iterator[None]:
    """core.prepared.insert() within the block is held, and every held group is written when the block
    ends without an error, in order, in ONE statement on PostgreSQL (insert_together): a
    write's new rows (a breakpoint, its event, its outbox rows) in one round trip. When the
    block raises, nothing held is written. For blocks that read neither the rows they
    insert nor their automatic keys and generated columns before the end (those are set
    then). Elsewhere (SQLite), each insert() is written at once, as outside the block.
    Within another such block, the rows join the outer block's statement."""
    if held_inserts.get() is not None:
        yield
        return
    held: dict[str, list[Sequence[Model]]] = {}
    token = held_inserts.set(held)
    try:
        yield
    finally:
        held_inserts.reset(token)
    for using, groups in held.items():
        insert_together(*groups, using=using)


def insert_together(*groups: Sequence[Model], using: str = DEFAULT_DB_ALIAS) -> None:
    """insert() of each group (new instances of one model each), in order, in ONE statement
    on PostgreSQL: one round trip for a write's rows (a breakpoint, its event, its outbox
    rows). Each INSERT but the last is a data-modifying WITH query, run once and to
    completion with the rest; the rows of a group may refer to an earlier group's (the
    foreign keys are checked at the end of the statement, or at commit). Every automatic
    key and generated column comes back as insert() sets them, each group's in its own
    array. Elsewhere, one insert() per group."""
    groups = tuple(group for group in groups if group)
    connection = connections[using]
    if len(groups) < 2 or connection.vendor != "postgresql":
        for group in groups:
            insert(group, using=using)
        return
    shapes = tuple((type(group[0]), len(group), auto_key(group[0])) for group in groups)
    statement = _together_statement(shapes, using)
    params = [
        value
        for group, part in zip(groups, statement.parts, strict=True)
        for value in insert_values(part, group, connection)
    ]
    with prepared_cursor(connection) as cursor:
        cursor.execute(statement.sql, params)
        arrays = list(cursor.fetchone() or ())
    for group, part in zip(groups, statement.parts, strict=True):
        returned = [arrays.pop(0) for _ in part.returned]
        for position, row in enumerate(group):
            for (field, functions, expression), values in zip(part.returned, returned, strict=True):
                value = db_converted(values[position], functions, expression, connection)
                setattr(row, field.attname, value)
            row._state.adding, row._state.db = False, using


def insert_and_read(rows: Sequence[M], read: Prepared[M], *values: Any) -> list[M]:
    """insert(rows), then what `read` (of instances of the rows' model) gives with these
    values, in ONE statement on PostgreSQL (a decision's feedback, and every feedback of its
    breakpoint): the read sees the table as it was before the INSERT (the statement's one
    snapshot), and the inserted rows are added to what it gives, in the read's order, as a
    read after the insert would give them (a read that finds only some rows must not be
    given others: the caller's rows are ones it would find). Elsewhere, two statements."""
    connection = connections[DEFAULT_DB_ALIAS]
    if not rows or connection.vendor != "postgresql":
        insert(rows)
        return read.instances(*values)
    model = type(rows[0])
    read_model, attnames = read.shape()
    if read_model is not model:
        raise TypeError("insert_and_read() reads instances of the model it inserts.")
    statement = insert_statement(model, len(rows), auto_key(rows[0]), DEFAULT_DB_ALIAS)
    quote = connection.ops.quote_name
    columns = [model._meta.get_field(name).column for name in attnames]  # type: ignore[union-attr]
    sql, params, _ = read.statement(*values)
    combined = (
        f"WITH inserted AS ({statement.bare} RETURNING "
        f"{', '.join(quote(str(column)) for column in columns)}) "
        f"SELECT 0, inserted.* FROM inserted UNION ALL SELECT 1, part.* FROM ({sql}) part"
    )
    inserted_params = insert_values(statement, rows, connection)
    with prepared_cursor(connection) as cursor:
        cursor.execute(combined, inserted_params + params)
        found = cursor.fetchall()
    inserted = [row[1:] for row in found if row[0] == 0]
    for row, stored in zip(rows, read.results(inserted, ordered=False), strict=True):
        for field, *_ in statement.returned:
            setattr(row, field.attname, getattr(stored, field.attname))
        row._state.adding, row._state.db = False, DEFAULT_DB_ALIAS
    return read.results([row[1:] for row in found])


@dataclass(frozen=True)
class _Together:
    sql: str
    parts: tuple[InsertStatement, ...]


_Shapes = tuple[tuple[type[Model], int, bool], ...]  # per group: its model, rows, automatic key
_togethers: dict[tuple[_Shapes, str, str], _Together] = {}


def _together_statement(shapes: _Shapes, using: str) -> _Together:
    key = (shapes, using, connections[using].vendor)
    statement = _togethers.get(key)
    if statement is None:
        parts = tuple(insert_statement(model, count, auto, using) for model, count, auto in shapes)
        queries = ", ".join(f"i{n} AS ({part.sql})" for n, part in enumerate(parts))
        arrays = [
            f"ARRAY(SELECT {connections[using].ops.quote_name(str(field.column))} FROM i{n})"
            for n, part in enumerate(parts)
            for field, *_ in part.returned
        ]
        sql = f"WITH {queries} SELECT {', '.join(arrays) or 'NULL'}"
        statement = _togethers[key] = _Together(sql, parts)
    return statement
