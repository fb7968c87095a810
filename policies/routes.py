"""Notification routes: validated specs, the admin services, and the routes a breakpoint matches.

A route is a pattern in the rule pattern language and the channels its breakpoints are
announced on; see policies.models.route for the spec shapes. Only admins manage them.
"""

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from django.db import IntegrityError, transaction

from core import limits
from core.actors import Actor, require_admin
from core.choices import Channel
from core.exceptions import Conflict, InvalidInput, NotFound
from core.storable import storable_text
from infra.db.prepared import Prepared
from policies.configuration import Copied
from policies.foureyes import timeout_approve_problem
from policies.models import NotificationRoute
from policies.patterns import PatternError, parse_pattern, stored_pattern
from policies.validators import check_prevent_self_review, check_timeout_policy

ROUTES_REFUSAL = "Only admins manage notification routes."
EXPERTS = "experts"  # "to": "experts": the routed experts (a DM each, an email each)
ROUTE_KINDS = (Channel.SLACK, Channel.EMAIL, Channel.JIRA)
TIMEOUT_KEYS = ("onTimeout", "escalateAfterSeconds", "escalateTo", "remindEverySeconds")
# What a route may default for its breakpoints: the timeout policy, and four eyes.
DEFAULT_KEYS = (*TIMEOUT_KEYS, "preventSelfReview")


def _short_text(value: Any) -> bool:
    return (
        isinstance(value, str)
        and bool(value.strip())
        and len(value) <= limits.MAX_CHANNEL_FIELD_LENGTH
        and storable_text(value)  # PostgreSQL's jsonb cannot hold NUL
    )


def _address(value: Any) -> bool:
    return _short_text(value) and "@" in value and not any(c in value for c in "\r\n,;<>")


# The keys each kind of spec has, besides `kind`: exactly one of these shapes.
SPEC_SHAPES: dict[str, tuple[str, ...]] = {
    Channel.SLACK: ("channel", "to"),
    Channel.EMAIL: ("to",),
    Channel.JIRA: ("project",),
}


def spec_problem(spec: Any) -> str | None:
    """What is wrong with one channel spec, or None."""
    if not isinstance(spec, dict) or spec.get("kind") not in ROUTE_KINDS:
        return f"Each channel is an object whose kind is one of: {', '.join(ROUTE_KINDS)}."
    kind = spec["kind"]
    extra = set(spec) - {"kind"} - set(SPEC_SHAPES[kind])
    if extra:
        return f"A {kind} channel has no {', '.join(sorted(extra))}."
    to = spec.get("to")
    if kind == Channel.SLACK:
        one_of = ("channel" in spec) != ("to" in spec)
        if (
            not one_of
            or ("to" in spec and to != EXPERTS)
            or ("channel" in spec and not _short_text(spec["channel"]))
        ):
            return 'A slack channel needs "channel" (an id such as C0123) or "to": "experts".'
    elif kind == Channel.EMAIL:
        if to != EXPERTS and not (
            isinstance(to, list)
            and 1 <= len(to) <= limits.MAX_EMAIL_RECIPIENTS
            and all(_address(address) for address in to)
        ):
            return (
                f'An email channel needs "to": a list of 1 to {limits.MAX_EMAIL_RECIPIENTS} '
                'addresses, or "experts".'
            )
    elif not _short_text(spec.get("project")):
        return 'A jira channel needs "project" (a project key such as OPS).'
    return None


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
    if not _short_text(name) or len(name) > limits.MAX_ROUTE_NAME_LENGTH:
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
