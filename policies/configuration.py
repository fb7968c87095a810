"""The configuration every write reads, copied per process and kept true by a generation.

A create reads the notification routes, the auto-approval rules, the always-break-on tags
and the webhooks; a decision reads the webhooks. Admins change them now and then; agents
write all day: four of a create's ten round trips went to reading the same few rows again
(docs/benchmarks.md, the write paths).

So each of those reads is `Copied`: a process keeps what it read beside the configuration's
generation at that time, and uses it again only while the generation is the same.
`bpm_configuration_generation` holds that one number; a trigger on each configuration table
(`watch(table)`, in the migrations of the app that owns it) gives it a new value in every
statement that changes the table, inside that statement's transaction:

- another process sees the new generation exactly when it can see the change, so a copy is
  never used past the commit of a change (nor before it);
- the generation and the rows of every copy that is not at it are read in ONE statement
  (its one snapshot), so a copy is labelled with exactly the generation of its rows;
- a value is never used twice: a sequence on PostgreSQL (not rolled back), a 64-bit random
  number on SQLite, so a rolled-back change (a test's transaction) cannot leave a copy that
  a later, different change would match.

That statement costs one query whatever changed (a UNION of the generation and each stale
copy's own read); inside `reading()` (a create's and a decision's transaction) it is sent
once for all the block's copied reads, and `read_with` sends it with a write's first read
(a decision's locked row).
"""

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from threading import Lock
from typing import Any, Generic, TypeVar

from django.db import DEFAULT_DB_ALIAS, connections, migrations

from infra.db.prepared import Prepared, read_cursor
from policies.models.generation import ConfigurationGeneration

T = TypeVar("T")

TABLE = ConfigurationGeneration._meta.db_table
_SEQUENCE = f"{TABLE}_seq"
_FUNCTION = "bpm_configuration_changed"

# Inside reading(): the generation the block's first copied read found (None: not yet).
_generation_read: ContextVar[list[int | None] | None] = ContextVar(
    "configuration_generation", default=None
)


@contextmanager
def reading() -> Iterator[None]:
    """A block whose copied reads share one read of the configuration: for a block that
    changes no configuration itself (a create, a decision)."""
    token = _generation_read.set([None])
    try:
        yield
    finally:
        _generation_read.reset(token)


class Copied(Generic[T]):
    """A read of the configuration (a Prepared read that takes no values), `shaped` by a
    function of its result, read again only after the configuration changed.

    What `get()` returns is shared by every thread of the process: its callers read it and
    change nothing in it.
    """

    def __init__(self, read: Prepared[Any], shaped: Callable[[list[Any]], T] = list):  # type: ignore[assignment]
        self.read = read
        self.shaped = shaped
        self.held: tuple[int, T] | None = None  # (the generation it was read at, the value)
        with _copies_lock:
            _copies.append(self)

    def get(self) -> T:
        current = generation()
        held = self.held
        if held is not None and current is not None and held[0] == current:
            return held[1]
        # No generation to check a copy against, or this copy was made after the statement
        # that refreshes them was built (it is built again for the next read).
        return self.shaped(self.read.all())

    def keep(self, generation: int, rows: list[Any]) -> None:
        self.held = (generation, self.shaped(self.read.results(rows)))


_copies: list[Copied[Any]] = []
_copies_lock = Lock()


def generation() -> int | None:
    """The configuration's generation now, every copy read again that was read at another
    (None without the generation's row: nothing is then copied). One query, whatever
    changed; within reading(), one for the block."""
    shared = _generation_read.get()
    if shared is not None and shared[0] is not None:
        return shared[0]
    current, _ = _refreshed(None, ())
    if shared is not None:
        shared[0] = current
    return current


def read_with(read: Prepared[Any], *values: Any) -> list[Any]:
    """What `read` gives with these values (instances or rows). As a reading() block's first
    read, in the same statement as the configuration (generation() and the copies): a
    write's first read and its configuration in one round trip, and the block's copied reads
    then use that generation. Later in the block, or outside one, alone. `read` may lock its
    rows (FOR UPDATE)."""
    shared = _generation_read.get()
    if shared is None or shared[0] is not None:
        return read.all(*values)
    shared[0], rows = _refreshed(read, values)
    return read.results(rows)


@dataclass(frozen=True)
class _Refresh:
    """One statement: the generation, the rows of each copy read at another one, and the
    rows of a read sent along."""

    sql: str
    params: tuple[tuple[Any, ...], ...]  # per copy, its own; its held generation goes after
    copies: tuple[Copied[Any], ...]
    widths: tuple[int, ...]  # columns per copy, then the read sent along's


_refreshes: dict[tuple[str, str, int, Prepared[Any] | None], _Refresh] = {}


def _refreshed(
    along: Prepared[Any] | None, values: tuple[Any, ...], using: str = DEFAULT_DB_ALIAS
) -> tuple[int | None, list[Any]]:
    """The generation after the copies were refreshed, and the rows of `along`."""
    refresh = _refresh_statement(using, along, values)
    # The generation each copy held when the statement was sent: the statement gives a
    # copy's rows exactly when the generation is not that one (another thread may change
    # what a copy holds meanwhile).
    sent = [None if copy.held is None else copy.held[0] for copy in refresh.copies]
    params: list[Any] = []
    for position, generation_held in enumerate(sent):
        params += [*refresh.params[position], generation_held]
    if along is not None:
        params += along.statement(*values, using=using)[1]
    with read_cursor(using) as cursor:
        cursor.execute(refresh.sql, params)
        rows = cursor.fetchall()
    current = None
    read: dict[int, list[Any]] = {}
    offsets = [2 + sum(refresh.widths[:n]) for n in range(len(refresh.widths))]
    for row in rows:
        branch = row[0]
        if branch == 0:
            current = row[1]
            continue
        start = offsets[branch - 1]
        read.setdefault(branch - 1, []).append(row[start : start + refresh.widths[branch - 1]])
    if current is not None:
        for position, copy in enumerate(refresh.copies):
            if sent[position] != current:  # its rows came with the statement
                copy.keep(current, read.get(position, []))
    return current, read.get(len(refresh.copies), [])


def _refresh_statement(
    using: str, along: Prepared[Any] | None, values: tuple[Any, ...]
) -> _Refresh:
    """SELECT 0, n, NULL... FROM the generation UNION ALL, per copy k, SELECT k, NULL...,
    its rows..., NULL... FROM (its read) WHERE the generation is not the one its copy holds
    [UNION ALL SELECT k + 1, NULL..., the rows of the read sent along]: one round trip,
    whatever changed; every part reads the same snapshot."""
    connection = connections[using]
    copies = tuple(_copies)
    key = (using, connection.vendor, len(copies), along)
    refresh = _refreshes.get(key)
    if refresh is not None:
        return refresh
    parts = [copy.read.statement(using=using) for copy in copies]
    if along is not None:
        parts.append(along.statement(*values, using=using))
    widths = tuple(len(types) for _, _, types in parts)
    total = sum(widths)
    postgresql = connection.vendor == "postgresql"
    # The first part's NULLs carry each column's type: PostgreSQL resolves a UNION's column
    # types part by part, and two untyped NULLs would make a column text.
    nulls = [f"NULL::{kind}" if postgresql else "NULL" for _, _, types in parts for kind in types]
    differs = "IS DISTINCT FROM" if postgresql else "IS NOT"
    current = f"(SELECT n FROM {TABLE} WHERE id = 1)"
    branches = [f"SELECT 0, n{''.join(', ' + null for null in nulls)} FROM {TABLE} WHERE id = 1"]
    for position, (sql, _, types) in enumerate(parts):
        before = sum(widths[:position])
        after = total - before - len(types)
        copied = position < len(copies)
        branches.append(
            f"SELECT {position + 1}, NULL{', NULL' * before}, part.*{', NULL' * after} "
            f"FROM ({sql}) part" + (f" WHERE {current} {differs} %s" if copied else "")
        )
    refresh = _refreshes[key] = _Refresh(
        sql=" UNION ALL ".join(branches),
        params=tuple(tuple(params) for _, params, _ in parts[: len(copies)]),
        copies=copies,
        widths=widths,
    )
    return refresh


# --- the migrations' side -----------------------------------------------------------------


def generation_create() -> migrations.RunPython:
    """The migration operation making the generation's table, its row, and (PostgreSQL) the
    sequence and the function the triggers run."""
    return migrations.RunPython(_generation_create, _generation_drop, elidable=False)


def watch(table: str, *, updates_of: tuple[str, ...] = ()) -> migrations.RunPython:
    """The migration operation making every change to `table` move the generation.

    `updates_of`: only an UPDATE that sets one of these columns moves it (inserts and
    deletes always do): a table written all day in columns no copy reads (a grant's uses
    left) must not make every process read its configuration again at each write.

    On SQLite, a migration that alters `table` may rebuild it without its triggers:
    tests/policies/test_configuration.py checks that every watched table still has them.
    """

    def forwards(apps: Any, schema_editor: Any) -> None:
        for statement in _watch_sql(schema_editor.connection.vendor, table, updates_of):
            schema_editor.execute(statement)

    def backwards(apps: Any, schema_editor: Any) -> None:
        for statement in _unwatch_sql(schema_editor.connection.vendor, table):
            schema_editor.execute(statement)

    return migrations.RunPython(forwards, backwards, elidable=False)


def _generation_create(apps: Any, schema_editor: Any) -> None:
    table = f"CREATE TABLE {TABLE} (id smallint PRIMARY KEY CHECK (id = 1), n bigint NOT NULL)"
    if schema_editor.connection.vendor != "postgresql":
        schema_editor.execute(table)
        schema_editor.execute(f"INSERT INTO {TABLE} (id, n) VALUES (1, random())")
        return
    schema_editor.execute(f"CREATE SEQUENCE {_SEQUENCE}")
    schema_editor.execute(table)
    schema_editor.execute(f"INSERT INTO {TABLE} (id, n) VALUES (1, nextval('{_SEQUENCE}'))")
    schema_editor.execute(
        f"CREATE FUNCTION {_FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        f"UPDATE {TABLE} SET n = nextval('{_SEQUENCE}') WHERE id = 1; RETURN NULL; END $$"
    )


def _generation_drop(apps: Any, schema_editor: Any) -> None:
    schema_editor.execute(f"DROP TABLE {TABLE}")
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"DROP FUNCTION {_FUNCTION}()")
        schema_editor.execute(f"DROP SEQUENCE {_SEQUENCE}")


_SQLITE_EVENTS = ("INSERT", "UPDATE", "DELETE")


def trigger_names(vendor: str, table: str) -> list[str]:
    """The triggers watch(table) makes."""
    if vendor == "postgresql":
        return [_FUNCTION]
    return [f"{_FUNCTION}_{table}_{event.lower()}" for event in _SQLITE_EVENTS]


def _watch_sql(vendor: str, table: str, updates_of: tuple[str, ...] = ()) -> list[str]:
    update = f"UPDATE OF {', '.join(updates_of)}" if updates_of else "UPDATE"
    if vendor == "postgresql":
        # Once per statement (TRUNCATE included: a test database's flush).
        return [
            f"CREATE TRIGGER {_FUNCTION} AFTER INSERT OR {update} OR DELETE OR TRUNCATE "
            f"ON {table} FOR EACH STATEMENT EXECUTE FUNCTION {_FUNCTION}()"
        ]
    events = [update if event == "UPDATE" else event for event in _SQLITE_EVENTS]
    return [
        f"CREATE TRIGGER {name} AFTER {event} ON {table} BEGIN "
        f"UPDATE {TABLE} SET n = random() WHERE id = 1; END"
        for name, event in zip(trigger_names(vendor, table), events, strict=True)
    ]


def _unwatch_sql(vendor: str, table: str) -> list[str]:
    if vendor == "postgresql":
        return [f"DROP TRIGGER {_FUNCTION} ON {table}"]
    return [f"DROP TRIGGER {name}" for name in trigger_names(vendor, table)]
