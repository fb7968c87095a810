"""Which waiting breakpoints a rule's selector picks for an event.

A selector names at least one of: `key` (the rule pattern language), `runId`, `agentId`
(templates over the event) and `tags` (all must be present). At most
MAX_SELECTED_BREAKPOINTS are picked, oldest first.
"""

from dataclasses import dataclass, field
from typing import Any

from django.db.models import QuerySet

from breakpoints.models import Breakpoint
from breakpoints.models.jsonlists import filter_has_all_tags
from core.limits import MAX_SELECTED_BREAKPOINTS
from policies.patterns import Pattern, parse_pattern
from triggers.expressions import Budget, check_template, render

SELECTOR_KEYS = ("key", "runId", "agentId", "tags")


def selector_problem(selector: Any) -> str | None:
    if not isinstance(selector, dict) or not any(selector.get(key) for key in SELECTOR_KEYS):
        return f"A selector names at least one of: {', '.join(SELECTOR_KEYS)}."
    extra = set(selector) - set(SELECTOR_KEYS)
    if extra:
        return f"Unknown selector key(s): {', '.join(sorted(extra))}."
    for key in ("key", "runId", "agentId"):
        if key in selector and (problem := check_template(selector[key])):
            return f"{key}: {problem}"
    tags = selector.get("tags", [])
    if not isinstance(tags, list) or any(check_template(tag) for tag in tags):
        return "tags must be a list of templates (text)."
    return None


@dataclass(frozen=True)
class Selector:
    """A selector's templates rendered for one event (no database needed to make one)."""

    run_id: str | None = None
    agent_id: str | None = None
    tags: list[str] = field(default_factory=list)
    pattern: Pattern | None = None


def render_selector(selector: dict[str, Any], payload: Any, budget: Budget) -> Selector:
    """The selector for this event (raises ExpressionError or PatternError)."""
    run_id, agent_id = (
        render(selector[key], payload, budget) if selector.get(key) else None
        for key in ("runId", "agentId")
    )
    tags = [render(tag, payload, budget) for tag in selector.get("tags") or []]
    key = render(selector["key"], payload, budget) if selector.get("key") else None
    pattern = parse_pattern(key) if key is not None else None
    return Selector(run_id=run_id, agent_id=agent_id, tags=tags, pattern=pattern)


def select_waiting(selector: Selector) -> list[Breakpoint]:
    """The waiting breakpoints the rendered selector picks."""
    waiting: QuerySet[Breakpoint] = Breakpoint.objects.waiting()
    if selector.run_id is not None:
        waiting = waiting.filter(run_id=selector.run_id)
    if selector.agent_id is not None:
        waiting = waiting.filter(agent_id=selector.agent_id)
    if selector.tags:
        waiting = filter_has_all_tags(waiting, selector.tags)
    pattern = selector.pattern
    if pattern is not None and "*" not in pattern.glob:
        waiting = waiting.filter(key=pattern.glob)
    elif pattern is not None and not pattern.glob.startswith("*"):
        waiting = waiting.filter(key__startswith=pattern.glob.split("*", 1)[0])
    candidates = waiting.order_by("created_at")[: MAX_SELECTED_BREAKPOINTS * 10]
    picked = [
        bp
        for bp in candidates
        if pattern is None or pattern.matches(bp.key, tags=bp.tags, experts=bp.experts)
    ]
    return picked[:MAX_SELECTED_BREAKPOINTS]
