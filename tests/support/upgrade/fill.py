# ruff: noqa: I001 - the base commit's own import paths (this runs in the base tree)
"""Fill a database at the base commit with one of everything the model moves touch.

Run by tests/live/test_upgrade.py in a subprocess whose code is the base commit's tree
(`python -c "import django; django.setup(); import fill; fill.main(...)"`), so it may
use that commit's own services and models; it never runs against newer code.

Writes the plan that upgrade_snapshot reads: the raw tokens, the API requests to repeat,
the admin to open the console as, the decision link to open again.
"""

import json
import sys
from pathlib import Path
from typing import Any

from django.apps import apps
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth.models import Group, Permission, User
from django.contrib.contenttypes.models import ContentType
from django.db import models
from django.test import Client

from breakpoints.accounts import reviewer_create
from breakpoints.actors import Actor
from breakpoints.autoapproval import always_break_on_add, rule_create
from breakpoints.channels.email_links import decision_urls
from breakpoints.channels.routes import route_add
from breakpoints.services import breakpoint_create, feedback_add
from breakpoints.tokens import token_create_for_agent, token_create_for_user
from breakpoints.webhooks.subscriptions import webhook_add

AGENT_ID = "agent-upgrade"
PASSWORD = "upgrade-Passw0rd!"  # noqa: S105 - a throwaway database's test account
GRANTED = ("view", "change")  # what the hand-granted user holds on each moved model


def _people() -> dict[str, Any]:
    admin = reviewer_create(username="ada", password=PASSWORD, admin=True)
    reviewer = reviewer_create(username="rita", password=PASSWORD, groups=["database-experts"])
    granted = User.objects.create_user(username="grace", password=PASSWORD, is_staff=True)
    return {"admin": admin, "reviewer": reviewer, "granted": granted}


def _configuration(admin: Any) -> None:
    """A rule, an always-break-on tag, a route and a webhook subscription, as an admin."""
    actor = Actor.for_user(admin)
    rule_create(actor=actor, pattern="deploy.staging.*", note="staging deploys go alone")
    always_break_on_add(actor=actor, tag="production", note="never alone")
    route_add(
        actor=actor,
        name="database changes",
        pattern="migrate.*",
        channels=[{"kind": "email", "to": ["dba@example.com"]}],
    )
    webhook_add(url="https://hooks.example.com/bpm", event_types=[])


def _breakpoints(reviewer: Any) -> dict[str, str]:
    """One released by a reviewer, one decided through a mailed link, one waiting with a
    comment, one approved at birth by the rule. Returns their ids by name."""
    agent = Actor.for_agent(AGENT_ID)
    created = {
        name: breakpoint_create(actor=agent, payload=payload, tags=tags)[0]
        for name, payload, tags in [
            (
                "released",
                {"question": "Apply the migration?", "breakpointId": "migrate.db"},
                ["db"],
            ),
            ("linked", {"question": "Rotate the keys?", "breakpointId": "migrate.keys"}, []),
            ("waiting", {"question": "Ship it?", "breakpointId": "deploy.prod"}, ["production"]),
            ("auto", {"question": "Deploy to staging?", "breakpointId": "deploy.staging.web"}, []),
        ]
    }
    as_reviewer = Actor.for_user(reviewer)
    feedback_add(
        breakpoint_id=created["released"].pk, actor=as_reviewer, comment="Looks right.",
        release=True, approved=True,
    )  # fmt: skip
    feedback_add(breakpoint_id=created["waiting"].pk, actor=as_reviewer, comment="Which build?")
    return {name: bp.pk for name, bp in created.items()}


def _decide_by_link(breakpoint_id: str, reviewer: Any) -> str:
    """Approve through the mailed link (writes the DecisionLinkUse); return its path."""
    url = decision_urls(breakpoint_id, reviewer.pk)["approve"]
    path = "/" + url.split("://", 1)[1].split("/", 1)[1]
    answer = Client().post(path, {"decision": "approve", "comment": "From my inbox."})
    if answer.status_code != 200:
        raise RuntimeError(f"the decision link answered {answer.status_code}")
    return path


def _moved_model(old_label: str, old_model: str) -> type[models.Model]:
    model = apps.get_model(old_label, old_model)
    if not model._default_manager.exists():
        raise RuntimeError(f"the fill made no {old_label}.{old_model} row")
    return model


def _grants_and_history(moves: list[list[str]], admin: Any, granted: Any) -> None:
    """Hand grants (a user and a group) and an admin history entry on every moved model."""
    auditors = Group.objects.create(name="auditors")
    for old_label, old_model, *_ in moves:
        model = _moved_model(old_label, old_model)
        content_type = ContentType.objects.get_for_model(model)
        codenames = [f"{action}_{model._meta.model_name}" for action in GRANTED]
        permissions = Permission.objects.filter(content_type=content_type, codename__in=codenames)
        granted.user_permissions.add(*permissions)
        auditors.permissions.add(*permissions.filter(codename__startswith="view_"))
        obj = model._default_manager.earliest("pk")
        LogEntry.objects.create(
            user=admin,
            content_type=content_type,
            object_id=str(obj.pk),
            object_repr=str(obj)[:200],
            action_flag=CHANGE,
            change_message=f"upgrade check on {old_label} {old_model}",
        )
    granted.groups.add(auditors)


def _api_requests(ids: dict[str, str]) -> list[list[str]]:
    """(token name, path) of every API read to repeat after the upgrade."""
    detail = [f"/api/breakpoints/{bp_id}" for bp_id in ids.values()]
    events = [f"/api/breakpoints/{bp_id}/events" for bp_id in ids.values()]
    admin_lists = ["/api/rules", "/api/routes", "/api/triggers", "/api/event-sources"]
    return [
        *[["agent", path] for path in ["/api/breakpoints", *detail, *events]],
        *[["reviewer", path] for path in ["/api/breakpoints?status=waiting", *detail]],
        *[["admin", path] for path in ["/api/breakpoints", *admin_lists]],
    ]


def main(moves_path: str, plan_path: str) -> None:
    moves = json.loads(Path(moves_path).read_text())
    people = _people()
    _configuration(people["admin"])
    ids = _breakpoints(people["reviewer"])
    link_path = _decide_by_link(ids["linked"], people["reviewer"])
    tokens = {
        "agent": token_create_for_agent(agent_id=AGENT_ID, name="upgrade")[1],
        "reviewer": token_create_for_user(user=people["reviewer"], name="upgrade")[1],
        "admin": token_create_for_user(user=people["admin"], name="upgrade")[1],
    }
    _grants_and_history(moves, people["admin"], people["granted"])
    plan = {
        "tokens": tokens,
        "requests": _api_requests(ids),
        "console_user": people["admin"].get_username(),
        "decision_link": link_path,
    }
    Path(plan_path).write_text(json.dumps(plan, indent=2))


if __name__ == "__main__":
    main(*sys.argv[1:])
