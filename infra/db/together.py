"""Several of a write's statements sent as one: each round trip saved is a hand-off
between the view's thread and the database, and at ten per write they set its pace
(docs/benchmarks.md, the write paths).

- `insert_together(*groups)`: the new rows of several models (a breakpoint, its event, its
  outbox rows) in ONE INSERT statement, as data-modifying WITH queries;
- `inserts_held()`: every infra.db.prepared.insert() (and `update_held()`) within the block,
  written that way when the block ends;
- `insert_and_read(rows, read, *values)`: rows inserted, and a read of their table, in one.

PostgreSQL only; elsewhere (the embedded SQLite default) each statement is sent alone, with
the same result. The statements are built once per shape, as infra.db.prepared builds its own.
"""

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import Model

from infra.db.prepared import (
    Held,
    HeldUpdate,
    InsertStatement,
    Prepared,
    auto_key,
    db_converted,
    held_inserts,
    insert,
    insert_statement,
    insert_values,
    prepared_cursor,
    update_statement,
)

M = TypeVar("M", bound=Model)


@contextmanager
def inserts_held() -> Iterator[None]:
    """infra.db.prepared.insert() and update_held() within the block are held, and every held
    write is sent when the block ends without an error, in order, in ONE statement on
    PostgreSQL (write_together): a write's new rows (a breakpoint, its event, its outbox
    rows) in one round trip. When the block raises, nothing held is written. For blocks that
    read neither the rows they write nor their automatic keys and generated columns before
    the end (those are set then). Elsewhere (SQLite), each write is sent at once, as outside
    the block. Within another such block, the writes join the outer block's statement."""
    if held_inserts.get() is not None:
        yield
        return
    held: dict[str, list[Held]] = {}
    token = held_inserts.set(held)
    try:
        yield
    finally:
        held_inserts.reset(token)
    for using, writes in held.items():
        write_together(*writes, using=using)


def update_held(
    model: type[Model],
    values: dict[str, Any],
    *,
    where: dict[str, Any],
    missed: Callable[[], None],
    using: str = DEFAULT_DB_ALIAS,
) -> None:
    """infra.db.prepared.update_where()'s UPDATE, and `missed()` (which raises) if it changed no
    row. Within inserts_held() on PostgreSQL, the UPDATE goes in the block's one statement and
    `missed()` is called when the block ends: for an UPDATE that cannot miss but is checked
    anyway (a row the transaction has locked, compared with what it read)."""
    update = HeldUpdate(*update_statement(model, values, where=where, using=using), missed)
    held = held_inserts.get()
    if held is None or connections[using].vendor != "postgresql":
        _update_alone(update, using)
        return
    held.setdefault(using, []).append(update)


def _update_alone(update: HeldUpdate, using: str) -> None:
    """The UPDATE in a statement of its own, and `missed()` if it changed no row."""
    with prepared_cursor(connections[using]) as cursor:
        cursor.execute(update.sql, update.params)
        changed = cursor.rowcount
    if not changed:
        update.missed()


def insert_together(*groups: Sequence[Model], using: str = DEFAULT_DB_ALIAS) -> None:
    """insert() of each group (new instances of one model each), in order, in ONE statement
    on PostgreSQL (write_together)."""
    write_together(*groups, using=using)


def write_together(*writes: Held, using: str = DEFAULT_DB_ALIAS) -> None:
    """Each write, in order, in ONE statement on PostgreSQL: the rows of a group (new
    instances of one model) as insert() writes them, an UPDATE as update_held() sends it.
    Each but the last is a data-modifying WITH query, run once and to completion with the
    rest (all of them see the snapshot the statement started with); the rows of a group may
    refer to an earlier group's (the foreign keys are checked at the end of the statement,
    or at commit). Every automatic key and generated column comes back as insert() sets
    them, each group's in its own array, and each UPDATE's count of rows. Elsewhere, one
    statement each."""
    writes = tuple(write for write in writes if isinstance(write, HeldUpdate) or write)
    connection = connections[using]
    if len(writes) < 2 or connection.vendor != "postgresql":
        for write in writes:
            if isinstance(write, HeldUpdate):
                _update_alone(write, using)
            else:
                insert(write, using=using)
        return
    shapes = tuple(
        write.sql
        if isinstance(write, HeldUpdate)
        else (type(write[0]), len(write), auto_key(write[0]))
        for write in writes
    )
    statement = _together_statement(shapes, using)
    params = [
        value
        for write, part in zip(writes, statement.parts, strict=True)
        for value in (
            write.params
            if isinstance(write, HeldUpdate)
            else insert_values(part, write, connection)  # type: ignore[arg-type]
        )
    ]
    with prepared_cursor(connection) as cursor:
        cursor.execute(statement.sql, params)
        arrays = list(cursor.fetchone() or ())
    missed = []
    for write, part in zip(writes, statement.parts, strict=True):
        if isinstance(write, HeldUpdate):
            if not arrays.pop(0):
                missed.append(write.missed)
            continue
        assert part is not None
        returned = [arrays.pop(0) for _ in part.returned]
        for position, row in enumerate(write):
            for (field, functions, expression), values in zip(part.returned, returned, strict=True):
                value = db_converted(values[position], functions, expression, connection)
                setattr(row, field.attname, value)
            row._state.adding, row._state.db = False, using
    for call in missed:
        call()


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
    parts: tuple[InsertStatement | None, ...]  # per write: its INSERT, None for an UPDATE


# Per write: an UPDATE's SQL, or an INSERT's model, count of rows and whether its key is automatic.
_Shapes = tuple[str | tuple[type[Model], int, bool], ...]
_togethers: dict[tuple[_Shapes, str, str], _Together] = {}


def _together_statement(shapes: _Shapes, using: str) -> _Together:
    key = (shapes, using, connections[using].vendor)
    statement = _togethers.get(key)
    if statement is None:
        quote = connections[using].ops.quote_name
        parts = tuple(
            None if isinstance(shape, str) else insert_statement(*shape, using) for shape in shapes
        )
        queries, results = [], []
        for n, (shape, part) in enumerate(zip(shapes, parts, strict=True)):
            if part is None:
                queries.append(f"w{n} AS ({shape} RETURNING 1)")
                results.append(f"(SELECT count(*) FROM w{n})")
                continue
            queries.append(f"w{n} AS ({part.sql})")
            results += [
                f"ARRAY(SELECT {quote(str(field.column))} FROM w{n})" for field, *_ in part.returned
            ]
        sql = f"WITH {', '.join(queries)} SELECT {', '.join(results) or 'NULL'}"
        statement = _togethers[key] = _Together(sql, parts)
    return statement
