"""What a breakpoint is called where people see it, and the key it has without a name.

A breakpoint's key is payload.breakpointId, else the slug of its title; with neither it
is FALLBACK_KEY, which names nothing: many unrelated questions share it. So wherever a
person reads about a breakpoint (console, mail subject, Slack message, JIRA summary) it
is called by its title, else by its question, never by that shared key.
"""

from collections.abc import Mapping
from typing import Any

FALLBACK_KEY = "untitled"


def _one_line(value: Any) -> str:
    return " ".join(value.split()) if isinstance(value, str) else ""


def display_name(data: Mapping[str, Any]) -> str:
    """The name to show for a breakpoint's representation (title, question, key, id).

    The title, else the question's text on one line, else an explicit key, else its id.
    Callers shorten it to what their medium allows.
    """
    for name in (_one_line(data.get("title")), _one_line(data.get("question"))):
        if name:
            return name
    key = data.get("key")
    if isinstance(key, str) and key and key != FALLBACK_KEY:
        return key
    return f"Breakpoint {data.get('breakpointId') or ''}".strip()
