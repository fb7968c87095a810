"""Duplicate keys in a JSON object: refused, never "the last one wins".

`{"preventSelfReview": true, ..., "preventSelfReview": false}` is JSON that parsers read
differently (the standard library and orjson keep the last, others the first or refuse
it), so a reviewer, a proxy and the service could each see another request. A body is
checked after it was parsed, cheaply: `may_hold_duplicates` rules duplicates out by
counting (C-speed `str.count`s), and only a body it cannot clear is parsed again with a
hook that sees every key (`duplicate_key`, up to twice the parse's time).
"""

import json
import re
from collections.abc import Callable
from typing import Any

# A key's closing quote with whitespace before its colon (`"a" : 1`): rare, and then the
# counting below cannot clear the body.
_SPACED_KEY_END = re.compile(r'"(?=[ \t\r\n])[ \t\r\n]*:')


def may_hold_duplicates(text: str, compact: str) -> bool:
    """Whether `text` (a JSON document as sent) may hold an object with a key twice, given
    `compact`: its parse written back with separators (",", ":"). False is certain.

    Every key ends in `":` (its closing quote, its colon; `"a" : 1` is left to the
    checking parse), a value never does, and a quote inside a string is `\\"` in
    `compact`, in `text` the same or `\\u0022`. So the `":` of `text` less those of
    `compact` are the keys dropped less the strings' `\\":` only `compact` holds: with
    none of those (the usual body), a key was dropped exactly when `text` has more.
    Otherwise a bound decides: the keys sent are at most the `":` of `text` less those
    after a backslash plus those after two (an escaped backslash ending a key), the keys
    kept at least those of `compact` less those after a backslash."""
    sent = text.count('":')
    kept = compact.count('":')
    if sent > kept:
        return True
    if text.count(":") > sent and _SPACED_KEY_END.search(text):
        return True
    if '\\":' not in compact:
        return False
    sent_at_most = sent - text.count('\\":') + text.count('\\\\":')
    return sent_at_most > kept - compact.count('\\":')


def duplicate_key(text: str, **loads_options: Any) -> tuple[str, str] | None:
    """(its JSON path, the key) of the first key `text` holds twice in one object
    (`payload.preventSelfReview`, `items[2].x`), or None. `loads_options`: those of the
    first parse."""
    found: list[_Duplicate] = []
    document = json.loads(text, object_pairs_hook=_pairs_hook(found), **loads_options)
    if not found:
        return None
    return _path_of(document, found[0]), found[0].key


class _Duplicate(dict[str, Any]):
    """An object that held `key` twice, standing in its place until its path is known."""

    def __init__(self, pairs: list[tuple[str, Any]], key: str) -> None:
        super().__init__(pairs)
        self.key = key


def _pairs_hook(found: list["_Duplicate"]) -> Callable[[list[tuple[str, Any]]], dict]:
    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        made = dict(pairs)
        if len(made) == len(pairs):
            return made
        seen: set[str] = set()
        key = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        duplicate = _Duplicate(pairs, key)
        found.append(duplicate)
        return duplicate

    return hook


def _path_of(document: Any, target: "_Duplicate") -> str:
    """The path of `target`'s duplicate key, `target` being somewhere in `document`."""
    pending: list[tuple[Any, str]] = [(document, "")]
    while pending:
        node, at = pending.pop()
        if node is target:
            return f"{at}.{target.key}" if at else target.key
        if isinstance(node, dict):
            pending.extend((value, f"{at}.{key}" if at else key) for key, value in node.items())
        elif isinstance(node, list):
            pending.extend((item, f"{at}[{i}]") for i, item in enumerate(node))
    return target.key
