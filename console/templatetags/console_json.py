"""`approved_values`: the values a feedback event's vote approved (its metadata's
`values`), as JSON on one line for the review page's history; "" when it approved none.
The text is escaped like any other: what an agent's form holds is untrusted."""

import json
from typing import Any

from django import template

register = template.Library()

# A history line stays a line: longer values are cut (the result panel shows them whole).
MAX_CHARS = 500


@register.filter
def approved_values(metadata: Any) -> str:
    values = metadata.get("values") if isinstance(metadata, dict) else None
    if values is None:
        return ""
    text = json.dumps(values, ensure_ascii=False, separators=(", ", ": "))
    return text if len(text) <= MAX_CHARS else text[: MAX_CHARS - 1] + "…"
