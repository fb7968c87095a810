"""Who hears about a breakpoint's event, beyond webhook subscribers: its channel targets.

The channels are those of the registry (core.channels); each says its own targets.
- created, reminder, escalated: the targets the channels give for the specs of the routes
  it matches (a channel, an address list, each routed expert); with no matching route,
  the specs each channel gives for that case (core.channels: unrouted_specs);
- released, expired, cancelled: every target that showed the breakpoint (its created,
  reminder and escalated deliveries), so each posts the outcome back;
- other events: the targets that showed it, on the channels that hear that event (a
  feedback is commented on the breakpoint's issues).
A channel that is not configured (its settings are missing) is skipped.
"""

from collections.abc import Iterable
from functools import partial
from typing import Any, Protocol

from accounts import experts as routing
from audit.models import EventType
from core.channels import channel_provider, channel_providers
from notifications.models import WEBHOOK, Delivery
from policies.routes import routes_matching

Target = tuple[str, dict[str, Any]]  # (channel, target)

ANNOUNCING = frozenset({EventType.CREATED, EventType.REMINDER, EventType.ESCALATED})
OUTCOMES = frozenset({EventType.RELEASED, EventType.EXPIRED, EventType.CANCELLED})


class Routed(Protocol):
    """What routing reads of a breakpoint (breakpoints.models.Breakpoint has it)."""

    pk: Any
    key: str
    tags: list[str]
    experts: list[str]


def any_configured() -> bool:
    """Whether any channel is on: without one, no event costs a query here."""
    return any(provider.configured() for provider in channel_providers().values())


def channel_targets(bp: Routed, event_type: str) -> list[Target]:
    """The targets of one breakpoint's event (see the module docstring)."""
    if not any_configured():
        return []
    if event_type in ANNOUNCING:
        return _route_targets(bp, event_type)
    if event_type in OUTCOMES:
        return shown_targets([bp.pk]).get(bp.pk, [])
    hearing = {
        kind for kind, provider in channel_providers().items() if event_type in provider.hears
    }
    if not hearing:
        return []
    shown = shown_targets([bp.pk]).get(bp.pk, [])
    return [(channel, target) for channel, target in shown if channel in hearing]


def _route_targets(bp: Routed, event_type: str) -> list[Target]:
    routes = routes_matching(key=bp.key, tags=bp.tags, experts=bp.experts)
    specs = [spec for route in routes for spec in route.channels] if routes else _unrouted()
    experts = partial(_expert_targets, bp.experts)
    targets: list[Target] = []
    for spec in specs:
        provider = channel_provider(spec["kind"])
        if provider is None or not provider.configured():
            continue
        found = provider.targets(spec, event_type=event_type, experts=experts)
        targets.extend((spec["kind"], target) for target in found)
    return _distinct(targets)


def _unrouted() -> list[dict[str, Any]]:
    """The specs of a breakpoint no route matches: each channel's unrouted ones."""
    return [spec for provider in channel_providers().values() for spec in provider.unrouted_specs]


def _expert_targets(experts: Iterable[str]) -> list[dict[str, Any]]:
    """One target per user holding a seat, by email (a chat finds the user by it too)."""
    return [
        {"email": user.email, "user": user.pk}
        for user in routing.seat_holders(experts)
        if user.email
    ]


def _distinct(targets: list[Target]) -> list[Target]:
    seen: dict[tuple[str, tuple], Target] = {}
    for channel, target in targets:
        seen.setdefault((channel, tuple(sorted(target.items()))), (channel, target))
    return list(seen.values())


def shown_targets(breakpoint_ids: list[str]) -> dict[str, list[Target]]:
    """Per breakpoint, the channel targets it was announced to (one query, none when no
    channel is on)."""
    if not any_configured():
        return {}
    rows = (
        Delivery.objects.filter(breakpoint_id__in=breakpoint_ids, event_type__in=ANNOUNCING)
        .exclude(channel=WEBHOOK)
        .order_by("created_at")
        .values_list("breakpoint_id", "channel", "target")
    )
    shown: dict[str, list[Target]] = {}
    for breakpoint_id, channel, target in rows:
        shown.setdefault(breakpoint_id, []).append((channel, target))
    return {pk: _distinct(targets) for pk, targets in shown.items()}
