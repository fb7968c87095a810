"""Request body parsing: DRF's JSON parser, refusing as 400 what JSON allows but we cannot
store, and a key sent twice in one object (core.jsonkeys: which one counts is ambiguous)."""

import json
from typing import Any

from rest_framework import parsers as drf_parsers
from rest_framework.exceptions import ParseError, ValidationError
from rest_framework.parsers import JSONParser
from rest_framework.utils.json import strict_constant

from core.ijson import NOT_FINITE, non_finite_numbers
from core.jsonkeys import duplicate_key, may_hold_duplicates

DUPLICATE_KEY = (
    "Key {key!r} is sent more than once in this object: send each key once (JSON parsers "
    "disagree on which one counts)."
)
LONE_SURROGATE = "Lone surrogates (an unpaired \\uD800-\\uDFFF escape) are not valid Unicode."


class SafeJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        # DRF's own charset check (text codecs only); newer than its type stubs.
        encoding = drf_parsers.get_encoding(parser_context or {})  # type: ignore[attr-defined]
        # As DRF's own: NaN and Infinity refused unless STRICT_JSON is off.
        options: dict[str, Any] = {"parse_constant": strict_constant if self.strict else None}
        try:
            text = stream.read().decode(encoding)
            data = json.loads(text, **options)
        except ValueError as exc:  # UnicodeDecodeError included
            raise ParseError(f"JSON parse error - {exc}") from None
        except RecursionError:
            # json raises RecursionError, not ValueError, on deep nesting: a 500 otherwise.
            raise ParseError("JSON parse error - nested too deeply.") from None
        try:
            # One C-speed pass finds both: a lone surrogate anywhere, and a number beyond a
            # double's range (json reads 1e400 as infinity, which no database stores).
            compact = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
            compact.encode("utf-8")
        except UnicodeEncodeError:
            raise ValidationError(_surrogate_details(data)) from None
        except ValueError:
            raise ValidationError(
                non_finite_numbers(data) or {"non_field_errors": [NOT_FINITE]}
            ) from None
        except RecursionError:
            raise ParseError("JSON parse error - nested too deeply.") from None
        if may_hold_duplicates(text, compact):
            _refuse_duplicate_keys(text, options)
        return data


def _refuse_duplicate_keys(text: str, options: dict[str, Any]) -> None:
    """A 400 naming the first key `text` sends twice in one object, if there is one."""
    found = duplicate_key(text, **options)
    if found is not None:
        path, key = found
        raise ValidationError({path: [DUPLICATE_KEY.format(key=key)]})


def _is_unicode(data: object) -> bool:
    """False when a string anywhere (keys, values, nested) holds a lone surrogate.

    JSON may escape half a UTF-16 pair ("\\ud800"); Python reads it into a str that
    neither UTF-8 nor any database can hold (a 500 at save). Encoding the document
    finds one anywhere in one C-speed pass.
    """
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    except RecursionError:
        raise ParseError("JSON parse error - nested too deeply.") from None
    return True


def _surrogate_details(data: object) -> dict[str, list[str]]:
    """The error keyed by the top-level field that holds the surrogate, when there is one."""
    if isinstance(data, dict):
        for key, value in data.items():
            if _is_unicode(key) and not _is_unicode(value):
                return {key: [LONE_SURROGATE]}
    return {"non_field_errors": [LONE_SURROGATE]}
