"""Reads and inserts of the hot write paths, their SQL built once per process.

Building a statement is most of what a small ORM query costs in Python: the queryset's
filters resolved, the SQL compiled, its converters looked up, about a millisecond each
on this project's creates and releases (docs/benchmarks.md). A `Prepared` read is
written as an ordinary queryset whose varying values are placeholders; the first call
compiles it through the ORM, and every later one sends that SQL with the values in their
places, through Django's cursor (so the queries are counted, logged and wrapped as any),
and reads the rows with the same converters the ORM would apply.

What it takes: a plain queryset of one model (instances: no select_related, no
annotations) or a values_list() (rows, or a flat list); each placeholder used where the
ORM passes the value through as a query parameter (an exact or comparison lookup on a
text or number column). A placeholder the compiled SQL does not carry exactly once is a
programming error, raised on first use.

`insert(rows)` is bulk_create's INSERT for the same rows, its statement written once per
model and row count: the columns' values prepared as the ORM prepares them (pre_save, then
get_db_prep_save), an automatic primary key read back with RETURNING.

On PostgreSQL these statements are sent with their values bound on the server (psycopg's
Cursor, not the ClientCursor Django uses): no value is quoted into the statement's text
(a JSON body is sent as jsonb, not escaped character by character), and a statement sent
again on the same connection is prepared there once (psycopg's prepare_threshold), so the
database parses and plans it once per connection instead of once per request.

A read can also be sent inside a larger statement (`Prepared.statement`, then `results` of
its rows), and a write's statements can go as one (infra.db.together).
"""

import functools
import re
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from threading import Lock
from typing import Any, Generic, TypeVar

import psycopg
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.postgresql.psycopg_any import register_tzloader
from django.db.backends.utils import CursorWrapper
from django.db.models import Field, Model, QuerySet
from django.db.models.query import FlatValuesListIterable, ModelIterable, ValuesListIterable

from infra.db.locking import locked

M = TypeVar("M", bound=Model)

_PLACEHOLDER = "\x00prepared-parameter-{}\x00"


@dataclass(frozen=True)
class _Compiled:
    sql: str
    # Per parameter of the SQL: the index of the caller's value, or None for a constant.
    slots: tuple[int | None, ...]
    constants: tuple[Any, ...]
    converters: tuple[tuple[int, tuple[Callable[..., Any], ...], Any], ...]
    model: type[Model] | None  # instances of it (ModelIterable), else rows
    attnames: tuple[str, ...]
    flat: bool
    types: tuple[str, ...]  # of each column, as CAST names it
    # (column, descending): the queryset's order by; None if by a column it does not select
    order: tuple[tuple[int, bool], ...] | None


class Prepared(Generic[M]):
    """`build(*placeholders)` -> the queryset; call with the values for the placeholders."""

    def __init__(self, build: Callable[..., QuerySet[M, Any]], *, parameters: int = 0):
        self._build = build
        self._parameters = parameters
        self._compiled: dict[tuple[str, str], _Compiled] = {}
        self._lock = Lock()

    def instances(self, *values: Any, using: str = DEFAULT_DB_ALIAS) -> list[M]:
        """The model instances the queryset would give (a queryset of instances)."""
        compiled = self._compiled_for(using)
        if compiled.model is None:
            raise TypeError("instances() of a values_list() read: call rows().")
        model = compiled.model
        return [
            model.from_db(using, compiled.attnames, row)  # type: ignore[misc]
            for row in self._fetch(compiled, values, using)
        ]

    def rows(self, *values: Any, using: str = DEFAULT_DB_ALIAS) -> list[Any]:
        """The values_list() rows (tuples, or values when flat=True)."""
        compiled = self._compiled_for(using)
        if compiled.model is not None:
            raise TypeError("rows() of a read of instances: call instances().")
        rows = self._fetch(compiled, values, using)
        return [row[0] for row in rows] if compiled.flat else [tuple(row) for row in rows]

    def all(self, *values: Any, using: str = DEFAULT_DB_ALIAS) -> list[Any]:
        """instances() or rows(), whichever this read gives."""
        compiled = self._compiled_for(using)
        return (
            self.instances(*values, using=using)
            if compiled.model
            else self.rows(*values, using=using)
        )

    def statement(
        self, *values: Any, using: str = DEFAULT_DB_ALIAS
    ) -> tuple[str, list[Any], tuple[str, ...]]:
        """The read with these values, to be sent as part of a larger statement: its SQL,
        its parameters, and the type of each column of its rows, as CAST names it
        (results() reads the rows)."""
        compiled = self._compiled_for(using)
        return compiled.sql, self._params(compiled, values), compiled.types

    def shape(self, using: str = DEFAULT_DB_ALIAS) -> tuple[type[Model] | None, tuple[str, ...]]:
        """The model whose instances the read gives (None for rows), and the attribute of
        each column of its rows."""
        compiled = self._compiled_for(using)
        return compiled.model, compiled.attnames

    def results(
        self, rows: Sequence[Sequence[Any]], using: str = DEFAULT_DB_ALIAS, *, ordered: bool = True
    ) -> list[Any]:
        """What instances() or rows() gives, of `rows`: the rows of statement()'s SQL, read
        as part of a larger statement (in any order: they are put in the queryset's, unless
        not `ordered`)."""
        compiled = self._compiled_for(using)
        if ordered and compiled.order is None:
            raise ValueError("results() of a read ordered by a column it does not select.")
        converted = self._converted_rows(compiled, [list(row) for row in rows], using)
        for position, descending in reversed((ordered and compiled.order) or ()):
            converted.sort(key=lambda row: row[position], reverse=descending)
        if compiled.model is not None:
            model = compiled.model
            return [model.from_db(using, compiled.attnames, row) for row in converted]
        return [row[0] for row in converted] if compiled.flat else [tuple(r) for r in converted]

    def _params(self, compiled: _Compiled, values: Sequence[Any]) -> list[Any]:
        if len(values) != self._parameters:
            raise TypeError(f"{self._parameters} value(s) expected, {len(values)} given.")
        return [
            compiled.constants[index] if slot is None else values[slot]
            for index, slot in enumerate(compiled.slots)
        ]

    def _fetch(self, compiled: _Compiled, values: Sequence[Any], using: str) -> list[list[Any]]:
        params = self._params(compiled, values)
        connection = connections[using]
        with prepared_cursor(connection) as cursor:
            cursor.execute(compiled.sql, params)
            rows = [list(row) for row in cursor.fetchall()]
        return self._converted_rows(compiled, rows, using)

    @staticmethod
    def _converted_rows(compiled: _Compiled, rows: list[list[Any]], using: str) -> list[list[Any]]:
        connection = connections[using]
        for row in rows:
            for position, functions, expression in compiled.converters:
                row[position] = db_converted(row[position], functions, expression, connection)
        return rows

    def _compiled_for(self, using: str) -> _Compiled:
        connection = connections[using]
        key = (using, connection.vendor)
        compiled = self._compiled.get(key)
        if compiled is None:
            with locked(self._lock, using):  # compiling may ask the server its version
                compiled = self._compiled.get(key) or self._compile(using)
                self._compiled[key] = compiled
        return compiled

    def _compile(self, using: str) -> _Compiled:
        placeholders = [_PLACEHOLDER.format(n) for n in range(self._parameters)]
        queryset = self._build(*placeholders)
        compiler = queryset.query.get_compiler(using=using)
        sql, params = compiler.as_sql()
        slots = tuple(placeholders.index(p) if p in placeholders else None for p in params)
        for n in range(self._parameters):
            if slots.count(n) != 1:
                raise ValueError(f"Placeholder {n} is not one parameter of the compiled SQL.")
        fields = [column[0] for column in compiler.select[: compiler.col_count]]
        converters = tuple(
            (position, tuple(functions), expression)
            for position, (functions, expression) in compiler.get_converters(fields).items()
        )
        iterable = queryset._iterable_class
        model, attnames = None, ()
        if iterable is ModelIterable:
            info = compiler.klass_info
            if info.get("related_klass_infos") or compiler.annotation_col_map:
                raise ValueError("A prepared read of instances takes no joins or annotations.")
            model = info["model"]
            attnames = tuple(column[0].target.attname for column in compiler.select)
        elif iterable not in (ValuesListIterable, FlatValuesListIterable):
            raise ValueError("A prepared read is a queryset of instances or a values_list().")
        return _Compiled(
            sql=sql,
            slots=slots,
            constants=tuple(params),
            converters=converters,
            model=model,
            attnames=attnames,
            flat=iterable is FlatValuesListIterable,
            types=tuple(field.output_field.cast_db_type(compiler.connection) for field in fields),
            order=_order(compiler, fields),
        )


def _order(compiler: Any, fields: list[Any]) -> tuple[tuple[int, bool], ...] | None:
    """The queryset's order as (column position, descending) pairs, for rows read as part of
    a larger statement (Prepared.results); None when it orders by something not selected."""
    targets = [getattr(field, "target", None) for field in fields]
    aliases = [column[2] for column in compiler.select[: len(fields)]]
    order = []
    for expression, (_, _, is_ref) in compiler.get_order_by():
        ordered = expression.expression
        if is_ref and getattr(ordered, "refs", None) in aliases:
            position = aliases.index(ordered.refs)
        elif getattr(ordered, "target", None) in targets:
            position = targets.index(ordered.target)
        else:
            return None
        order.append((position, bool(expression.descending)))
    return tuple(order)


def read_cursor(using: str = DEFAULT_DB_ALIAS) -> CursorWrapper:
    """A cursor as these reads use: on PostgreSQL, its statements bound and prepared on the
    server (see prepared_cursor)."""
    return prepared_cursor(connections[using])


def prepared_cursor(connection: Any) -> CursorWrapper:
    """`connection.cursor()`; on PostgreSQL, one that binds its values on the server and
    prepares its statement, set up as Django sets up its own cursors (the connection's
    time zone, and the wrapper that counts and logs the queries)."""
    if connection.vendor != "postgresql":
        return connection.cursor()
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    with connection.wrap_database_errors:
        raw = connection.connection
        # The connection's cursor, kept from one statement to the next (_PreparingCursor).
        kept = getattr(connection, "_prepared_cursor", None)
        if kept is not None and kept.connection is raw and not kept.in_use and not kept.closed:
            cursor = kept
        else:
            cursor = _PreparingCursor(raw)
            timestamptz = psycopg.adapters.types["timestamptz"].oid
            loader = raw.adapters.get_loader(timestamptz, psycopg.pq.Format.TEXT)
            if connection.timezone != loader.timezone:
                register_tzloader(connection.timezone, cursor)
            if kept is None or kept.connection is not raw or kept.closed:
                cursor.kept = True
                connection._prepared_cursor = cursor
        cursor.in_use = True
        return connection._prepare_cursor(cursor)


class _PreparingCursor(psycopg.RawCursor):
    """psycopg's Cursor (values bound on the server), each statement prepared: psycopg keeps
    a connection's prepared statements, at most its prepared_max, the oldest dropped; none
    while the connection's prepare_threshold is None (Django's default; infra.environment sets
    one).

    The statements come with Django's %s placeholders; each is numbered ($1, $2...) once
    per process (`numbered`) and sent as psycopg's RawCursor sends it. psycopg converts a
    statement on every execute and caches that only for statements under 4 KiB and 50
    values: a create's one INSERT is longer, and converting it was 6 % of a create's CPU.

    One is kept per connection (Django's connections are each one thread's) and used again
    by the next statement: psycopg looks up the dumper of each value's type and the loader
    of each column's once per cursor (a timestamptz loader works out its time zone), which
    a new cursor per statement repeated every time. `close()` of the kept one only hands it
    back; a statement sent while it is in use gets a cursor of its own."""

    kept = False  # the connection's kept cursor
    in_use = False

    def close(self) -> None:
        self.in_use = False
        if not self.kept:
            super().close()

    def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
        if params is not None:
            query = numbered(query)
        return super().execute(query, params, **{**kwargs, "prepare": True})

    def executemany(self, query: Any, params_seq: Any, **kwargs: Any) -> None:
        super().executemany(numbered(query), params_seq, **kwargs)


_PLACEHOLDERS = re.compile(r"%(.?)", re.DOTALL)


@functools.lru_cache(maxsize=1024)  # the statements of this module and infra.db.together
def numbered(query: str) -> str:
    """A statement with Django's positional placeholders (%s, and %% for a percent sign)
    in PostgreSQL's numbered form ($1, $2...), as psycopg would send it; any other use of
    % is refused, as psycopg refuses it."""
    count = 0

    def replaced(match: re.Match[str]) -> str:
        nonlocal count
        if match.group(1) == "%":
            return "%"
        if match.group(1) != "s":
            raise psycopg.ProgrammingError(
                f"Only %s placeholders (and %% for a percent sign) are allowed: {match.group(0)!r}"
            )
        count += 1
        return f"${count}"

    return _PLACEHOLDERS.sub(replaced, query)


def db_converted(
    value: Any, functions: Sequence[Callable[..., Any]], expression: Any, connection: Any
) -> Any:
    """A value from the database as the ORM gives it: its column's converters, in order."""
    for function in functions:
        value = function(value, expression, connection)
    return value


@dataclass(frozen=True)
class InsertStatement:
    sql: str
    bare: str  # the INSERT without its RETURNING
    fields: tuple[Field, ...]
    # What RETURNING gives back, as save() sets it: the automatic key, the generated columns.
    returned: tuple[tuple[Field, tuple[Callable[..., Any], ...], Any], ...]


_inserts: dict[tuple[type[Model], int, bool, str, str], InsertStatement] = {}


@dataclass(frozen=True)
class HeldUpdate:
    """An update_statement() held for infra.db.together's one statement."""

    sql: str
    params: list[Any]
    missed: Callable[[], None]  # called when it changed no row


# A write held for infra.db.together's one statement: the new rows of one model, or an UPDATE.
Held = Sequence[Model] | HeldUpdate

# Within infra.db.together.inserts_held(): the writes held for its one statement, in order, per
# database alias (insert() adds to it instead of writing).
held_inserts: ContextVar[dict[str, list[Held]] | None] = ContextVar("inserts_held", default=None)


def insert(rows: Sequence[M], *, using: str = DEFAULT_DB_ALIAS) -> Sequence[M]:
    """Write `rows` (new instances of one model) in one INSERT, as bulk_create and save()
    would: an automatic primary key and the generated columns set from RETURNING. No
    signals are sent (these models have no receivers). Within infra.db.together.inserts_held(),
    on PostgreSQL, the rows are written at the end of that block."""
    if not rows:
        return rows
    connection = connections[using]
    held = held_inserts.get()
    if held is not None and connection.vendor == "postgresql":
        held.setdefault(using, []).append(rows)
        return rows
    model = type(rows[0])
    auto = auto_key(rows[0])
    if not connection.features.can_return_rows_from_bulk_insert:
        return model._default_manager.using(using).bulk_create(rows)
    statement = insert_statement(model, len(rows), auto, using)
    params = insert_values(statement, rows, connection)
    with prepared_cursor(connection) as cursor:
        cursor.execute(statement.sql, params)
        returned = (
            connection.ops.fetch_returned_insert_rows(cursor)  # type: ignore[attr-defined]
            if statement.returned
            else []
        )
    for row, values in zip(rows, returned, strict=False):
        for (field, functions, expression), value in zip(statement.returned, values, strict=True):
            setattr(row, field.attname, db_converted(value, functions, expression, connection))
    for row in rows:
        row._state.adding, row._state.db = False, using
    return rows


def auto_key(row: Model) -> bool:
    """Whether the row's key is the database's to give (an automatic key not set yet)."""
    return row._meta.auto_field is not None and row.pk is None


def insert_values(statement: InsertStatement, rows: Sequence[Model], connection: Any) -> list[Any]:
    """The INSERT's parameters: each row's columns prepared as the ORM prepares them."""
    return [
        field.get_db_prep_save(field.pre_save(row, True), connection)
        for row in rows
        for field in statement.fields
    ]


def insert_statement(model: type[Model], count: int, auto: bool, using: str) -> InsertStatement:
    connection = connections[using]
    key = (model, count, auto, using, connection.vendor)
    statement = _inserts.get(key)
    if statement is None:
        opts, quote = model._meta, connection.ops.quote_name
        assert opts.db_table
        fields = tuple(
            field
            for field in opts.concrete_fields
            if not field.generated and not (auto and field is opts.auto_field)
        )
        for field in fields:
            placeholder = getattr(field, "get_placeholder", None)
            if field.has_db_default() or (
                placeholder is not None and placeholder(None, None, connection) != "%s"
            ):
                raise ValueError(f"{field}: a database default or placeholder of its own.")
        row = "(" + ", ".join(["%s"] * len(fields)) + ")"
        sql = bare = (
            f"INSERT INTO {quote(opts.db_table)} "
            f"({', '.join(quote(str(field.column)) for field in fields)}) "
            f"VALUES {', '.join([row] * count)}"
        )
        returning = [
            field
            for field in opts.db_returning_fields
            if field.generated or (auto and field is opts.auto_field)
        ]
        returned = []
        if returning:
            clause, _ = connection.ops.return_insert_columns(returning)  # type: ignore[attr-defined]
            sql += f" {clause}"
            for field in returning:
                column = field.get_col(opts.db_table)
                functions = connection.ops.get_db_converters(column) + field.get_db_converters(
                    connection
                )
                returned.append((field, tuple(functions), column))
        statement = _inserts[key] = InsertStatement(sql, bare, fields, tuple(returned))
    return statement


_updates: dict[tuple[type[Model], tuple[str, ...], tuple[str, ...], str, str], str] = {}


def update_statement(
    model: type[Model], values: dict[str, Any], *, where: dict[str, Any], using: str
) -> tuple[str, list[Any]]:
    """update_where()'s statement and its parameters (infra.db.together sends it with others)."""
    connection = connections[using]
    opts = model._meta
    set_fields = [opts.get_field(name) for name in values]
    where_fields = [opts.get_field(name) for name in where]
    key = (model, tuple(values), tuple(where), using, connection.vendor)
    sql = _updates.get(key)
    if sql is None:
        quote = connection.ops.quote_name
        assert opts.db_table
        assignments = ", ".join(f"{quote(str(field.column))} = %s" for field in set_fields)  # type: ignore[union-attr]
        conditions = " AND ".join(f"{quote(str(field.column))} = %s" for field in where_fields)  # type: ignore[union-attr]
        sql = _updates[key] = f"UPDATE {quote(opts.db_table)} SET {assignments} WHERE {conditions}"
    params: list[Any] = []
    for field, value in zip(set_fields, values.values(), strict=True):
        if hasattr(value, "resolve_expression"):
            raise TypeError(f"update_where takes values, not expressions ({field.name}).")
        params.append(field.get_db_prep_save(value, connection))  # type: ignore[union-attr]
    for field, value in zip(where_fields, where.values(), strict=True):
        if value is None or hasattr(value, "resolve_expression"):
            raise TypeError(f"update_where compares with values, not NULL ({field.name}).")
        prepared = field.get_prep_value(value)  # type: ignore[union-attr]
        params.append(field.get_db_prep_value(prepared, connection, prepared=True))  # type: ignore[union-attr]
    return sql, params


def update_where(
    model: type[Model],
    values: dict[str, Any],
    *,
    where: dict[str, Any],
    using: str = DEFAULT_DB_ALIAS,
) -> int:
    """`model.objects.filter(**where).update(**values)` for plain columns compared for
    equality (no expressions, no joins): how many rows it changed. The statement is built
    once per set of column names; the values are prepared as the ORM prepares them."""
    sql, params = update_statement(model, values, where=where, using=using)
    with prepared_cursor(connections[using]) as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount
