"""Which waiting breakpoints a rule's selector picks for an event.

A selector names at least one of: `key` (the rule pattern language), `runId`, `agentId`
(templates over the event) and `tags` (all must be present). At most
MAX_SELECTED_BREAKPOINTS are picked, oldest first.
"""

from typing import Any

from django.db.models import QuerySet

from breakpoints.jsonlists import filter_has_all_tags
from breakpoints.models import Breakpoint
from core.limits import MAX_SELECTED_BREAKPOINTS
from policies.patterns import parse_pattern
from triggers.expressions import check_template, render

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


def select_waiting(selector: dict[str, Any], payload: Any) -> list[Breakpoint]:
    """The waiting breakpoints the selector picks for this event (raises ExpressionError)."""
    waiting: QuerySet[Breakpoint] = Breakpoint.objects.waiting()
    for field, column in (("runId", "run_id"), ("agentId", "agent_id")):
        if selector.get(field):
            waiting = waiting.filter(**{column: render(selector[field], payload)})
    if selector.get("tags"):
        waiting = filter_has_all_tags(waiting, [render(tag, payload) for tag in selector["tags"]])
    pattern = parse_pattern(render(selector["key"], payload)) if selector.get("key") else None
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
