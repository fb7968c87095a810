"""Admins' writes: event sources and trigger rules, validated here and nowhere else."""

import re
from typing import Any

from django.db import IntegrityError, transaction

from core import actors
from core.actors import Actor
from core.exceptions import Conflict, InvalidInput, NotFound
from core.limits import (
    MAX_CONDITIONS,
    MAX_EVENT_TYPE_LENGTH,
    MAX_SOURCE_NAME_LENGTH,
    MAX_TTL_SECONDS,
    MAX_WEBHOOK_SECRET_LENGTH,
)
from triggers.expressions import check_expression, check_template
from triggers.models import (
    EventSource,
    SourceKind,
    TriggerAction,
    TriggerRule,
    new_source_secret,
)
from triggers.selection import selector_problem

NAME = re.compile(r"^[a-z0-9]+(?:[-_][a-z0-9]+)*$")
TEMPLATES = {
    TriggerAction.RELEASE: ("feedback",),
    TriggerAction.CANCEL: ("reason",),
    TriggerAction.CREATE: ("question", "title", "expert", "breakpointId", "agentId", "runId"),
    TriggerAction.FORWARD: (),
}


def require_admin(actor: Actor) -> None:
    actors.require_admin(actor, "Only admins manage event sources and trigger rules.")


def _raise_if(errors: dict[str, list[str]]) -> None:
    if errors:
        first, messages = next(iter(errors.items()))
        raise InvalidInput(f"{first}: {messages[0]}", errors)


def _name_problem(name: Any) -> str | None:
    if not isinstance(name, str) or not NAME.fullmatch(name) or len(name) > MAX_SOURCE_NAME_LENGTH:
        return f"Lowercase letters, digits, - and _ (a slug), at most {MAX_SOURCE_NAME_LENGTH}."
    return None


def source_add(*, actor: Actor, name: Any, kind: Any, secret: Any = None) -> EventSource:
    """A new event source; its secret is generated unless given (then shown once)."""
    require_admin(actor)
    errors: dict[str, list[str]] = {}
    if problem := _name_problem(name):
        errors["name"] = [problem]
    if kind not in SourceKind.values:
        errors["kind"] = [f"Must be one of: {', '.join(SourceKind.values)}."]
    if secret is not None and not (
        isinstance(secret, str) and 16 <= len(secret) <= MAX_WEBHOOK_SECRET_LENGTH
    ):
        errors["secret"] = [f"16 to {MAX_WEBHOOK_SECRET_LENGTH} characters."]
    _raise_if(errors)
    fields = {
        "name": name,
        "kind": kind,
        "created_by": actor.name,
        "secret": secret or new_source_secret(kind),
    }
    try:
        with transaction.atomic():
            return EventSource.objects.create(**fields)
    except IntegrityError:
        raise Conflict(f"A source named {name!r} exists.", {"name": ["Taken."]}) from None


def source_set_enabled(*, actor: Actor, name: str, enabled: bool) -> EventSource:
    """Pause or resume a source (a paused one answers 404, as an unknown one does)."""
    require_admin(actor)
    if not EventSource.objects.filter(name=name).update(enabled=bool(enabled)):
        raise NotFound(f"No event source named {name!r}.")
    return EventSource.objects.get(name=name)


def _params_problems(action: str, params: Any) -> dict[str, list[str]]:
    if not isinstance(params, dict):
        return {"params": ["Must be an object."]}
    errors: dict[str, list[str]] = {}
    if action in (TriggerAction.RELEASE, TriggerAction.CANCEL):
        if problem := selector_problem(params.get("selector")):
            errors["params.selector"] = [problem]
        if action == TriggerAction.RELEASE and not isinstance(params.get("approved", True), bool):
            errors["params.approved"] = ["Must be true or false."]
    for key in TEMPLATES[TriggerAction(action)]:
        if key in params and (problem := check_template(params[key])):
            errors[f"params.{key}"] = [problem]
    if action == TriggerAction.CREATE:
        if not params.get("question"):
            errors["params.question"] = ["A create rule needs a question (a template)."]
        tags = params.get("tags", [])
        if not isinstance(tags, list) or any(check_template(tag) for tag in tags):
            errors["params.tags"] = ["Must be a list of templates."]
        ttl = params.get("ttlSeconds")
        if ttl is not None and not (isinstance(ttl, int) and 1 <= ttl <= MAX_TTL_SECONDS):
            errors["params.ttlSeconds"] = [f"A whole number from 1 to {MAX_TTL_SECONDS}."]
    return errors


def rule_add(
    *,
    actor: Actor,
    name: Any,
    action: Any,
    source: Any = None,
    event_type: Any = "*",
    conditions: Any = (),
    params: Any = None,
) -> TriggerRule:
    """A new trigger rule, owned (and acting with the permissions of) the admin adding it."""
    require_admin(actor)
    errors: dict[str, list[str]] = {}
    if problem := _name_problem(name):
        errors["name"] = [problem]
    if action not in TriggerAction.values:
        errors["action"] = [f"Must be one of: {', '.join(TriggerAction.values)}."]
    if not isinstance(event_type, str) or not 1 <= len(event_type) <= MAX_EVENT_TYPE_LENGTH:
        errors["eventType"] = [f"A type or glob (* for any), at most {MAX_EVENT_TYPE_LENGTH}."]
    conditions = list(conditions) if isinstance(conditions, list | tuple) else None
    if conditions is None or len(conditions) > MAX_CONDITIONS:
        errors["conditions"] = [f"A list of at most {MAX_CONDITIONS} JMESPath expressions."]
    else:
        for index, expression in enumerate(conditions):
            if problem := check_expression(expression):
                errors[f"conditions[{index}]"] = [problem]
    found = EventSource.objects.filter(name=source).first() if source else None
    if source and found is None:
        errors["source"] = [f"No event source named {source!r}."]
    if action in TriggerAction.values:
        errors.update(_params_problems(action, {} if params is None else params))
    _raise_if(errors)
    try:
        with transaction.atomic():
            return TriggerRule.objects.create(
                name=name,
                source=found,
                event_type=event_type,
                conditions=conditions,
                action=action,
                params=params or {},
                owner=actor.user,
            )
    except IntegrityError:
        raise Conflict(f"A rule named {name!r} exists.", {"name": ["Taken."]}) from None


def rule_remove(*, actor: Actor, name: str) -> None:
    require_admin(actor)
    deleted, _ = TriggerRule.objects.filter(name=name).delete()
    if not deleted:
        raise NotFound(f"No trigger rule named {name!r}.")
