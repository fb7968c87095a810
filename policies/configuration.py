"""The configuration every write reads, copied per process and kept true by a generation.

A create reads the notification routes, the auto-approval rules, the always-break-on tags
and the webhooks; a decision reads the webhooks. Admins change them now and then; agents
write all day: four of a create's ten round trips went to reading the same few rows again
(docs/benchmarks.md, issue 39).

So each of those reads is `Copied`: a process keeps what it read beside the configuration's
generation at that time, and uses it again only while the generation is the same.
`bpm_configuration_generation` holds that one number; a trigger on each configuration table
(`watch(table)`, in the migrations of the app that owns it) gives it a new value in every
statement that changes the table, inside that statement's transaction:

- another process sees the new generation exactly when it can see the change, so a copy is
  never used past the commit of a change (nor before it);
- the generation is read before the rows, so a copy is labelled with a generation at most
  as new as its rows: a change committed in between makes the next read miss, never hit;
- a value is never used twice: a sequence on PostgreSQL (not rolled back), a 64-bit random
  number on SQLite, so a rolled-back change (a test's transaction) cannot leave a copy that
  a later, different change would match.

Each copied read costs one small query for the generation; inside `reading()` (a create's
and a decision's transaction) the generation is read once for all of them.
"""

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Generic, TypeVar

from django.db import migrations

from core.prepared import Prepared
from policies.models.generation import ConfigurationGeneration

T = TypeVar("T")

TABLE = ConfigurationGeneration._meta.db_table
_SEQUENCE = f"{TABLE}_seq"
_FUNCTION = "bpm_configuration_changed"

_GENERATION = Prepared(
    lambda: ConfigurationGeneration.objects.filter(pk=1).values_list("n", flat=True)
)

# Inside reading(): the generation read by the block's first copied read (None: not yet).
_generation_read: ContextVar[list[int | None] | None] = ContextVar(
    "configuration_generation", default=None
)


@contextmanager
def reading() -> Iterator[None]:
    """A block whose copied reads share one read of the generation: for a block that changes
    no configuration itself (a create, a decision)."""
    token = _generation_read.set([None])
    try:
        yield
    finally:
        _generation_read.reset(token)


def generation() -> int | None:
    """The configuration's generation now (None without its row: nothing is then copied)."""
    shared = _generation_read.get()
    if shared is not None and shared[0] is not None:
        return shared[0]
    rows = _GENERATION.rows()
    current = rows[0] if rows else None
    if shared is not None:
        shared[0] = current
    return current


class Copied(Generic[T]):
    """`read()`'s result, read again only after the configuration changed.

    What `read()` returns is shared by every thread of the process: its callers read it and
    change nothing in it (a list of model instances is copied before it is filtered).
    """

    def __init__(self, read: Callable[[], T]):
        self._read = read
        self._held: tuple[int, T] | None = None

    def get(self) -> T:
        current = generation()
        held = self._held
        if held is not None and current is not None and held[0] == current:
            return held[1]
        value = self._read()
        if current is not None:
            self._held = (current, value)
        return value


# --- the migrations' side -----------------------------------------------------------------


def generation_create() -> migrations.RunPython:
    """The migration operation making the generation's table, its row, and (PostgreSQL) the
    sequence and the function the triggers run."""
    return migrations.RunPython(_generation_create, _generation_drop, elidable=False)


def watch(table: str) -> migrations.RunPython:
    """The migration operation making every change to `table` move the generation.

    On SQLite, a migration that alters `table` may rebuild it without its triggers:
    tests/policies/test_configuration.py checks that every watched table still has them.
    """

    def forwards(apps: Any, schema_editor: Any) -> None:
        for statement in _watch_sql(schema_editor.connection.vendor, table):
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


def _watch_sql(vendor: str, table: str) -> list[str]:
    if vendor == "postgresql":
        # Once per statement (TRUNCATE included: a test database's flush).
        return [
            f"CREATE TRIGGER {_FUNCTION} AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE "
            f"ON {table} FOR EACH STATEMENT EXECUTE FUNCTION {_FUNCTION}()"
        ]
    return [
        f"CREATE TRIGGER {name} AFTER {event} ON {table} BEGIN "
        f"UPDATE {TABLE} SET n = random() WHERE id = 1; END"
        for name, event in zip(trigger_names(vendor, table), _SQLITE_EVENTS, strict=True)
    ]


def _unwatch_sql(vendor: str, table: str) -> list[str]:
    if vendor == "postgresql":
        return [f"DROP TRIGGER {_FUNCTION} ON {table}"]
    return [f"DROP TRIGGER {name}" for name in trigger_names(vendor, table)]
