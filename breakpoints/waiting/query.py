"""What a status request asks for: which breakpoints, and how long to wait for a change.

The DRF views and the ASGI handler both validate through `parse_status_query`, so bad
input gets the same 400 in the error envelope on every path.
"""

import re
from dataclasses import dataclass

from django.conf import settings

from core.exceptions import InvalidInput
from core.limits import BREAKPOINT_ID_LENGTH
from core.storable import storable_text

_WAIT = re.compile(r"^[0-9]{1,4}$")
# Ids are bp-<hex>; anything longer, or with NUL (which PostgreSQL text cannot hold), is
# simply not found, never an error that would confirm anything.


@dataclass(frozen=True)
class StatusQuery:
    ids: tuple[str, ...]
    wait: int  # seconds; 0 answers at once


def parse_wait(values: list[str]) -> int:
    """`wait` as whole seconds 0..BPM_MAX_WAIT_SECONDS (the last value if repeated)."""
    if not values:
        return 0
    raw = values[-1].strip()
    limit = settings.BPM_MAX_WAIT_SECONDS
    if not _WAIT.match(raw) or int(raw) > limit:
        raise InvalidInput(
            f"wait must be a whole number of seconds from 0 to {limit}.",
            {"wait": [f"Must be an integer from 0 to {limit}."]},
        )
    return int(raw)


def parse_many_ids(values: list[str]) -> tuple[str, ...]:
    """The `id` parameters of the many-id form: 1..BPM_MAX_WAIT_IDS distinct ids."""
    ids = [value.strip() for value in values]
    limit = settings.BPM_MAX_WAIT_IDS
    if not ids or any(not value for value in ids):
        raise InvalidInput(
            "Give the breakpoints to watch as id=…&id=….", {"id": ["At least one id is required."]}
        )
    if len(ids) > limit:
        raise InvalidInput(
            f"At most {limit} ids per request.",
            {"id": [f"At most {limit} ids ({len(ids)} given)."]},
        )
    duplicates = sorted({value for value in ids if ids.count(value) > 1})
    if duplicates:
        raise InvalidInput(
            "Each id may appear once.", {"id": [f"Repeated: {', '.join(duplicates[:5])}."]}
        )
    return tuple(ids)


def parse_status_query(*, ids: list[str], wait: list[str], many: bool) -> StatusQuery:
    """Validate a status request; `ids` is the path id (one) or the `id` parameters (many)."""
    wait_seconds = parse_wait(wait)
    return StatusQuery(ids=parse_many_ids(ids) if many else tuple(ids), wait=wait_seconds)


def is_possible_id(value: str) -> bool:
    """Whether `value` could name a breakpoint at all (else it is not found, unqueried)."""
    return 0 < len(value) <= BREAKPOINT_ID_LENGTH and storable_text(value)
