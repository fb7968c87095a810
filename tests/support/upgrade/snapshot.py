"""What a database holds and how the code reads it: the same JSON before and after an upgrade.

Run by tests/live/test_upgrade.py in a subprocess, once with the base commit's code and
once with the code under test (`python -c "import django; django.setup(); import
snapshot; snapshot.main(...)"`). It imports nothing of the project: only Django, the app
registry and HTTP through django.test.Client, so the one script reads both versions.

The tables are counted and the moved tables' rows read before any request is made; the
console session is logged out at the end, so a snapshot leaves the database as it found
it (bar a token's coarse last-used time).
"""

import json
import sys
from pathlib import Path
from typing import Any

from django.apps import apps
from django.contrib import admin
from django.contrib.admin.models import LogEntry
from django.contrib.admin.utils import quote
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import ObjectDoesNotExist
from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection, models
from django.test import Client
from django.test.utils import override_settings
from django.urls import NoReverseMatch, reverse


def label_of(model: type[models.Model] | None) -> str | None:
    """ "app_label.ModelName" of a model class, None for none."""
    return None if model is None else f"{model._meta.app_label}.{model.__name__}"


def table_counts() -> dict[str, int]:
    with connection.cursor() as cursor:
        counts = {}
        for table in sorted(connection.introspection.table_names(cursor)):
            cursor.execute(f"SELECT COUNT(*) FROM {connection.ops.quote_name(table)}")
            counts[table] = cursor.fetchone()[0]
    return counts


def model_rows(tables: list[str]) -> dict[str, Any]:
    """Each table's rows as the installed model that owns it reads them, every field."""
    owners = {model._meta.db_table: model for model in apps.get_models()}
    return {
        table: {
            "model": label_of(owners.get(table)),
            "rows": list(owners[table]._default_manager.order_by("pk").values())
            if table in owners
            else None,
        }
        for table in tables
    }


def grants() -> dict[str, list[list[str]]]:
    """Every permission held by a user or a group: [holder, app_label, codename]."""
    user_grants = get_user_model().user_permissions.through.objects.values_list(
        "user__username", "permission__content_type__app_label", "permission__codename"
    )
    group_grants = Group.permissions.through.objects.values_list(
        "group__name", "permission__content_type__app_label", "permission__codename"
    )
    return {
        "users": sorted(map(list, user_grants)),
        "groups": sorted(map(list, group_grants)),
        "permissions": sorted(
            map(list, Permission.objects.values_list("content_type__app_label", "codename"))
        ),
    }


def _edited_pk(entry: LogEntry) -> str | None:
    try:
        return str(entry.get_edited_object().pk)
    except (ObjectDoesNotExist, AttributeError):  # gone, or no model class any more
        return None


def _model_of(entry: LogEntry) -> type[models.Model] | None:
    return None if entry.content_type is None else entry.content_type.model_class()


def log_entries() -> list[dict[str, Any]]:
    return [
        {
            "id": entry.pk,
            "content_type": None
            if entry.content_type is None
            else [entry.content_type.app_label, entry.content_type.model],
            "model_class": label_of(_model_of(entry)),
            "object_id": entry.object_id,
            "object_repr": entry.object_repr,
            "change_message": entry.change_message,
            "edited_pk": _edited_pk(entry),
        }
        for entry in LogEntry.objects.select_related("content_type").order_by("pk")
    ]


def content_types() -> list[list[Any]]:
    return [
        [ct.pk, ct.app_label, ct.model, label_of(ct.model_class())]
        for ct in ContentType.objects.order_by("pk")
    ]


def api_answers(plan: dict[str, Any]) -> list[dict[str, Any]]:
    answers = []
    for token_name, path in plan["requests"]:
        bearer = f"Bearer {plan['tokens'][token_name]}"
        response = Client().get(path, HTTP_AUTHORIZATION=bearer)
        body = response.json() if response["Content-Type"] == "application/json" else None
        answers.append(
            {"token": token_name, "path": path, "status": response.status_code, "body": body}
        )
    return answers


def _console_page(client: Client, entry: LogEntry, view: str, *args: str) -> tuple[int, str] | None:
    """The status and text of the console's `view` page of the entry's model (None: no
    model, or not in the console)."""
    model = _model_of(entry)
    if model is None or not admin.site.is_registered(model):
        return None
    meta = model._meta
    try:
        url = reverse(f"admin:{meta.app_label}_{meta.model_name}_{view}", args=args)
    except NoReverseMatch:
        return None
    response = client.get(url)
    return response.status_code, response.content.decode()


def _console_answers(client: Client, entry: LogEntry) -> dict[str, Any]:
    history = _console_page(client, entry, "history", quote(entry.object_id or ""))
    changelist = _console_page(client, entry, "changelist")
    if history is None or changelist is None:
        return {"log_entry": entry.pk, "in_console": False}
    return {
        "log_entry": entry.pk,
        "in_console": True,
        "history": history[0],
        "history_lists_entry": entry.change_message in history[1],
        "changelist": changelist[0],
    }


def console_pages(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """Per admin history entry, as the plan's console user: its object's history page
    (does it list the entry?) and its model's list page."""
    client = Client()
    # axes records console logins: this one is the test's, and must leave no row.
    with override_settings(AXES_ENABLED=False):
        client.force_login(get_user_model().objects.get_by_natural_key(plan["console_user"]))
    entries = LogEntry.objects.select_related("content_type").order_by("pk")
    pages = [_console_answers(client, entry) for entry in entries]
    with override_settings(AXES_ENABLED=False):
        client.logout()
    return pages


def main(moves_path: str, plan_path: str, out_path: str) -> None:
    moves = json.loads(Path(moves_path).read_text())
    plan = json.loads(Path(plan_path).read_text())
    snapshot = {
        "tables": table_counts(),
        "rows": model_rows(sorted({move[4] for move in moves})),
        "grants": grants(),
        "log_entries": log_entries(),
        "content_types": content_types(),
        "api": api_answers(plan),
        "decision_link": Client().get(plan["decision_link"]).status_code,
        "console": console_pages(plan),
    }
    Path(out_path).write_text(json.dumps(snapshot, indent=1, cls=DjangoJSONEncoder))


if __name__ == "__main__":
    main(*sys.argv[1:])
