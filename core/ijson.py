"""Numbers as I-JSON (RFC 7493) has them: doubles, and integers only as far as a double is exact.

A payload is digested (core.digests, RFC 8785) and returned to clients that parse its
numbers in their own way: JavaScript reads every number as a double, Python's json an
integer literal as an int and the rest as floats. A number crosses all of them unchanged
only when it is an integer within ±(2^53 - 1) or a finite double, so a payload holds no
other (number_problems): a larger integer (a 64-bit id) is sent as a string.

PostgreSQL's jsonb writes a large double without its exponent (1e21 as
1000000000000000000000), which Python's json then reads as an int that RFC 8785 cannot
canonicalize; as_doubles gives such an integer back as the double it was stored from.
A form's answer (a proposal, a release's values) travels on as written (results, votes,
receipts, the agent's own check), so there a double too must lie within the exact range
(answer_number_problems): what its valuesDigest covers is what every read returns.
"""

import json
import math
from collections.abc import Iterable, Mapping
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
ANSWER_OUT_OF_RANGE = (
    f"A form's values hold numbers within ±{MAX_EXACT_INTEGER} (2^53 - 1), doubles too: a "
    "larger one (1e16) is stored as a long integer, which no valuesDigest covers as it was "
    "sent (RFC 8785). Send it as a string."
)


def number_problems(document: Any, path: str) -> dict[str, list[str]]:
    """The numbers of `document` (parsed JSON: dicts, lists, scalars) that are not I-JSON,
    keyed by their JSON path under `path` (`payload.items[2].size`; "" for the document's
    own keys), the first MAX_REPORTED found."""
    return _found(document, path, integers=True)


def answer_number_problems(document: Any, path: str) -> dict[str, list[str]]:
    """number_problems of a form's answer (payload.proposal, a release's values): there a
    double must lie within ±MAX_EXACT_INTEGER too. Every double past it is a whole number,
    which PostgreSQL's jsonb writes back as a long integer; a payload's is given back as
    the double it was (as_doubles), but values travel on (results, votes, receipts, the
    SDK's verify) as written, so what the valuesDigest covers must read back unchanged."""
    return _found(document, path, integers=True, doubles=True)


def non_finite_numbers(document: Any, path: str = "") -> dict[str, list[str]]:
    """number_problems of the floats only: an infinity (1e400 parses as one) or a NaN."""
    return _found(document, path, integers=False)


def _found(
    document: Any, path: str, *, integers: bool, doubles: bool = False
) -> dict[str, list[str]]:
    """The numbers of `document` that are not I-JSON (`integers`: ints past the exact ones
    too, else only floats; `doubles`: floats past them too), by JSON path. A walk of the values, iterative (nested to any
    depth), with a path written only for a container or a number found: a payload may hold
    100,000 values, or one context file of megabytes (one value)."""
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
            if kind is int:
                if integers and not -MAX_EXACT_INTEGER <= item <= MAX_EXACT_INTEGER:
                    problems[_path(at, key, container)] = [INTEGER_OUT_OF_RANGE]
            elif kind is float:
                if not math.isfinite(item):
                    problems[_path(at, key, container)] = [NOT_FINITE]
                elif doubles and not -MAX_EXACT_INTEGER <= item <= MAX_EXACT_INTEGER:
                    problems[_path(at, key, container)] = [ANSWER_OUT_OF_RANGE]
            elif kind is dict or kind is list or isinstance(item, Mapping):
                pending.append((item, _path(at, key, container)))
    return problems


def _path(at: str, key: Any, container: Any) -> str:
    """The JSON path of `container[key]`, `container` being at `at`."""
    if key is None:  # the document itself, a scalar
        return at or "non_field_errors"
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


def _has_long_integer(value: Any) -> bool:
    """Whether parsed JSON holds an int past ±MAX_EXACT_INTEGER: a walk of its values (a
    context file is one), iterative."""
    pending = [value]
    while pending:
        item = pending.pop()
        kind = type(item)
        if kind is int:
            if not -MAX_EXACT_INTEGER <= item <= MAX_EXACT_INTEGER:
                return True
        elif kind is dict:
            pending.extend(item.values())
        elif kind is list:
            pending.extend(item)
    return False


def as_doubles(value: Any) -> Any:
    """Parsed JSON with every integer past ±MAX_EXACT_INTEGER read as the double it names
    (the I-JSON value), written back with its exponent; the same object when there is none
    (the common case: a walk, no copy). JSON passed through as text (RawJSON) is returned
    as it is: its reader parses the rare text that holds one (breakpoints.selectors)."""
    if isinstance(value, RawJSON) or not _has_long_integer(value):
        return value
    return json.loads(json.dumps(value), parse_int=_as_number)
