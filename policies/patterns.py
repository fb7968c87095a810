"""Parse and match auto-approval rule patterns against breakpoint keys.

A pattern is a key glob optionally followed, with no space in between, by a
parenthesised list of attribute predicates joined by ``AND``::

    confirm.*
    *.review(tags contains 'design')
    gate.*(tags contains 'prerequisites' AND expert = 'owner')

Globs use the characters ``[A-Za-z0-9._-]`` plus ``*``, which matches any run of
characters (dots included, possibly empty). Matching is anchored and
case-sensitive. Supported predicates are ``tags contains '<s>'``,
``expert = '<s>'`` and its synonym ``expert contains '<s>'``. Keywords, field
names and operators are case-insensitive; string values are not.

This module is deliberately free of Django imports so it can be used from
models, forms, serializers and plain scripts alike.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from core.limits import MAX_PATTERN_LENGTH

logger = logging.getLogger(__name__)

__all__ = [
    "MAX_PATTERN_LENGTH",
    "Pattern",
    "PatternError",
    "Predicate",
    "parse_pattern",
]

"""Maximum length of a pattern, both as written and in canonical form."""

_GLOB_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-*")
_WORD_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_WORD_CHARS = _WORD_START | frozenset("0123456789_")
_OPERATOR_SYMBOLS = frozenset("=!<>~")
_QUOTES = frozenset("'\"")
_ESCAPABLE = frozenset("'\"\\")

# field -> operators allowed on it
_ALLOWED_OPS: dict[str, frozenset[str]] = {
    "tags": frozenset({"contains"}),
    "expert": frozenset({"=", "contains"}),
}


class PatternError(ValueError):
    """A malformed pattern; `position` is the 0-based character index of the problem.

    Positions index into the text originally passed to :func:`parse_pattern`
    (before surrounding whitespace is stripped). A position equal to the text's
    length means "at end of input".
    """

    message: str
    position: int

    def __init__(self, message: str, position: int) -> None:
        super().__init__(message, position)
        self.message = message
        self.position = position

    def __str__(self) -> str:
        return f"{self.message} at position {self.position}"


def _quote(value: str) -> str:
    """Render ``value`` as a single-quoted literal, escaping ``\\`` and ``'``."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


@dataclass(frozen=True)
class Predicate:
    """One attribute condition, e.g. ``tags contains 'design'``."""

    field: str  # "tags" or "expert"
    op: str  # "contains" or "="
    value: str

    def matches(self, *, tags: Iterable[str] = (), experts: Iterable[str] = ()) -> bool:
        """Return whether the condition holds for the given tags/experts (exact, case-sensitive)."""
        if self.field == "tags":
            return self.value in tags
        if self.field == "expert":
            return self.value in experts
        return False

    def __str__(self) -> str:
        return f"{self.field} {self.op} {_quote(self.value)}"


@dataclass(frozen=True)
class Pattern:
    """A parsed rule pattern: a key glob plus predicates that must all hold."""

    glob: str
    predicates: tuple[Predicate, ...] = ()

    def matches_key(self, key: str) -> bool:
        """Whether ``key`` matches the glob: the predicates may still fail."""
        return _glob_matches(self.glob, key)

    def matches(self, key: str, *, tags: Iterable[str] = (), experts: Iterable[str] = ()) -> bool:
        """Return whether ``key`` matches the glob and every predicate holds."""
        if not _glob_matches(self.glob, key):
            return False
        if not self.predicates:
            return True
        tag_set = frozenset(tags)
        expert_set = frozenset(experts)
        return all(p.matches(tags=tag_set, experts=expert_set) for p in self.predicates)

    def __str__(self) -> str:
        """Canonical text; parsing it yields an equal Pattern."""
        if not self.predicates:
            return self.glob
        return self.glob + "(" + " AND ".join(str(p) for p in self.predicates) + ")"


def _glob_matches(glob: str, key: str) -> bool:
    """Anchored, case-sensitive match where ``*`` matches any (possibly empty) run."""
    parts = glob.split("*")
    if len(parts) == 1:
        return key == glob
    head, *middle, tail = parts
    if len(key) < len(head) + len(tail):
        return False
    if not key.startswith(head) or not key.endswith(tail):
        return False
    pos = len(head)
    end = len(key) - len(tail)
    # Leftmost-first placement of each literal part is optimal for star-only globs.
    for part in middle:
        idx = key.find(part, pos, end)
        if idx < 0:
            return False
        pos = idx + len(part)
    return True


class _Parser:
    """Hand-written recursive-descent parser over the stripped pattern text.

    ``self.offset`` maps indices in the stripped text back to the caller's text.
    """

    def __init__(self, text: str, offset: int) -> None:
        self.text = text
        self.offset = offset
        self.pos = 0

    # -- helpers ---------------------------------------------------------------

    def error(self, message: str, pos: int | None = None) -> PatternError:
        return PatternError(message, self.offset + (self.pos if pos is None else pos))

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def skip_ws(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def describe(self) -> str:
        ch = self.peek()
        return "end of pattern" if not ch else repr(ch)

    def read_word(self) -> str:
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos] in _WORD_CHARS:
            self.pos += 1
        return self.text[start : self.pos]

    # -- grammar ---------------------------------------------------------------

    def parse(self) -> Pattern:
        glob = self.parse_glob()
        predicates: list[Predicate] = []
        starts: list[int] = []
        close_pos = -1
        if self.peek() == "(":
            self.pos += 1
            predicates, starts = self.parse_predicates()
            close_pos = self.pos
            self.pos += 1  # ')'
            self.skip_ws()
            if self.pos < len(self.text):
                raise self.error(f"unexpected {self.describe()} after ')'")
        pattern = Pattern(glob, tuple(predicates))
        self.check_canonical_length(pattern, starts, close_pos)
        return pattern

    def parse_glob(self) -> str:
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos] != "(":
            ch = self.text[self.pos]
            if ch not in _GLOB_CHARS:
                if ch.isspace():
                    raise self.error(
                        "unexpected whitespace in key glob (predicates must follow it directly)"
                    )
                raise self.error(
                    f"unexpected character {ch!r} in key glob "
                    "(allowed: letters, digits, '.', '_', '-', '*')"
                )
            self.pos += 1
        if self.pos == start:
            raise self.error("expected a key glob")
        return self.text[start : self.pos]

    def parse_predicates(self) -> tuple[list[Predicate], list[int]]:
        predicates: list[Predicate] = []
        starts: list[int] = []
        while True:
            self.skip_ws()
            starts.append(self.pos)
            predicates.append(self.parse_predicate())
            self.skip_ws()
            if self.peek() == ")":
                return predicates, starts
            keyword_pos = self.pos
            word = self.read_word()
            if word.upper() != "AND":
                self.pos = keyword_pos
                found = repr(word) if word else self.describe()
                raise self.error(f"expected 'AND' or ')' but found {found}")

    def parse_predicate(self) -> Predicate:
        field = self.parse_field()
        self.skip_ws()
        op = self.parse_operator(field)
        self.skip_ws()
        value = self.parse_string()
        return Predicate(field, op, value)

    def parse_field(self) -> str:
        start = self.pos
        if not self.peek() or self.peek() not in _WORD_START:
            raise self.error(
                f"expected a field name ('tags' or 'expert') but found {self.describe()}"
            )
        word = self.read_word()
        field = word.lower()
        if field not in _ALLOWED_OPS:
            raise self.error(f"unknown field {word!r} (expected 'tags' or 'expert')", start)
        return field

    def parse_operator(self, field: str) -> str:
        start = self.pos
        ch = self.peek()
        if ch and ch in _WORD_START:
            token = self.read_word()
        elif ch and ch in _OPERATOR_SYMBOLS:
            while self.pos < len(self.text) and self.text[self.pos] in _OPERATOR_SYMBOLS:
                self.pos += 1
            token = self.text[start : self.pos]
        else:
            raise self.error(
                f"expected an operator ('contains' or '=') but found {self.describe()}"
            )
        op = token.lower()
        if op not in ("contains", "="):
            raise self.error(f"unknown operator {token!r} (expected 'contains' or '=')", start)
        if op not in _ALLOWED_OPS[field]:
            allowed = " or ".join(repr(o) for o in sorted(_ALLOWED_OPS[field]))
            raise self.error(
                f"operator {token!r} is not supported for {field!r}; use {allowed}", start
            )
        return op

    def parse_string(self) -> str:
        start = self.pos
        quote = self.peek()
        if not quote or quote not in _QUOTES:
            raise self.error(f"expected a quoted string but found {self.describe()}")
        self.pos += 1
        chars: list[str] = []
        while self.pos < len(self.text):
            ch = self.text[self.pos]
            if ch == quote:
                self.pos += 1
                return "".join(chars)
            if ch == "\\":
                nxt = self.text[self.pos + 1] if self.pos + 1 < len(self.text) else ""
                if not nxt:
                    break
                if nxt not in _ESCAPABLE:
                    sequence = "\\" + nxt
                    raise self.error(
                        f"invalid escape sequence {sequence!r} "
                        "(only \\', \\\" and \\\\ are allowed)"
                    )
                chars.append(nxt)
                self.pos += 2
                continue
            chars.append(ch)
            self.pos += 1
        raise self.error("unterminated string", start)

    def check_canonical_length(self, pattern: Pattern, starts: list[int], close_pos: int) -> None:
        """Reject patterns whose canonical text would exceed the limit.

        Canonical text can be longer than the input (spaces around '=',
        re-quoting), so this keeps ``parse_pattern(str(p))`` always valid.
        """
        if not pattern.predicates:
            return  # canonical text is the glob itself, already within the limit
        length = len(pattern.glob) + 1
        for i, (predicate, start) in enumerate(zip(pattern.predicates, starts, strict=True)):
            length += (5 if i else 0) + len(str(predicate))
            if length > MAX_PATTERN_LENGTH:
                raise self.error(
                    f"pattern would exceed {MAX_PATTERN_LENGTH} characters in canonical form",
                    start,
                )
        if length + 1 > MAX_PATTERN_LENGTH:
            raise self.error(
                f"pattern would exceed {MAX_PATTERN_LENGTH} characters in canonical form",
                close_pos,
            )


def parse_pattern(text: str) -> Pattern:
    """Parse a rule pattern such as ``gate.*(tags contains 'x' AND expert = 'owner')``.

    Surrounding whitespace is ignored. Raises :class:`PatternError` (with the
    0-based index into ``text``) for malformed input, including patterns longer
    than :data:`MAX_PATTERN_LENGTH` characters.
    """
    stripped = text.strip()
    offset = len(text) - len(text.lstrip())
    if not stripped:
        raise PatternError("pattern is empty", 0)
    if len(stripped) > MAX_PATTERN_LENGTH:
        raise PatternError(
            f"pattern is longer than {MAX_PATTERN_LENGTH} characters",
            offset + MAX_PATTERN_LENGTH,
        )
    return _Parser(stripped, offset).parse()


@lru_cache(maxsize=1024)
def stored_pattern(text: str) -> Pattern | None:
    """A stored rule's or route's pattern, parsed once; None (logged) if it is malformed.

    Patterns are validated when saved, so None means one was written some other way.
    """
    try:
        return parse_pattern(text)
    except PatternError:
        logger.warning("Skipping a stored pattern that does not parse: %r", text)
        return None
