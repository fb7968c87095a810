"""Who hears about a breakpoint's event, beyond webhook subscribers: its channel targets.

- created, reminder, escalated: the channels of the routes it matches (a Slack channel,
  a DM or an email to each routed expert, an address list, a JIRA project on creation);
  with no matching route, an email to each routed expert (BPM_NOTIFY_EMAIL permitting);
- released, expired, cancelled: every target that showed the breakpoint (its created,
  reminder and escalated deliveries), so each posts the outcome back (Slack updates its
  message);
- feedback: the JIRA issues, which get every comment.
A channel that is not configured (no SLACK_BOT_TOKEN, no JIRA_URL, email off) is skipped.
"""

from collections.abc import Iterable
from typing import Any, Protocol

from django.conf import settings

from accounts import experts as routing
from audit.models import EventType
from core.choices import Channel
from notifications.models import Delivery
from policies.routes import EXPERTS, routes_matching

Target = tuple[str, dict[str, Any]]  # (channel, target)

ANNOUNCING = frozenset({EventType.CREATED, EventType.REMINDER, EventType.ESCALATED})
OUTCOMES = frozenset({EventType.RELEASED, EventType.EXPIRED, EventType.CANCELLED})
DEFAULT_SPECS = [{"kind": Channel.EMAIL, "to": EXPERTS}]


class Routed(Protocol):
    """What routing reads of a breakpoint (breakpoints.models.Breakpoint has it)."""

    pk: Any
    key: str
    tags: list[str]
    experts: list[str]


def configured(channel: str) -> bool:
    if channel == Channel.SLACK:
        return bool(settings.SLACK_BOT_TOKEN)
    if channel == Channel.JIRA:
        return bool(settings.JIRA_URL)
    if channel == Channel.EMAIL:
        return bool(settings.BPM_NOTIFY_EMAIL)
    return False


def any_configured() -> bool:
    """Whether any channel is on: without one, no event costs a query here."""
    return any(configured(channel) for channel in (Channel.SLACK, Channel.EMAIL, Channel.JIRA))


def channel_targets(bp: Routed, event_type: str) -> list[Target]:
    """The targets of one breakpoint's event (see the module docstring)."""
    if not any_configured():
        return []
    if event_type in ANNOUNCING:
        return _route_targets(bp, event_type)
    if event_type in OUTCOMES:
        return shown_targets([bp.pk]).get(bp.pk, [])
    if event_type == EventType.FEEDBACK:
        shown = shown_targets([bp.pk]).get(bp.pk, [])
        return [(channel, target) for channel, target in shown if channel == Channel.JIRA]
    return []


def _route_targets(bp: Routed, event_type: str) -> list[Target]:
    routes = routes_matching(key=bp.key, tags=bp.tags, experts=bp.experts)
    specs = [spec for route in routes for spec in route.channels] if routes else DEFAULT_SPECS
    targets: list[Target] = []
    for spec in specs:
        kind = spec["kind"]
        if not configured(kind):
            continue
        if kind == Channel.JIRA:
            if event_type == EventType.CREATED:
                targets.append((kind, {"project": spec["project"]}))
        elif spec.get("to") == EXPERTS:
            targets.extend((kind, target) for target in _expert_targets(bp.experts))
        elif kind == Channel.SLACK:
            targets.append((kind, {"channel": spec["channel"]}))
        else:
            targets.extend((kind, {"email": address}) for address in spec["to"])
    return _distinct(targets)


def _expert_targets(experts: Iterable[str]) -> list[dict[str, Any]]:
    """One target per user holding a seat, by email (Slack finds the user by it too)."""
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
        .exclude(channel=Channel.WEBHOOK)
        .order_by("created_at")
        .values_list("breakpoint_id", "channel", "target")
    )
    shown: dict[str, list[Target]] = {}
    for breakpoint_id, channel, target in rows:
        shown.setdefault(breakpoint_id, []).append((channel, target))
    return {pk: _distinct(targets) for pk, targets in shown.items()}
