"""Numbers as I-JSON (RFC 7493) has them: doubles, and integers only as far as a double is exact.

A payload is digested (core.digests, RFC 8785) and returned to clients that parse its
numbers in their own way: JavaScript reads every number as a double, Python's json an
integer literal as an int and the rest as floats. A number crosses all of them unchanged
only when it is an integer within ±(2^53 - 1) or a finite double, so a payload holds no
other (number_problems): a larger integer (a 64-bit id) is sent as a string.

PostgreSQL's jsonb writes a large double without its exponent (1e21 as
1000000000000000000000), which Python's json then reads as an int that RFC 8785 cannot
canonicalize; as_doubles gives such an integer back as the double it was stored from.
"""

import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from core.rawjson import RawJSON

# Number.MAX_SAFE_INTEGER: every integer up to it, and none past it, is one double alone.
MAX_EXACT_INTEGER = 2**53 - 1
# At most this many numbers named in one answer (a payload may hold thousands).
MAX_REPORTED = 10

INTEGER_OUT_OF_RANGE = (
    f"Integers must lie within ±{MAX_EXACT_INTEGER} (2^53 - 1): beyond it a JSON parser "
    "that reads numbers as doubles changes the value (I-JSON, RFC 7493). Send it as a string."
)
NOT_FINITE = "Must be a finite number (beyond a double's range, ±1.8e308). Send it as a string."

# Digit runs that may be an integer past MAX_EXACT_INTEGER (16 digits or more), or, of 17
# or more, the long integer jsonb writes for a double of 1e16 or more (the only doubles
# Python writes with an exponent). A C-speed scan of the JSON text: a run inside a string
# costs the precise (Python-speed) look, never a wrong answer.
_LONG_RUN = re.compile(r"[0-9]{16}")
_LONGER_RUN = re.compile(r"[0-9]{17}")


def number_problem(value: Any) -> str | None:
    """Why `value`, if a number, is not I-JSON; None for any other value."""
    kind = type(value)
    if kind is int:
        return None if -MAX_EXACT_INTEGER <= value <= MAX_EXACT_INTEGER else INTEGER_OUT_OF_RANGE
    if kind is float:
        return None if math.isfinite(value) else NOT_FINITE
    return None


def number_problems(document: Any, path: str) -> dict[str, list[str]]:
    """The numbers of `document` (parsed JSON: dicts, lists, scalars) that are not I-JSON,
    keyed by their JSON path under `path` (`payload.items[2].size`; "" for the document's
    own keys), the first MAX_REPORTED found."""
    try:
        text = json.dumps(document, allow_nan=False)
    except ValueError:  # a NaN or an infinity
        text = None
    except RecursionError:  # absurd nesting: looked at by the iterative walk
        text = None
    if text is not None and not _LONG_RUN.search(text):
        return {}
    return _found(document, path, number_problem)


def non_finite_numbers(document: Any, path: str = "") -> dict[str, list[str]]:
    """number_problems of the floats only: an infinity (1e400 parses as one) or a NaN."""
    return _found(
        document, path, lambda value: None if type(value) is not float else number_problem(value)
    )


def _found(
    document: Any, path: str, problem_of: Callable[[Any], str | None]
) -> dict[str, list[str]]:
    """The values of `document` that problem_of finds a problem with, by JSON path.
    Iterative (a document nested to any depth is walked), and a path is written only for a
    container or a value found: a payload may hold 100,000 values."""
    problems: dict[str, list[str]] = {}
    pending: list[tuple[Any, str]] = [(document, path)]
    while pending and len(problems) < MAX_REPORTED:
        container, at = pending.pop()
        if isinstance(container, Mapping):
            pairs: Iterable[tuple[Any, Any]] = container.items()
        elif isinstance(container, list):
            pairs = enumerate(container)
        else:
            pairs = [(None, container)]
        for key, item in pairs:
            kind = type(item)
            if kind is str or kind is bool or item is None:
                continue
            if kind is dict or kind is list or isinstance(item, Mapping | list):
                pending.append((item, _path(at, key, container)))
            elif (problem := problem_of(item)) is not None:
                problems[_path(at, key, container) or "non_field_errors"] = [problem]
    return problems


def _path(at: str, key: Any, container: Any) -> str:
    """The JSON path of `container[key]`, `container` being at `at`."""
    if key is None:  # the document itself, a scalar
        return at
    if isinstance(container, list):
        return f"{at}[{key}]"
    return f"{at}.{key}" if at else str(key)


def _as_number(text: str) -> int | float:
    """An integer literal: an int when a double holds it exactly, else the double it names."""
    value = int(text)
    if -MAX_EXACT_INTEGER <= value <= MAX_EXACT_INTEGER:
        return value
    try:
        return float(value)
    except OverflowError:  # past any double: no payload accepted since holds one
        return value


def as_doubles(value: Any) -> Any:
    """`value` (parsed JSON, or RawJSON text) with every integer beyond ±MAX_EXACT_INTEGER
    read as the double it names: the I-JSON value, written back with its exponent. The
    same object when there is none (the common case, a scan and no copy)."""
    if isinstance(value, RawJSON):
        if not _LONGER_RUN.search(value.text):
            return value
        return json.loads(value.text, parse_int=_as_number)
    if value is None or isinstance(value, str | bool):
        return value
    text = json.dumps(value)
    if not _LONGER_RUN.search(text):
        return value
    return json.loads(text, parse_int=_as_number)
