"""The configuration every write reads, copied per process (policies.configuration): each
change to a watched table is seen by the very next write, on this connection and on others;
an unchanged configuration costs a create one query for the four reads."""

from contextlib import contextmanager

import psycopg
import pytest
from django.conf import settings
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from breakpoints.services import feedback_add
from core.actors import Actor
from notifications import outbox
from notifications.models import Delivery, Webhook
from notifications.subscriptions import webhook_add, webhook_remove
from policies import autoapproval, configuration
from policies.autoapproval import always_break_on_add, always_break_on_remove, rule_create
from policies.models import AlwaysBreakOnTag, AutoApprovalRule, NotificationRoute
from policies.routes import route_add
from tests.support.factories import AdminFactory

SYSTEM = Actor.system("test")
WATCHED = [NotificationRoute, AutoApprovalRule, AlwaysBreakOnTag, Webhook]
CONFIGURATION_TABLES = [model._meta.db_table for model in WATCHED]
PAYLOAD = {"question": "Ship it?", "breakpointId": "deploy.api", "tags": ["prod"]}


def create(make_breakpoint):
    return make_breakpoint(payload=PAYLOAD)


def test_every_watched_table_has_its_triggers(db):
    """A migration that rebuilds a table (SQLite alters by copying) would drop them."""
    vendor = connection.vendor
    with connection.cursor() as cursor:
        for table in CONFIGURATION_TABLES:
            if vendor == "postgresql":
                cursor.execute(
                    "SELECT tgname FROM pg_trigger WHERE tgrelid = %s::regclass AND NOT tgisinternal",
                    [table],
                )
            else:
                cursor.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = %s",
                    [table],
                )
            found = {row[0] for row in cursor.fetchall()}
            assert set(configuration.trigger_names(vendor, table)) <= found, table


@pytest.mark.parametrize("model", WATCHED, ids=lambda model: model.__name__)
def test_each_insert_update_and_delete_moves_the_generation(db, model):
    values = {
        NotificationRoute: {"name": "ops", "pattern": "deploy.*", "channels": []},
        AutoApprovalRule: {"pattern": "deploy.*"},
        AlwaysBreakOnTag: {"tag": "prod"},
        Webhook: {"url": "https://example.com/hook"},
    }[model]
    seen = [configuration.generation()]

    row = model.objects.create(**values)
    seen.append(configuration.generation())
    model.objects.filter(pk=row.pk).update(created_at=row.created_at)
    seen.append(configuration.generation())
    model.objects.filter(pk=row.pk).delete()
    seen.append(configuration.generation())

    assert None not in seen
    assert len(set(seen)) == 4


def configuration_queries(captured: CaptureQueriesContext) -> list[str]:
    return [
        query["sql"]
        for query in captured.captured_queries
        if any(f'"{table}"' in query["sql"] for table in CONFIGURATION_TABLES)
        or configuration.TABLE in query["sql"]
    ]


def test_a_create_reads_the_configuration_in_one_query_changed_or_not(db, make_breakpoint):
    webhook_add(url="https://example.com/hook")
    always_break_on_add(actor=SYSTEM, tag="audit")
    create(make_breakpoint)

    with CaptureQueriesContext(connection) as unchanged:
        create(make_breakpoint)
    rule_create(actor=SYSTEM, pattern="other.*")
    webhook_add(url="https://example.com/other")
    with CaptureQueriesContext(connection) as changed:
        create(make_breakpoint)

    assert len(configuration_queries(unchanged)) == 1
    assert len(configuration_queries(changed)) == 1
    assert len(changed) == len(unchanged)


def test_an_unchanged_configuration_is_not_read_again(db):
    webhooks = outbox._ACTIVE_WEBHOOKS
    first = webhooks.get()

    assert webhooks.get() is first
    hook = webhook_add(url="https://example.com/hook")
    again = webhooks.get()
    assert again is not first
    assert [webhook.pk for webhook in again] == [hook.pk]
    assert webhooks.get() is again


def test_the_copied_rules_keep_the_order_of_the_rule_list(db):
    for pattern in ["c.*", "a.*", "b.*"]:
        rule_create(actor=SYSTEM, pattern=pattern)
    rule_create(actor=SYSTEM, pattern="d.*", mode="shadow")

    assert autoapproval._EVERY_RULE.get() == list(autoapproval.rule_list_all())
    assert [rule.pattern for rule in autoapproval._EVERY_RULE.get()] == ["c.*", "a.*", "b.*", "d.*"]


def test_a_new_rule_decides_the_next_create(db, make_breakpoint):
    assert create(make_breakpoint).status == "waiting"

    rule_create(actor=SYSTEM, pattern="deploy.*")

    assert create(make_breakpoint).status == "released"


def test_a_new_always_break_on_tag_holds_the_next_create(db, make_breakpoint):
    rule_create(actor=SYSTEM, pattern="deploy.*")
    assert create(make_breakpoint).status == "released"

    always_break_on_add(actor=SYSTEM, tag="prod")
    assert create(make_breakpoint).status == "waiting"

    always_break_on_remove(actor=SYSTEM, tag="prod")
    assert create(make_breakpoint).status == "released"


def test_a_new_route_applies_its_defaults_to_the_next_create(db, make_breakpoint):
    assert create(make_breakpoint).on_timeout != "reject"

    route_add(
        actor=Actor.for_user(AdminFactory(username="route-admin")),
        name="ops",
        pattern="deploy.*",
        channels=[{"kind": "email", "to": ["ops@example.com"]}],
        defaults={"onTimeout": "reject"},
    )

    assert create(make_breakpoint).on_timeout == "reject"


def test_webhooks_added_and_removed_are_delivered_to_accordingly(db, make_breakpoint):
    create(make_breakpoint)
    hook = webhook_add(url="https://example.com/hook", event_types=["created"])

    first = create(make_breakpoint)
    webhook_remove(webhook_id=hook.pk)
    second = create(make_breakpoint)

    assert Delivery.objects.filter(breakpoint_id=first.pk, webhook=hook).count() == 1
    assert not Delivery.objects.filter(breakpoint_id=second.pk).exists()


def test_a_rolled_back_change_leaves_no_copy_a_later_change_could_match(db, make_breakpoint):
    """The copy read inside a rolled-back transaction is never used again: the generation
    it was read at is not given out twice."""
    with pytest.raises(RuntimeError), transaction.atomic():
        rule_create(actor=SYSTEM, pattern="deploy.*")
        assert create(make_breakpoint).status == "released"  # the copy holds the rule
        raise RuntimeError("rolled back")

    assert create(make_breakpoint).status == "waiting"
    always_break_on_add(actor=SYSTEM, tag="unrelated")
    assert create(make_breakpoint).status == "waiting"


def test_without_the_generation_row_every_read_goes_to_the_tables(db, make_breakpoint):
    configuration.ConfigurationGeneration.objects.all().delete()
    assert configuration.generation() is None
    create(make_breakpoint)

    webhooks = outbox._ACTIVE_WEBHOOKS

    assert webhooks.get() is not webhooks.get()  # read each time
    AutoApprovalRule.objects.create(pattern="deploy.*")  # the trigger has no row to move
    assert create(make_breakpoint).status == "released"


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_change_committed_by_another_connection_is_seen_by_the_next_create(make_breakpoint):
    """Another process (here a connection of its own) commits a rule: this process's copy,
    read before, is not used after that commit."""
    assert create(make_breakpoint).status == "waiting"
    database = settings.DATABASES["default"]
    with psycopg.connect(
        host=database["HOST"],
        port=database["PORT"],
        user=database["USER"],
        dbname=database["NAME"],
        autocommit=True,
    ) as other:
        other.execute(
            "INSERT INTO breakpoints_autoapprovalrule (id, pattern, action, mode, note, "
            "created_by, created_at) VALUES ('rule-0000beef', 'deploy.*', 'auto-approve', "
            "'live', '', 'other', now())"
        )

    assert create(make_breakpoint).status == "released"


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_truncating_a_watched_table_moves_the_generation(make_breakpoint):
    """A test database's flush truncates the tables: a copy must not outlive it."""
    rule_create(actor=SYSTEM, pattern="deploy.*")
    assert create(make_breakpoint).status == "released"
    before = configuration.generation()

    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE breakpoints_autoapprovalrule CASCADE")

    assert configuration.generation() != before
    assert create(make_breakpoint).status == "waiting"


def test_a_decision_reads_its_row_and_the_configuration_in_one_query(db, make_breakpoint):
    reviewer = Actor.for_user(AdminFactory(username="reviewer"))
    first, second = create(make_breakpoint), create(make_breakpoint)
    feedback_add(breakpoint_id=first.pk, actor=reviewer, comment="ok", release=True)

    with CaptureQueriesContext(connection) as captured:
        feedback_add(breakpoint_id=second.pk, actor=reviewer, comment="ok", release=True)

    [read] = configuration_queries(captured)
    assert second.pk in read  # the locked row came with it
    if connection.vendor == "postgresql":
        assert "FOR UPDATE" in read


def test_a_webhook_added_after_a_creation_hears_its_release(db, make_breakpoint):
    reviewer = Actor.for_user(AdminFactory(username="reviewer"))
    bp = create(make_breakpoint)
    hook = webhook_add(url="https://example.com/hook", event_types=["released"])

    feedback_add(breakpoint_id=bp.pk, actor=reviewer, comment="ok", release=True)

    assert Delivery.objects.filter(breakpoint_id=bp.pk, webhook=hook).count() == 1


def test_a_copy_another_thread_changes_meanwhile_is_not_emptied(db, monkeypatch):
    """The statement gives a copy's rows only when it was sent with another generation than
    the current one: what another thread stored in the copy meanwhile must not make this
    one keep no rows at the current generation."""
    hook = webhook_add(url="https://example.com/hook")
    webhooks = outbox._ACTIVE_WEBHOOKS
    assert [webhook.pk for webhook in webhooks.get()] == [hook.pk]
    sent_with = configuration.read_cursor

    @contextmanager
    def another_thread_meanwhile(using="default"):
        with sent_with(using) as cursor:
            yield cursor
        webhooks.held = (-1, [])  # another thread's copy, of another generation

    monkeypatch.setattr(configuration, "read_cursor", another_thread_meanwhile)
    configuration.generation()
    monkeypatch.undo()

    assert [webhook.pk for webhook in webhooks.get()] == [hook.pk]
