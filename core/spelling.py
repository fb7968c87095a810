"""Which known name a misspelt one most likely meant (a strict body's 400, a payload's warnings)."""

import difflib


def _normalized(name: str) -> str:
    return name.replace("_", "").replace("-", "").lower()


def close_match(name: str, known: set[str] | frozenset[str]) -> str | None:
    """The known field `name` most likely meant: the same but for case, `_` or `-`
    (agent_id -> agentId), else the one it starts (ttl -> ttlSeconds), else a near spelling."""
    by_normal = {_normalized(field): field for field in sorted(known)}
    wanted = _normalized(name)
    if not wanted:
        return None
    if wanted in by_normal:
        return by_normal[wanted]
    started = [field for normal, field in by_normal.items() if normal.startswith(wanted)]
    if len(started) == 1:
        return started[0]
    near = difflib.get_close_matches(wanted, list(by_normal), n=1, cutoff=0.75)
    return by_normal[near[0]] if near else None
