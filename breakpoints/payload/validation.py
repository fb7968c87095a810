"""Validation of the babysitter breakpoint payload, and derivation of the breakpoint key.

`payload` is free-form JSON; the keys babysitter defines are checked when present so a
reviewer never sees a half-understood request. Errors are keyed by their JSON path. Any
other key is kept as sent; one that looks like a misspelt known key (`questoin`) is
answered with a warning (payload_warnings), not refused.
"""

import itertools
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath, PureWindowsPath
from typing import Any

from django.utils.text import slugify

from breakpoints.payload.form_schema import PROPOSAL_KEY, check_form_payload
from core.choices import FileFormat, Strategy
from core.exceptions import InvalidInput
from core.ijson import answer_number_problems, number_problems
from core.limits import (
    MAX_CONTENT_LENGTH,
    MAX_EXPERT_NAME_LENGTH,
    MAX_EXPERTS,
    MAX_FILES,
    MAX_KEY_LENGTH,
    MAX_LANGUAGE_LENGTH,
    MAX_OPTION_LENGTH,
    MAX_OPTIONS,
    MAX_PATH_LENGTH,
    MAX_PREVIOUS_FEEDBACK_LENGTH,
    MAX_QUESTION_LENGTH,
    MAX_RUN_ID_LENGTH,
    MAX_TAG_LENGTH,
    MAX_TAGS,
    MAX_TITLE_LENGTH,
    MIN_AUTO_APPROVE_AFTER_N,
)
from core.naming import FALLBACK_KEY
from core.spelling import close_match
from core.storable import storable_problem, text_problem
from policies.validators import (
    auto_approve_after_n_problem,
    check_prevent_self_review,
    check_timeout_policy,
    is_int,
)

# The keys this module understands, where they are understood (api/payload_schema.py
# documents the same ones: a test holds them together).
PAYLOAD_KEYS = frozenset(
    {
        "question", "title", "context", "expert", "tags", "strategy", "previousFeedback",
        "attempt", "breakpointId", "autoApproveAfterN", "presentAlwaysApprove", "options",
        "onTimeout", "escalateAfterSeconds", "escalateTo", "remindEverySeconds",
        "preventSelfReview", "form", "proposal",
    }
)  # fmt: skip
CONTEXT_KEYS = frozenset({"runId", "files"})
FILE_KEYS = frozenset({"path", "format", "language", "content"})
OPTION_KEYS = frozenset({"label", "approved"})
# A payload may hold any number of keys: only this many unknown ones are compared with the
# known ones, and shorter ones are not (`ttl` is no misspelt `title`, `q` no `question`).
MAX_KEYS_COMPARED = 100
MIN_KEY_COMPARED = 4
MAX_WARNINGS = 20

KEY_PATTERN = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*(?:\.[a-z0-9]+(?:-[a-z0-9]+)*)*$")
_SCALARS = frozenset({int, float, bool, type(None)})


@dataclass(frozen=True)
class BreakpointFields:
    """What the service stores, derived from the request body and the payload."""

    title: str | None
    question: str | None
    tags: list[str]
    key: str


def _check_string(errors: dict, path: str, value: Any, *, max_length: int = 10_000) -> None:
    if not isinstance(value, str):
        errors[path] = ["Must be a string."]
    elif len(value) > max_length:
        errors[path] = [f"At most {max_length} characters."]


def _check_relative_path(errors: dict, path: str, value: Any) -> None:
    if not isinstance(value, str) or not value.strip():
        errors[path] = ["Must be a non-empty string."]
        return
    if len(value) > MAX_PATH_LENGTH:
        errors[path] = [f"At most {MAX_PATH_LENGTH} characters."]
        return
    posix, windows = PurePosixPath(value), PureWindowsPath(value)
    if posix.is_absolute() or windows.is_absolute() or windows.drive or value.startswith("\\"):
        errors[path] = ["Must be relative to the run directory, not absolute."]
    elif ".." in posix.parts or ".." in windows.parts:
        errors[path] = ["Must not contain '..'."]
    elif problem := text_problem(value):
        errors[path] = [problem]


def validate_tags(errors: dict, path: str, value: Any) -> list[str]:
    if not isinstance(value, list):
        errors[path] = ["Must be a list of strings."]
        return []
    if len(value) > MAX_TAGS:
        errors[path] = [f"At most {MAX_TAGS} tags."]
        return []
    tags: dict[str, None] = {}  # an ordered set: de-duplication stays linear
    for index, tag in enumerate(value):
        if not isinstance(tag, str) or not tag.strip():
            errors[f"{path}[{index}]"] = ["Must be a non-empty string."]
        elif problem := text_problem(tag):
            errors[f"{path}[{index}]"] = [problem]
        elif len(tag) > MAX_TAG_LENGTH:
            errors[f"{path}[{index}]"] = [f"At most {MAX_TAG_LENGTH} characters."]
        else:
            tags[tag.strip()] = None
    return list(tags)


def _check_files(errors: dict, files: Any) -> None:
    base = "payload.context.files"
    if not isinstance(files, list):
        errors[base] = ["Must be a list of file objects."]
        return
    if len(files) > MAX_FILES:
        errors[base] = [f"At most {MAX_FILES} files."]
        return
    formats = set(FileFormat.values)
    for index, item in enumerate(files):
        at = f"{base}[{index}]"
        if not isinstance(item, Mapping):
            errors[at] = ["Must be an object with a path (and optionally a format)."]
            continue
        _check_relative_path(errors, f"{at}.path", item.get("path"))
        # Omitted (or null), the format is inferred from the path (core.fileformats).
        file_format = item.get("format")
        if file_format is not None and (
            not isinstance(file_format, str) or file_format not in formats
        ):
            errors[f"{at}.format"] = [
                f"Must be one of: {', '.join(sorted(formats))}; or omitted, to infer it "
                "from the path's extension."
            ]
        if "language" in item and item["language"] is not None:
            _check_string(
                errors, f"{at}.language", item["language"], max_length=MAX_LANGUAGE_LENGTH
            )
        if "content" in item and item["content"] is not None:
            _check_string(errors, f"{at}.content", item["content"], max_length=MAX_CONTENT_LENGTH)


def _check_context(errors: dict, context: Any) -> None:
    if not isinstance(context, Mapping):
        errors["payload.context"] = ["Must be an object."]
        return
    if context.get("runId") is not None:
        _check_string(
            errors, "payload.context.runId", context["runId"], max_length=MAX_RUN_ID_LENGTH
        )
    if "files" in context and context["files"] is not None:
        _check_files(errors, context["files"])


def _check_expert(errors: dict, expert: Any) -> None:
    names = [expert] if isinstance(expert, str) else expert
    if not isinstance(names, list) or not names:
        errors["payload.expert"] = ["Must be a name or a non-empty list of names."]
        return
    # The count first: one error for an over-long list, not one per item.
    if len(names) > MAX_EXPERTS:
        errors["payload.expert"] = [f"At most {MAX_EXPERTS} names."]
        return
    for index, name in enumerate(names):
        if not isinstance(name, str) or not name.strip() or len(name) > MAX_EXPERT_NAME_LENGTH:
            errors[f"payload.expert[{index}]"] = [
                f"Must be a non-empty name ({MAX_EXPERT_NAME_LENGTH} chars max)."
            ]


def _check_options(errors: dict, options: Any) -> None:
    """Each option is a label (a string) or an object {label, approved?} whose `approved`
    is the verdict choosing it releases with. Labels name options, so an object's label
    is unique; a list of plain strings may repeat one (it always could: same meaning)."""
    if not isinstance(options, list) or not options:
        errors["payload.options"] = [
            "Must be a non-empty list of strings or {label, approved} objects."
        ]
        return
    if len(options) > MAX_OPTIONS:
        errors["payload.options"] = [f"At most {MAX_OPTIONS} options."]
        return
    seen: dict[str, tuple[int, bool]] = {}  # label -> (first index, carried by an object)
    for index, option in enumerate(options):
        at = f"payload.options[{index}]"
        is_object = isinstance(option, Mapping)
        label = option.get("label") if is_object else option
        if is_object and "approved" in option and not isinstance(option["approved"], bool):
            errors[f"{at}.approved"] = ["Must be true or false."]
        if not isinstance(label, str) or not label.strip() or len(label) > MAX_OPTION_LENGTH:
            where = f"{at}.label" if is_object else at
            errors[where] = [
                f"Must be a non-empty string ({MAX_OPTION_LENGTH} chars max)"
                + (", or an object with a label." if not is_object else ".")
            ]
            continue
        first = seen.get(label)
        if first is not None and (is_object or first[1]):
            errors[f"{at}.label" if is_object else at] = [
                f"Duplicate label: payload.options[{first[0]}] already has it."
            ]
        elif first is None:
            seen[label] = (index, is_object)


def _storage_problems(payload: Mapping[str, Any]) -> dict[str, list[str]]:
    """What keeps `payload` from being stored and returned as sent: text the database cannot
    hold, numbers outside I-JSON (the payloadDigest recomputes from the payload as returned),
    and a proposal's numbers an approval could not approve exactly, as release values are."""
    if problem := storable_problem(payload):
        return {"payload": [problem]}
    errors = number_problems(payload, "payload")
    if isinstance(proposal := payload.get(PROPOSAL_KEY), Mapping):
        errors.update(answer_number_problems(proposal, "payload.proposal"))
    return errors


def validate_payload(payload: Any) -> None:
    """Raise InvalidInput, with every problem keyed by JSON path, if `payload` is malformed."""
    if not isinstance(payload, Mapping):
        raise InvalidInput("payload must be a JSON object.", {"payload": ["Must be an object."]})
    errors = _storage_problems(payload)
    if "question" in payload:
        _check_string(
            errors, "payload.question", payload["question"], max_length=MAX_QUESTION_LENGTH
        )
    if "title" in payload and payload["title"] is not None:
        _check_string(errors, "payload.title", payload["title"], max_length=MAX_TITLE_LENGTH)
    if "context" in payload and payload["context"] is not None:
        _check_context(errors, payload["context"])
    if "expert" in payload and payload["expert"] is not None:
        _check_expert(errors, payload["expert"])
    if "tags" in payload and payload["tags"] is not None:
        validate_tags(errors, "payload.tags", payload["tags"])
    if "strategy" in payload and payload["strategy"] not in Strategy.values:
        errors["payload.strategy"] = [f"Must be one of: {', '.join(Strategy.values)}."]
    if "previousFeedback" in payload and payload["previousFeedback"] is not None:
        _check_string(
            errors,
            "payload.previousFeedback",
            payload["previousFeedback"],
            max_length=MAX_PREVIOUS_FEEDBACK_LENGTH,
        )
    if "attempt" in payload and not (is_int(payload["attempt"]) and payload["attempt"] >= 1):
        errors["payload.attempt"] = ["Must be a whole number, 1 or more."]
    if "breakpointId" in payload:
        value = payload["breakpointId"]
        if (
            not isinstance(value, str)
            or len(value) > MAX_KEY_LENGTH
            or not KEY_PATTERN.match(value)
        ):
            errors["payload.breakpointId"] = [
                "Must be dotted kebab-case, e.g. 'confirm.star-repo' (lowercase letters, "
                "digits, '-' and '.')."
            ]
    if "autoApproveAfterN" in payload:
        problem = auto_approve_after_n_problem(payload["autoApproveAfterN"])
        if problem:
            errors["payload.autoApproveAfterN"] = [problem]
    if "presentAlwaysApprove" in payload and not isinstance(payload["presentAlwaysApprove"], bool):
        errors["payload.presentAlwaysApprove"] = ["Must be true or false."]
    if "options" in payload and payload["options"] is not None:
        _check_options(errors, payload["options"])
    check_timeout_policy(errors, payload)
    check_prevent_self_review(errors, payload)
    if "payload" not in errors:  # a form too deep to re-encode is refused above
        check_form_payload(errors, payload)
    if errors:
        first_path, first_messages = next(iter(errors.items()))
        raise InvalidInput(f"{first_path}: {first_messages[0]}", errors)


def _explicit_key(payload: Mapping[str, Any], title: str | None) -> str:
    """payload.breakpointId, else the slug of the title ('Review Design Doc' ->
    'review-design-doc'), else "" (the agent named nothing)."""
    explicit = payload.get("breakpointId")
    if isinstance(explicit, str) and explicit:
        return explicit
    # slugify keeps "_" and can leave "--"; a key is kebab-case like payload.breakpointId.
    return re.sub(r"[-_]+", "-", slugify(title or ""))[:MAX_KEY_LENGTH].strip("-")


def derive_key(payload: Mapping[str, Any], title: str | None) -> str:
    """The breakpoint's key: the explicit one, else FALLBACK_KEY (shared by all unnamed ones)."""
    return _explicit_key(payload, title) or FALLBACK_KEY


def key_is_explicit(payload: Mapping[str, Any], title: str | None) -> bool:
    """Whether the key names this question (a breakpointId, or a title that slugs to one).

    Only such a key carries auto-approval history: autoApproveAfterN counts decisions per
    key, and "Always approve" writes a rule for the key; FALLBACK_KEY would lump together
    every unnamed question of an agent.
    """
    return bool(_explicit_key(payload, title))


def _check_auto_approval_key(payload: Mapping[str, Any], title: str | None) -> None:
    """autoApproveAfterN needs an explicit key: refused (400) without one, never ignored."""
    after_n = payload.get("autoApproveAfterN")
    counts = isinstance(after_n, int) and after_n >= MIN_AUTO_APPROVE_AFTER_N
    if counts and not key_is_explicit(payload, title):
        message = (
            "autoApproveAfterN needs a key that names this question: set "
            "payload.breakpointId (e.g. 'deploy.production') or a title. Without one, "
            "approvals of unrelated questions would count together."
        )
        raise InvalidInput(message, {"payload.autoApproveAfterN": [message]})


def resolve_fields(
    *, payload: Mapping[str, Any], title: str | None, tags: list[str] | None
) -> BreakpointFields:
    """Top-level title and tags win over the payload's; the key follows the winning title."""
    validate_payload(payload)
    effective_title = title if title is not None else payload.get("title")
    _check_auto_approval_key(payload, effective_title)
    errors: dict[str, list[str]] = {}
    effective_tags = (
        validate_tags(errors, "tags", tags)
        if tags is not None
        else validate_tags(errors, "payload.tags", payload.get("tags") or [])
    )
    if errors:
        raise InvalidInput(next(iter(errors.values()))[0], errors)
    question = payload.get("question")
    return BreakpointFields(
        title=effective_title or None,
        question=question if isinstance(question, str) else None,
        tags=effective_tags,
        key=derive_key(payload, effective_title),
    )


@dataclass(frozen=True)
class Option:
    """One of payload.options: its label and, when the agent gave one, its verdict."""

    label: str
    approved: bool | None = None


def options_of(payload: Mapping[str, Any]) -> list[Option]:
    """payload.options as Options (plain strings carry no verdict), in the agent's order."""
    options = payload.get("options")
    if not isinstance(options, list):
        return []
    found: list[Option] = []
    for item in options:
        if isinstance(item, str):
            found.append(Option(item))
        elif isinstance(item, Mapping) and isinstance(item.get("label"), str):
            verdict = item.get("approved")
            found.append(Option(item["label"], verdict if isinstance(verdict, bool) else None))
    return found


def payload_options(payload: Mapping[str, Any]) -> list[str]:
    """The options' labels (what `option` in a release names)."""
    return [option.label for option in options_of(payload)]


def payload_warnings(payload: Any) -> list[str]:
    """The payload's keys that look like misspelt known ones, each with what it probably
    meant: `payload.questoin: did you mean question?`. A near-miss is an unknown key close
    to a known key (core.spelling.close_match) that the same object does not have. The
    payload stays free-form: these are warnings for the create answer, never errors."""
    found: list[str] = []
    for data, key, known, at in itertools.islice(_unknown_keys(payload), MAX_KEYS_COMPARED):
        meant = close_match(key, known)
        if meant is not None and meant not in data:
            shown = key if key.isprintable() else json.dumps(key)
            found.append(f"{at}.{shown}: did you mean {meant}?")
            if len(found) == MAX_WARNINGS:
                break
    return found


def _objects(payload: Any) -> Iterator[tuple[Any, frozenset[str], str]]:
    """Each object of the payload that has known keys: (object, its known keys, its path)."""
    if not isinstance(payload, Mapping):
        return
    yield payload, PAYLOAD_KEYS, "payload"
    context = payload.get("context")
    if isinstance(context, Mapping):
        yield context, CONTEXT_KEYS, "payload.context"
        files = context.get("files")
        for index, item in enumerate(files if isinstance(files, list) else []):
            yield item, FILE_KEYS, f"payload.context.files[{index}]"
    options = payload.get("options")
    for index, item in enumerate(options if isinstance(options, list) else []):
        yield item, OPTION_KEYS, f"payload.options[{index}]"


def _unknown_keys(payload: Any) -> Iterator[tuple[Mapping, str, frozenset[str], str]]:
    for data, known, at in _objects(payload):
        if isinstance(data, Mapping):
            for key in data:
                if isinstance(key, str) and key not in known and len(key) >= MIN_KEY_COMPARED:
                    yield data, key, known, at
