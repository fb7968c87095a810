"""infra.db.prepared: reads, inserts and updates whose SQL is built once give what the ORM gives."""

import psycopg
import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from audit.models import Event
from breakpoints.models import Breakpoint
from core.choices import Status
from infra.db.prepared import Prepared, insert, numbered, read_cursor, update_where
from infra.db.together import insert_and_read, insert_together, inserts_held, update_held
from tests.support.factories import BreakpointFactory
from tests.support.threads import ConnectionNotingLock, run_together

pytestmark = pytest.mark.django_db

BY_AGENT = Prepared(
    lambda agent: Breakpoint.objects.filter(agent_id=agent, status=Status.WAITING).order_by("id"),
    parameters=1,
)
PAYLOADS = Prepared(
    lambda agent: (
        Breakpoint.objects.filter(agent_id=agent).order_by("id").values_list("id", "payload")
    ),
    parameters=1,
)


def test_a_prepared_read_gives_the_orm_instances_with_each_call_values():
    first = BreakpointFactory(agent_id="a", payload={"n": 1.5, "list": [1, "x"]})
    BreakpointFactory(agent_id="b")
    BreakpointFactory(agent_id="a", status=Status.CANCELLED)

    found = BY_AGENT.instances("a")
    expected = list(Breakpoint.objects.filter(agent_id="a", status=Status.WAITING).order_by("id"))
    assert [bp.pk for bp in found] == [bp.pk for bp in expected] == [first.pk]
    assert found[0].payload == {"n": 1.5, "list": [1, "x"]}  # JSON converted as the ORM does
    assert found[0].created_at == expected[0].created_at and found[0].created_at.tzinfo
    assert found[0]._state.adding is False
    assert [bp.agent_id for bp in BY_AGENT.instances("b")] == ["b"]
    assert BY_AGENT.instances("nobody") == []


def test_rows_of_a_values_list_are_converted():
    bp = BreakpointFactory(agent_id="c", payload={"question": "q", "deep": {"k": [True]}})
    assert PAYLOADS.rows("c") == [(bp.pk, {"question": "q", "deep": {"k": [True]}})]


def test_the_statement_is_built_once_and_sent_as_one_query():
    BreakpointFactory(agent_id="d")
    read = Prepared(lambda agent: Breakpoint.objects.filter(agent_id=agent), parameters=1)
    calls = []
    original = read._compile

    def counting(using):
        calls.append(using)
        return original(using)

    read._compile = counting  # type: ignore[method-assign]
    with CaptureQueriesContext(connection) as queries:
        read.instances("d")
        read.instances("d")
    assert len(calls) == 1
    assert len(queries) == 2


def test_a_placeholder_the_sql_does_not_carry_is_refused():
    unused = Prepared(lambda agent: Breakpoint.objects.all(), parameters=1)
    with pytest.raises(ValueError, match="Placeholder 0"):
        unused.instances("x")
    with pytest.raises(TypeError, match="1 value"):
        BY_AGENT.instances()


def test_insert_sets_the_automatic_key_and_the_row_reads_back_the_same():
    bp = BreakpointFactory()
    events = insert(
        [
            Event(breakpoint_id=bp.pk, type="created", actor="agent:a", metadata={"k": [1, 2]}),
            Event(breakpoint_id=bp.pk, type="feedback", actor="bob", metadata={}),
        ]
    )
    assert all(isinstance(event.pk, int) for event in events)
    assert events[0].pk != events[1].pk
    stored = Event.objects.get(pk=events[0].pk)
    assert (stored.type, stored.actor, stored.metadata) == ("created", "agent:a", {"k": [1, 2]})
    assert stored.timestamp == events[0].timestamp  # auto_now_add filled by pre_save


def test_insert_of_a_breakpoint_sets_its_generated_columns_as_save_does():
    saved = BreakpointFactory.build(agent_id="e")
    saved.save(force_insert=True)
    inserted = BreakpointFactory.build(agent_id="e")
    insert([inserted])
    assert "person_decision" in inserted.__dict__  # set, not deferred (no query to read it)
    assert inserted.person_decision == saved.person_decision
    assert inserted.needs_person == saved.needs_person
    assert Breakpoint.objects.get(pk=inserted.pk).title == inserted.title


def test_insert_together_writes_each_group_and_sets_what_insert_sets():
    bp = BreakpointFactory.build(agent_id="f")
    events = [
        Event(breakpoint_id=bp.pk, type="created", actor="agent:f", metadata={"k": "v"}),
        Event(breakpoint_id=bp.pk, type="feedback", actor="bob", metadata={}),
    ]

    with CaptureQueriesContext(connection) as queries:
        insert_together([bp], events)

    assert len(queries) == (1 if connection.vendor == "postgresql" else 2)
    stored = Breakpoint.objects.get(pk=bp.pk)
    assert (stored.agent_id, stored.title) == ("f", bp.title)
    assert bp.person_decision == stored.person_decision  # a generated column, read back
    assert [event.pk for event in events] == list(
        Event.objects.filter(breakpoint_id=bp.pk).order_by("pk").values_list("pk", flat=True)
    )
    assert all(row._state.adding is False for row in [bp, *events])


def test_inserts_held_writes_nothing_until_the_block_ends_and_nothing_when_it_raises():
    bp = BreakpointFactory.build(agent_id="g")
    event = Event(breakpoint_id=bp.pk, type="created", actor="agent:g", metadata={})
    with CaptureQueriesContext(connection) as queries, inserts_held():
        insert([bp])
        insert([event])
        held = len(queries)
    postgresql = connection.vendor == "postgresql"
    assert (held, len(queries)) == ((0, 1) if postgresql else (2, 2))
    assert Event.objects.filter(breakpoint_id=bp.pk).count() == 1 and event.pk is not None

    failed = BreakpointFactory.build(agent_id="g")
    with pytest.raises(RuntimeError), inserts_held():
        insert([failed])
        raise RuntimeError("the write fails")
    assert Breakpoint.objects.filter(pk=failed.pk).exists() is not postgresql


def test_results_of_rows_read_elsewhere_are_the_querysets_in_its_order():
    newest_first = Prepared(lambda: Breakpoint.objects.filter(agent_id="h").order_by("-title"))
    for title in ["b", "c", "a"]:
        BreakpointFactory(agent_id="h", title=title, payload={"title": title})
    sql, params, types = newest_first.statement()
    with read_cursor() as cursor:
        cursor.execute(f"SELECT * FROM ({sql}) shuffled ORDER BY random()", params)
        rows = cursor.fetchall()

    found = newest_first.results(rows)
    assert [bp.title for bp in found] == ["c", "b", "a"]
    assert found == list(Breakpoint.objects.filter(agent_id="h").order_by("-title"))
    assert found[0].payload == {"title": "c"}
    assert len(types) == len(rows[0])


def test_insert_and_read_gives_the_read_as_after_the_insert():
    bp = BreakpointFactory()
    events_of = Prepared(
        lambda pk: Event.objects.filter(breakpoint_id=pk).order_by("-pk"), parameters=1
    )
    before = insert([Event(breakpoint_id=bp.pk, type="created", actor="a", metadata={})])[0]
    new = Event(breakpoint_id=bp.pk, type="feedback", actor="bob", metadata={"n": 1})

    with CaptureQueriesContext(connection) as queries:
        found = insert_and_read([new], events_of, bp.pk)

    assert len(queries) == (1 if connection.vendor == "postgresql" else 2)
    assert isinstance(new.pk, int) and new._state.adding is False
    assert [(event.pk, event.type) for event in found] == [
        (new.pk, "feedback"),
        (before.pk, "created"),
    ]
    assert found == list(Event.objects.filter(breakpoint_id=bp.pk).order_by("-pk"))
    assert found[0].metadata == {"n": 1}


def test_results_refuses_a_read_ordered_by_what_it_does_not_select():
    titles = Prepared(lambda: Breakpoint.objects.order_by("created_at").values_list("title"))
    with pytest.raises(ValueError, match="does not select"):
        titles.results([])


def test_update_where_changes_only_the_rows_matching_and_says_how_many():
    waiting, other = BreakpointFactory(), BreakpointFactory()
    now = timezone.now()
    result = {"approved": True, "big": 2**40}
    changed = update_where(
        Breakpoint,
        {"status": Status.RELEASED, "result": result, "released_at": now},
        where={"id": waiting.pk, "status": Status.WAITING},
    )
    assert changed == 1
    waiting.refresh_from_db()
    other.refresh_from_db()
    assert (waiting.status, waiting.result, waiting.released_at) == (Status.RELEASED, result, now)
    assert other.status == Status.WAITING
    again = update_where(
        Breakpoint, {"status": Status.CANCELLED}, where={"id": waiting.pk, "status": Status.WAITING}
    )
    assert again == 0  # no longer waiting: the conditional UPDATE changes nothing


def test_update_where_refuses_expressions_and_null_comparisons():
    from django.db.models import F

    bp = BreakpointFactory()
    with pytest.raises(TypeError, match="expressions"):
        update_where(Breakpoint, {"ttl_seconds": F("ttl_seconds")}, where={"id": bp.pk})
    with pytest.raises(TypeError, match="NULL"):
        update_where(Breakpoint, {"ttl_seconds": 5}, where={"run_id": None})


def _prepared_statements() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [row[0] for row in cursor.fetchall()]


@pytest.mark.postgres
def test_on_postgresql_the_statement_is_prepared_on_the_server_with_its_values_bound():
    BreakpointFactory(agent_id="it's", payload={"quote": "it's"})
    read = Prepared(
        lambda agent: Breakpoint.objects.filter(agent_id=agent).values_list("payload", flat=True),
        parameters=1,
    )
    with CaptureQueriesContext(connection) as queries:
        assert read.rows("it's") == [{"quote": "it's"}]
        assert read.rows("nobody") == []
    # One statement, prepared once for both calls: its text holds placeholders, not values.
    prepared = [sql for sql in _prepared_statements() if "breakpoints_breakpoint" in sql]
    assert len(prepared) == 1 and "$1" in prepared[0] and "it's" not in prepared[0]
    # The query log still shows each call's values in place (DEBUG, CaptureQueriesContext).
    assert "'it''s'" in queries[0]["sql"] and "'nobody'" in queries[1]["sql"]


def test_numbered_gives_postgresql_placeholders_and_keeps_a_doubled_percent_as_one():
    sql = "SELECT %s, x LIKE '%%' || %s || '%%' FROM t WHERE y = %s"
    assert numbered(sql) == "SELECT $1, x LIKE '%' || $2 || '%' FROM t WHERE y = $3"
    assert numbered("SELECT 1") == "SELECT 1"
    for wrong in ("SELECT %d", "SELECT %(name)s", "SELECT 5 % 2", "SELECT %"):
        with pytest.raises(psycopg.ProgrammingError):
            numbered(wrong)


@pytest.mark.postgres
def test_on_postgresql_a_long_statement_with_many_values_is_sent_numbered():
    # Past psycopg's own conversion cache (4 KiB, 50 values): each value in its place, a
    # percent sign kept, a value holding %s or $1 sent as a value.
    values = [f"v{n} %s $1 '" for n in range(120)]
    sql = "SELECT " + ", ".join(f"%s::text AS column_with_a_long_name_{n}" for n in range(120))
    sql += ", '100%%' AS percent"
    assert len(sql) > 4096
    with read_cursor() as cursor:
        cursor.execute(sql, values)
        row = cursor.fetchone()
    assert list(row) == [*values, "100%"]


@pytest.mark.postgres
def test_on_postgresql_the_connections_cursor_is_kept_for_the_next_statement_not_shared():
    with read_cursor() as first:
        kept = first.cursor
        with read_cursor() as nested:  # while the kept one is in use: a cursor of its own
            assert nested.cursor is not kept
            nested.execute("SELECT %s::int", [2])
            assert nested.fetchone() == (2,)
        assert nested.cursor.closed and not kept.closed
        first.execute("SELECT %s::int", [1])
        assert first.fetchone() == (1,)
    with read_cursor() as again:
        assert again.cursor is kept
        again.execute("SELECT %s::timestamptz", [timezone.now()])
        assert again.fetchone()[0].tzinfo is not None


@pytest.mark.postgres
def test_on_postgresql_an_insert_binds_its_json_on_the_server():
    tricky = {"text": "quote ' backslash \\ percent % dollar $1", "n": [1, 2.5, None]}
    bp = Breakpoint(agent_id="binds", title="t", key="k", question="q", payload=tricky)
    insert([bp])
    assert Breakpoint.objects.get(pk=bp.pk).payload == tricky
    assert any(sql.startswith("INSERT INTO") for sql in _prepared_statements())


class _Missed(Exception):
    pass


def _missed() -> None:
    raise _Missed


def test_update_held_outside_a_block_updates_at_once_and_calls_missed_when_nothing_changed():
    bp = BreakpointFactory(agent_id="held")
    waiting = {"id": bp.pk, "status": Status.WAITING}
    update_held(Breakpoint, {"status": Status.CANCELLED}, where=waiting, missed=_missed)
    assert Breakpoint.objects.get(pk=bp.pk).status == Status.CANCELLED
    with pytest.raises(_Missed):
        update_held(Breakpoint, {"status": Status.EXPIRED}, where=waiting, missed=_missed)
    assert Breakpoint.objects.get(pk=bp.pk).status == Status.CANCELLED


@pytest.mark.postgres
def test_on_postgresql_a_held_update_goes_in_the_blocks_one_statement_before_its_inserts():
    bp = BreakpointFactory(agent_id="held")
    called = []
    event = Event(breakpoint_id=bp.pk, type="feedback", actor="a", metadata={})
    with CaptureQueriesContext(connection) as queries, inserts_held():
        update_held(
            Breakpoint,
            {"status": Status.CANCELLED},
            where={"id": bp.pk, "status": Status.WAITING},
            missed=lambda: called.append(True),
        )
        insert([event])
        assert Breakpoint.objects.get(pk=bp.pk).status == Status.WAITING  # held until the end
    assert len(queries) == 2  # the read above, then the one statement
    assert queries[1]["sql"].startswith("WITH w0 AS (UPDATE")
    assert Breakpoint.objects.get(pk=bp.pk).status == Status.CANCELLED
    assert event.pk is not None and Event.objects.filter(pk=event.pk).exists()
    assert called == []


@pytest.mark.postgres
def test_on_postgresql_a_held_update_that_changed_nothing_calls_missed_after_the_statement():
    bp = BreakpointFactory(agent_id="held", status=Status.CANCELLED)
    event = Event(breakpoint_id=bp.pk, type="feedback", actor="a", metadata={})
    with pytest.raises(_Missed), transaction.atomic(), inserts_held():
        update_held(
            Breakpoint,
            {"status": Status.RELEASED},
            where={"id": bp.pk, "status": Status.WAITING},
            missed=_missed,
        )
        insert([event])
    # missed() raised in the transaction: the event written with it was rolled back.
    assert not Event.objects.filter(breakpoint_id=bp.pk, actor="a").exists()
    assert Breakpoint.objects.get(pk=bp.pk).status == Status.CANCELLED


@pytest.mark.django_db(transaction=True)
def test_a_first_compile_takes_its_lock_once_the_thread_holds_its_connection(monkeypatch):
    """Compiling may ask the server its version: with the lock held, a thread must not be
    left waiting for the pool (infra.db.locking)."""
    nobodys = Prepared(lambda: Breakpoint.objects.filter(agent_id="nobody"))
    noting = ConnectionNotingLock()
    monkeypatch.setattr(nobodys, "_lock", noting)

    got = run_together({"fresh thread": nobodys.instances})

    assert got == {"fresh thread": []}
    assert noting.connected == [True]
