"""Upgrading across the model moves loses nothing (issue 20).

A database is migrated and filled by the code of the commit before the moves, then
migrated forward and read by the code under test: every row, permission grant and
admin history entry is still there, and the API and the console answer as before.

The moves are written once, as data (MOVES). A move that has not landed yet leaves its
model where it was: each expectation names the new place only when the code under test
has the model there, so the test holds before, during and after the moves.
"""

import json
import os
from dataclasses import dataclass
from typing import Any, NamedTuple

import pytest
from django.apps import apps

from tests.support.upgrade import (
    ROOT,
    Tree,
    UpgradeSetupError,
    commit_hash,
    export_tree,
    read_json,
    scratch_database,
)

pytestmark = pytest.mark.slow

BASE_COMMIT = "9fe555a"  # the last commit before the models moved between apps


class Move(NamedTuple):
    """A model moved to another app (state only: its table keeps its name)."""

    old_label: str
    old_model: str
    new_label: str
    new_model: str
    table: str

    def installed(self) -> tuple[str, str]:
        """(app_label, ModelName) of the model as the code under test has it."""
        try:
            apps.get_model(self.new_label, self.new_model)
        except LookupError:
            return self.old_label, self.old_model
        return self.new_label, self.new_model

    def installed_class(self) -> str:
        return ".".join(self.installed())


MOVES = [
    Move("breakpoints", "ApiToken", "accounts", "ApiToken", "breakpoints_apitoken"),
    Move(
        "breakpoints",
        "AutoApprovalRule",
        "policies",
        "AutoApprovalRule",
        "breakpoints_autoapprovalrule",
    ),
    Move(
        "breakpoints",
        "AlwaysBreakOnTag",
        "policies",
        "AlwaysBreakOnTag",
        "breakpoints_alwaysbreakontag",
    ),
    Move(
        "breakpoints",
        "NotificationRoute",
        "policies",
        "NotificationRoute",
        "breakpoints_notificationroute",
    ),
    Move("breakpoints", "Webhook", "notifications", "Webhook", "breakpoints_webhook"),
    Move(
        "breakpoints",
        "WebhookDelivery",
        "notifications",
        "Delivery",
        "breakpoints_webhookdelivery",
    ),
    Move(
        "breakpoints",
        "DecisionLinkUse",
        "channels",
        "DecisionLinkUse",
        "breakpoints_decisionlinkuse",
    ),
    Move("reviews", "Feedback", "breakpoints", "Feedback", "reviews_feedback"),
]

# Tables written after every migrate as apps and models are added (Django's bookkeeping,
# and accounts.people.role_groups_sync granting admins each new permission): they
# may grow, never shrink. A grant lost or left on a stale name fails the grant tests.
GROWING_TABLES = {
    "django_migrations",
    "django_content_type",
    "auth_permission",
    "auth_group_permissions",
}
# Columns any authenticated request may write: a token's coarse last-used time.
WRITTEN_BY_REQUESTS = {"breakpoints_apitoken": {"last_used_at"}}


def move_of(app_label: str, model_name: str) -> Move | None:
    """The move of the model that was `app_label.model_name` (lowercase) at the base."""
    for move in MOVES:
        if (app_label, model_name) == (move.old_label, move.old_model.lower()):
            return move
    return None


@dataclass(frozen=True)
class Upgrade:
    before: dict[str, Any]  # snapshot.py's reading with the base commit's code, after the fill
    after: dict[str, Any]  # the same reading with the code under test, after its migrate


@pytest.fixture(scope="module")
def upgrade(tmp_path_factory) -> Upgrade:
    """Migrate and fill at BASE_COMMIT, snapshot; migrate with this tree, snapshot again."""
    scratch = tmp_path_factory.mktemp("upgrade")
    moves, plan = scratch / "moves.json", scratch / "plan.json"
    moves.write_text(json.dumps([list(move) for move in MOVES]))
    try:
        base = export_tree(commit_hash(BASE_COMMIT), scratch / "base")
        with scratch_database(os.environ.get("DATABASE_URL", ""), scratch) as database_url:
            old = Tree(base, database_url=database_url, scratch=scratch)
            old.migrate()
            old.script("fill", moves, plan)
            old.script("snapshot", moves, plan, scratch / "before.json")
            new = Tree(ROOT, database_url=database_url, scratch=scratch)
            new.migrate()
            new.script("snapshot", moves, plan, scratch / "after.json")
    except UpgradeSetupError as error:
        failure = str(error)
    else:
        return Upgrade(read_json(scratch / "before.json"), read_json(scratch / "after.json"))
    pytest.fail(failure, pytrace=False)  # outside `except`: the message alone, once


def test_the_base_reading_is_a_real_baseline(upgrade):
    """What the comparisons repeat worked at the base: every moved table has rows, every
    API read answered 200, every history entry resolved to its object and is listed on
    its object's console history page."""
    before = upgrade.before

    assert [move.table for move in MOVES if not before["rows"][move.table]["rows"]] == []
    assert [(a["token"], a["path"], a["status"]) for a in before["api"] if a["status"] != 200] == []
    entries = before["log_entries"]
    assert {move_of(*entry["content_type"]) for entry in entries} == set(MOVES)
    assert [entry for entry in entries if entry["edited_pk"] is None] == []
    pages = [page for page in before["console"] if page["in_console"]]
    assert len(pages) >= len(MOVES) - 1  # DecisionLinkUse has no console page
    assert all(page["history"] == page["changelist"] == 200 for page in pages), pages
    assert all(page["history_lists_entry"] for page in pages), pages


def test_every_table_keeps_its_rows(upgrade):
    before, after = upgrade.before["tables"], upgrade.after["tables"]

    assert sorted(set(before) - set(after)) == [], "tables dropped by the upgrade"
    changed = {
        table: (count, after[table])
        for table, count in before.items()
        if table not in GROWING_TABLES and after[table] != count
    }
    assert changed == {}, "row counts (before, after) that changed"
    assert {table: after[table] for table in GROWING_TABLES if after[table] < before[table]} == {}


def _rows_compared(
    table: str, rows: list[dict[str, Any]], columns: set[str]
) -> list[dict[str, Any]]:
    """The rows on the columns the base had (later migrations may add columns), without
    those requests write."""
    skipped = WRITTEN_BY_REQUESTS.get(table, set())
    return [
        {column: row[column] for column in sorted(columns - skipped) if column in row}
        for row in rows
    ]


def grown_from(before: Any, after: Any) -> bool:
    """`after` says everything `before` said: the same values, objects that may have gained
    keys (the contract only grows), lists of the same length read the same way."""
    if isinstance(before, dict):
        return isinstance(after, dict) and all(
            key in after and grown_from(value, after[key]) for key, value in before.items()
        )
    if isinstance(before, list):
        return (
            isinstance(after, list)
            and len(after) == len(before)
            and all(grown_from(b, a) for b, a in zip(before, after, strict=True))
        )
    return before == after


@pytest.mark.parametrize("move", MOVES, ids=lambda move: move.table)
def test_a_moved_table_reads_the_same_through_the_model_now_installed(upgrade, move):
    before, after = upgrade.before["rows"][move.table], upgrade.after["rows"][move.table]

    assert after["model"] == move.installed_class()
    columns = {column for row in before["rows"] for column in row}
    assert _rows_compared(move.table, after["rows"], columns) == _rows_compared(
        move.table, before["rows"], columns
    )


def test_the_api_answers_as_before(upgrade):
    before = {(a["token"], a["path"]): a for a in upgrade.before["api"]}
    after = {(a["token"], a["path"]): a for a in upgrade.after["api"]}

    assert list(after) == list(before)
    for request, answer in before.items():
        assert grown_from(answer, after[request]), (
            f"{request} answers differently after the upgrade"
        )


def test_the_tokens_minted_before_still_authenticate(upgrade):
    refused = [(a["token"], a["path"]) for a in upgrade.after["api"] if a["status"] in (401, 403)]
    assert refused == []


def test_a_used_decision_link_still_reads_as_used(upgrade):
    assert upgrade.after["decision_link"] == upgrade.before["decision_link"]


def _now_named(app_label: str, codename: str) -> tuple[str, str]:
    """A permission (app_label, codename) as the code under test names it."""
    action, _, model_name = codename.partition("_")
    move = move_of(app_label, model_name)
    if move is None:
        return app_label, codename
    new_label, new_model = move.installed()
    return new_label, f"{action}_{new_model.lower()}"


@pytest.mark.parametrize("holders", ["users", "groups", "permissions"])
def test_every_permission_grant_is_still_held(upgrade, holders):
    """Every grant to a user or group (by hand, and the role groups'), and every
    permission itself, is still there under the name the moved model now gives it."""

    def renamed(grant: list[str]) -> tuple[str, ...]:
        *holder, app_label, codename = grant
        return (*holder, *_now_named(app_label, codename))

    before = {renamed(grant) for grant in upgrade.before["grants"][holders]}
    after = {tuple(grant) for grant in upgrade.after["grants"][holders]}

    assert sorted(before - after) == []


def test_every_admin_history_entry_still_resolves_to_its_object(upgrade):
    after = {entry["id"]: entry for entry in upgrade.after["log_entries"]}

    for entry in upgrade.before["log_entries"]:
        move = move_of(*entry["content_type"])
        now = after.pop(entry["id"])
        assert now["model_class"] == (move.installed_class() if move else entry["model_class"])
        assert now["edited_pk"] == entry["edited_pk"] is not None
        for kept in ("object_id", "object_repr", "change_message"):
            assert now[kept] == entry[kept]
    assert after == {}, "history entries that appeared"


def test_no_content_type_is_left_for_a_model_that_moved_away(upgrade):
    """A moved model has one content type, its own (the old row repointed, not a new one
    beside an orphan whose model_class() is None)."""
    after = upgrade.after["content_types"]
    stale_before = {(ct[1], ct[2]) for ct in upgrade.before["content_types"] if ct[3] is None}

    assert {(ct[1], ct[2]) for ct in after if ct[3] is None} - stale_before == set()
    for move in MOVES:
        label, model = move.installed()
        owners = [ct for ct in after if ct[3] == move.installed_class()]
        assert [(ct[1], ct[2]) for ct in owners] == [(label, model.lower())]


def test_the_console_answers_as_before(upgrade):
    """Per history entry: the object's history page still opens and lists it, and the
    model's list still opens, for the same admin."""
    assert upgrade.after["console"] == upgrade.before["console"]


def test_grown_from_accepts_additions_only():
    """The comparison the API check uses: new keys pass, a changed, dropped or added item fails."""
    before = {"a": 1, "items": [{"id": 1}], "nested": {"b": None}}

    assert grown_from(
        before, {"a": 1, "new": 2, "items": [{"id": 1, "x": 0}], "nested": {"b": None}}
    )
    assert not grown_from(before, {"a": 2, "items": [{"id": 1}], "nested": {"b": None}})
    assert not grown_from(before, {"items": [{"id": 1}], "nested": {"b": None}})
    assert not grown_from(before, {"a": 1, "items": [{"id": 1}, {"id": 2}], "nested": {"b": None}})
