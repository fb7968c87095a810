"""What a database can store, and a person read, of a JSON document from outside.

Agents' payloads and external events alike: no NUL in text (PostgreSQL refuses it), no
absurd nesting (re-encoding would hit the recursion limit), no more values than a human
could read (MAX_PAYLOAD_VALUES).
"""

import json
from collections.abc import Iterable, Mapping
from typing import Any

from core.limits import MAX_NESTING, MAX_PAYLOAD_VALUES

_SCALARS = frozenset({int, float, bool, type(None)})

NO_NUL = "Must not contain NUL characters."
NO_LONE_SURROGATE = "Must not contain lone surrogates (an unpaired \\uD800-\\uDFFF)."


def text_problem(text: str) -> str | None:
    """Why a database could not store this text: a NUL (PostgreSQL refuses it) or a lone
    surrogate (UTF-8 cannot encode one); None when it can."""
    if "\x00" in text:
        return NO_NUL
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return NO_LONE_SURROGATE
    return None


def storable_text(text: str) -> bool:
    """No NUL and no lone surrogate (text_problem finds nothing)."""
    return text_problem(text) is None


def storable_document(document: Mapping[str, Any] | list) -> bool:
    """storable_problem finds nothing, and no text anywhere holds a lone surrogate."""
    if storable_problem(document) is not None:
        return False
    return storable_text(json.dumps(document, ensure_ascii=False))  # NUL comes out escaped


def storable_problem(document: Mapping[str, Any] | list) -> str | None:
    """Why the database could not store, or anyone read, this JSON document; None if fine."""
    errors: dict[str, list[str]] = {}
    _check_storable(errors, document)
    return errors["payload"][0] if errors else None


def _check_storable(errors: dict, payload: Mapping[str, Any] | list) -> None:
    """Refuse what the database cannot store (NUL in text), re-encode (absurd nesting) or
    anyone read (more than MAX_PAYLOAD_VALUES values in all).

    Iterative on purpose (a recursive walk would itself hit the recursion limit), one
    nesting level at a time, and linear: each value is looked at once, by exact type
    first (parsed JSON holds only dict, list, str and scalars) before any ABC check.
    """
    level: list[Any] = [payload]
    depth, values = 1, 0
    while level:
        below: list[Any] = []
        for container in level:
            values += len(container)
            if values > MAX_PAYLOAD_VALUES:
                errors["payload"] = [f"At most {MAX_PAYLOAD_VALUES:,} values in all."]
                return
            if isinstance(container, Mapping):
                if any("\x00" in key for key in container):
                    errors["payload"] = [NO_NUL]
                    return
                children: Iterable[Any] = container.values()
            else:
                children = container
            if depth >= MAX_NESTING and len(container):
                errors["payload"] = [f"Must not be nested more than {MAX_NESTING} levels deep."]
                return
            for item in children:
                kind = type(item)
                if kind is str:
                    if "\x00" in item:
                        errors["payload"] = [NO_NUL]
                        return
                elif kind is dict or kind is list:
                    below.append(item)
                elif kind in _SCALARS:
                    continue
                elif isinstance(item, Mapping | list):
                    below.append(item)
                elif isinstance(item, str) and "\x00" in item:
                    errors["payload"] = [NO_NUL]
                    return
        level = below
        depth += 1
