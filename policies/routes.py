"""Notification routes: validated specs, the admin services, and the routes a breakpoint matches.

A route is a pattern in the rule pattern language and the channels its breakpoints are
announced on: specs of the channels in the registry (core.channels), each judged by its
channel. Only admins manage them.
"""

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from django.db import IntegrityError, transaction

from core import limits
from core.actors import Actor, require_admin
from core.channels import channel_provider, channel_providers, short_text
from core.exceptions import Conflict, InvalidInput, NotFound
from infra.db.prepared import Prepared
from policies.configuration import Copied
from policies.foureyes import timeout_approve_problem
from policies.models import NotificationRoute
from policies.patterns import PatternError, parse_pattern, stored_pattern
from policies.validators import check_prevent_self_review, check_timeout_policy

ROUTES_REFUSAL = "Only admins manage notification routes."
TIMEOUT_KEYS = ("onTimeout", "escalateAfterSeconds", "escalateTo", "remindEverySeconds")
# What a route may default for its breakpoints: the timeout policy, and four eyes.
DEFAULT_KEYS = (*TIMEOUT_KEYS, "preventSelfReview")


def spec_problem(spec: Any) -> str | None:
    """What is wrong with one channel spec, or None: its kind must be a channel's
    (core.channels), its keys that channel's, and the channel judges the rest."""
    channels = channel_providers()
    channel = channel_provider(spec.get("kind")) if isinstance(spec, dict) else None
    if channel is None:
        return f"Each channel is an object whose kind is one of: {', '.join(channels)}."
    extra = set(spec) - {"kind"} - set(channel.spec_keys)
    if extra:
        return f"A {spec['kind']} channel has no {', '.join(sorted(extra))}."
    return channel.spec_problem(spec)


TAKEN = "Already taken."
NO_NULL = "Must not be null: leave the key out instead."


def route_problems(
    *, name: Any, pattern: Any, channels: Any, defaults: Any, route_id: int | None = None
) -> dict[str, list[str]]:
    """Every problem with a route's fields, keyed by field ("name", "pattern",
    "channels[1]", "defaults.onTimeout"), a name another route holds included. The one
    validator of routes: the API and the console both ask it (through route_add and
    route_update, or this to name every problem at once)."""
    return _checked(
        name=name, pattern=pattern, channels=channels, defaults=defaults, route_id=route_id
    )[2]


def _checked(
    *, name: Any, pattern: Any, channels: Any, defaults: Any, route_id: int | None
) -> tuple[str | None, dict, dict[str, list[str]]]:
    """(the canonical pattern, the defaults without nulls, every problem by field)."""
    errors: dict[str, list[str]] = {}
    if not short_text(name) or len(name) > limits.MAX_ROUTE_NAME_LENGTH:
        errors["name"] = [f"Must be 1 to {limits.MAX_ROUTE_NAME_LENGTH} characters."]
    elif _name_taken(name.strip(), route_id):
        errors["name"] = [TAKEN]
    try:
        canonical = str(parse_pattern(pattern)) if isinstance(pattern, str) else None
    except PatternError as exc:
        canonical, errors["pattern"] = None, [str(exc)]
    if canonical is None and "pattern" not in errors:
        errors["pattern"] = ["Must be a pattern, e.g. deploy.* or *(tags contains 'prod')."]
    if not isinstance(channels, list) or not 1 <= len(channels) <= limits.MAX_ROUTE_CHANNELS:
        errors["channels"] = [f"Must be a list of 1 to {limits.MAX_ROUTE_CHANNELS} channels."]
    else:
        for index, spec in enumerate(channels):
            problem = spec_problem(spec)
            if problem:
                errors[f"channels[{index}]"] = [problem]
    defaults = {} if defaults is None else defaults
    if not isinstance(defaults, dict) or set(defaults) - set(DEFAULT_KEYS):
        errors["defaults"] = [f"Must be an object with only: {', '.join(DEFAULT_KEYS)}."]
    else:
        for key in sorted(key for key, value in defaults.items() if value is None):
            # A stored null would hide the next matching route's value.
            errors[f"defaults.{key}"] = [NO_NULL]
        defaults = {key: value for key, value in defaults.items() if value is not None}
        check_timeout_policy(errors, defaults, prefix="defaults")
        check_prevent_self_review(errors, defaults, prefix="defaults")
        if "defaults.onTimeout" not in errors and (
            problem := timeout_approve_problem(defaults, four_eyes=False)
        ):
            errors["defaults.onTimeout"] = [problem]
    return canonical, defaults, errors


def _name_taken(name: str, route_id: int | None) -> bool:
    """Whether a route other than `route_id` holds `name`."""
    others = NotificationRoute.objects.filter(name=name)
    return (others.exclude(pk=route_id) if route_id is not None else others).exists()


def _validated(
    *, name: Any, pattern: Any, channels: Any, defaults: Any, route_id: int | None = None
) -> tuple[str, str, list[dict], dict]:
    """The route's fields, cleaned; raises with every problem at once (InvalidInput), or
    Conflict when a name another route holds is the only one."""
    canonical, defaults, errors = _checked(
        name=name, pattern=pattern, channels=channels, defaults=defaults, route_id=route_id
    )
    if errors == {"name": [TAKEN]}:
        raise _taken(name)
    if errors:
        first, messages = next(iter(errors.items()))
        raise InvalidInput(f"{first}: {messages[0]}", errors)
    return name.strip(), str(canonical), channels, defaults


def _taken(name: str) -> Conflict:
    return Conflict(f"A route named {name.strip()!r} exists already.", {"name": [TAKEN]})


@contextmanager
def _unique_name(name: str) -> Iterator[None]:
    """A write that collides with a route named meanwhile (after _validated looked): a 409,
    not a 500."""
    try:
        with transaction.atomic():
            yield
    except IntegrityError:
        raise _taken(name) from None


def route_add(
    *,
    actor: Actor,
    name: Any,
    pattern: Any,
    channels: Any,
    defaults: Any = None,
    enabled: bool = True,
) -> NotificationRoute:
    """A new route. Raises InvalidInput naming every problem (a bad name, pattern, spec or
    default, and a taken name among them), or Conflict when a taken name is the only one."""
    require_admin(actor, ROUTES_REFUSAL)
    name, pattern, channels, defaults = _validated(
        name=name, pattern=pattern, channels=channels, defaults=defaults
    )
    with _unique_name(name):
        return NotificationRoute.objects.create(
            name=name,
            pattern=pattern,
            channels=channels,
            defaults=defaults,
            enabled=bool(enabled),
            created_by=actor.name,
        )


def route_update(
    *,
    actor: Actor,
    route_id: int,
    name: Any,
    pattern: Any,
    channels: Any,
    defaults: Any = None,
    enabled: bool = True,
) -> NotificationRoute:
    """Replace a route's fields (validated as route_add)."""
    require_admin(actor, ROUTES_REFUSAL)
    name, pattern, channels, defaults = _validated(
        name=name, pattern=pattern, channels=channels, defaults=defaults, route_id=route_id
    )
    with _unique_name(name):
        updated = NotificationRoute.objects.filter(pk=route_id).update(
            name=name, pattern=pattern, channels=channels, defaults=defaults, enabled=bool(enabled)
        )
    if not updated:
        raise NotFound(f"No route with id {route_id}.")
    return NotificationRoute.objects.get(pk=route_id)


def route_remove(*, actor: Actor, route_id: int) -> None:
    require_admin(actor, ROUTES_REFUSAL)
    deleted, _ = NotificationRoute.objects.filter(pk=route_id).delete()
    if not deleted:
        raise NotFound(f"No route with id {route_id}.")


# Read on every create: its SQL compiled once (infra.db.prepared), its rows read again only after
# the configuration changed (policies.configuration).
_ENABLED_ROUTES: Copied[list[NotificationRoute]] = Copied(
    Prepared(lambda: NotificationRoute.objects.filter(enabled=True))
)


def routes_matching(
    *, key: str, tags: Iterable[str], experts: Iterable[str]
) -> list[NotificationRoute]:
    """The enabled routes whose pattern matches this breakpoint, by name."""
    tags, experts = list(tags), list(experts)
    matching = []
    for route in _ENABLED_ROUTES.get():
        pattern = stored_pattern(route.pattern)
        if pattern is not None and pattern.matches(key, tags=tags, experts=experts):
            matching.append(route)
    return matching


def route_defaults(routes: Iterable[NotificationRoute]) -> dict[str, Any]:
    """The timeout defaults the matching routes give (the first route naming a key wins)."""
    merged: dict[str, Any] = {}
    for route in routes:
        for key, value in (route.defaults or {}).items():
            if value is not None:  # null leaves the key to the next route
                merged.setdefault(key, value)
    return merged
