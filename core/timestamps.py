"""The contract's one way to write a time: ISO 8601 in UTC, with `Z` for `+00:00`.

Used by every answer that carries a breakpoint's times (the representation, hence the API
and webhook bodies, and the status answers of both the DRF and the ASGI path), so they
agree whatever TIME_ZONE says: the contract promises UTC.
"""

from datetime import UTC, datetime
from typing import overload

from django.utils import timezone


@overload
def timestamp(value: datetime) -> str: ...
@overload
def timestamp(value: datetime | str | None) -> str | None: ...
def timestamp(value: datetime | str | None) -> str | None:
    """`value` in UTC as ISO 8601 (`...Z`); a naive datetime is read in the current time
    zone (as Django does); a string is already written and passes as is; None stays None."""
    if not value:
        return None
    if isinstance(value, str):
        return value
    if value.tzinfo is UTC:  # as the database driver gives every stored time
        return value.isoformat()[:-6] + "Z"
    if timezone.is_naive(value):
        value = timezone.make_aware(value)
    text = value.astimezone(UTC).isoformat()
    return text.removesuffix("+00:00") + "Z"
