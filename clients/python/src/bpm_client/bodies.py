"""Request bodies and query parameters, built from Python arguments (snake_case in, camelCase out)."""

from __future__ import annotations

import json
import os
import stat
import warnings
from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, TypedDict, Union

FileArg = Union[str, "os.PathLike[str]", Mapping[str, Any]]


class BreakpointFields(TypedDict, total=False):
    """What a breakpoint may say besides its question (keyword arguments of create/breakpoint)."""

    title: str | None
    payload: Mapping[str, Any] | None
    files: Iterable[FileArg]
    tags: Iterable[str]
    expert: str | Iterable[str] | None
    strategy: str | None
    options: Iterable[str] | None
    ttl: int | None
    run_id: str | None
    key: str | None
    on_timeout: str | None
    agent_id: str | None
    form: Mapping[str, Any] | None
    proposal: Mapping[str, Any] | None


class ListFilters(TypedDict, total=False):
    """Filters of `list` (keyword arguments)."""

    status: str | None
    tags: Iterable[str]
    agent_id: str | None
    run_id: str | None
    search: str | None
    created_after: datetime | str | None
    created_before: datetime | str | None
    ordering: str | None
    page_size: int | None


# A context file's text is cut here (the server refuses a longer one; the reviewer sees a
# note, the caller a ContextFileCut warning).
MAX_FILE_CHARS = 1_000_000


# The files the client reads itself share this many bytes of the request body (as JSON):
# the service takes 5 MiB (BPM_MAX_BODY_BYTES) in all, so five files of 1,000,000
# characters would each pass the cut above and be refused (413) together.
FILES_BUDGET_BYTES = 4_000_000
CUT_NOTE = "\n[... cut by bpm: {size:,} characters in all; only the first {kept:,} are sent, to keep the request under its size limit ...]"


class ContextFileCut(UserWarning):
    """A file given by path was longer than MAX_FILE_CHARS: only its start is sent."""


def context_file(item: FileArg, *, root: Path | None = None) -> dict[str, Any]:
    """A payload.context.files entry from a path (read now) or a ready dict (sent as given).

    The path sent is relative to `root` (the working directory) when the file lies under it,
    else its bare name: the API takes relative paths only. The server infers the format from
    the extension. A file over MAX_FILE_CHARS characters is cut there, with a note for the
    reviewer and a ContextFileCut warning.
    """
    if isinstance(item, Mapping):
        return dict(item)
    path = Path(item)
    with path.open("rb") as file:
        content = file_text(file.fileno())
        if len(content) > MAX_FILE_CHARS:  # cut, with file_text's note
            size = os.fstat(file.fileno()).st_size
            message = (
                f"{item}: {size:,} bytes; only the first {MAX_FILE_CHARS:,} characters are sent"
            )
            warnings.warn(ContextFileCut(message), stacklevel=2)
    return {"path": _relative(path, root or Path.cwd()), "content": content}


def within_budget(files: list[Any], budget: int = FILES_BUDGET_BYTES) -> list[Any]:
    """`files` whose contents, as JSON, take at most `budget` bytes together: when they take
    more, the longest are cut to one share each (the shorter keep theirs whole and leave
    what they do not use to the others), with a note saying so and a ContextFileCut."""
    sizes = [_json_size(_content(item)) for item in files]
    if sum(sizes) <= budget:
        return files
    left = len(files)
    for size in sorted(sizes):
        if size > budget // left:
            break
        budget, left = budget - size, left - 1
    share = budget // max(left, 1)
    fitted = []
    for item, size in zip(files, sizes, strict=True):
        if size > share and isinstance(_content(item), str):
            item = {**item, "content": _cut_to(item["content"], share)}
            warnings.warn(
                ContextFileCut(f"{item.get('path')}: cut to about {share:,} bytes"), stacklevel=3
            )
        fitted.append(item)
    return fitted


def _content(item: Any) -> Any:
    return item.get("content") if isinstance(item, Mapping) else None


def _json_size(content: Any) -> int:
    """Bytes `content` takes in a JSON body (escaped as ASCII: the most any encoder uses)."""
    return len(json.dumps(content)) if isinstance(content, str) else 0


def _cut_to(content: str, size: int) -> str:
    """The longest start of `content` that, with the note, takes at most `size` bytes."""
    low, high = 0, len(content)
    while low < high:  # the longest start that fits (sizes grow with the start's length)
        middle = (low + high + 1) // 2
        note = CUT_NOTE.format(size=len(content), kept=middle)
        if _json_size(content[:middle] + note) <= size:
            low = middle
        else:
            high = middle - 1
    return content[:low] + CUT_NOTE.format(size=len(content), kept=low)


def file_text(fd: int) -> str:
    """The text of the open file `fd` (UTF-8, undecodable bytes replaced), cut at
    MAX_FILE_CHARS with a note saying so: no more than that is ever read. `fd` stays open."""
    with open(fd, encoding="utf-8", errors="replace", closefd=False) as file:
        content = file.read(MAX_FILE_CHARS + 1)
    if len(content) <= MAX_FILE_CHARS:
        return content
    status = os.fstat(fd)
    size = f"the file has {status.st_size:,} bytes; " if stat.S_ISREG(status.st_mode) else ""
    return content[:MAX_FILE_CHARS] + (
        f"\n[... cut by bpm: {size}only its first {MAX_FILE_CHARS:,} characters are sent ...]"
    )


def _relative(path: Path, root: Path) -> str:
    resolved = path.resolve()
    try:
        relative = resolved.relative_to(root.resolve())
    except ValueError:
        return resolved.name
    return relative.as_posix()


def breakpoint_body(
    question: str | None,
    *,
    title: str | None = None,
    payload: Mapping[str, Any] | None = None,
    files: Iterable[FileArg] = (),
    tags: Iterable[str] = (),
    expert: str | Iterable[str] | None = None,
    strategy: str | None = None,
    options: Iterable[str] | None = None,
    ttl: int | None = None,
    run_id: str | None = None,
    key: str | None = None,
    on_timeout: str | None = None,
    agent_id: str | None = None,
    form: Mapping[str, Any] | None = None,
    proposal: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The body of `POST /api/breakpoints`. Explicit arguments win over `payload`'s keys.

    `form`: a JSON Schema (draft 2020-12, 2019-09 or draft-07; type object) of the
    answer; `proposal`: the values proposed (the reviewer approves them as they are or
    edits them first)."""
    content: dict[str, Any] = dict(payload or {})
    given = {
        "question": question,
        "title": title,
        "expert": expert if expert is None or isinstance(expert, str) else list(expert),
        "strategy": strategy,
        "options": None if options is None else list(options),
        "breakpointId": key,
        "onTimeout": on_timeout,
        "form": None if form is None else dict(form),
        "proposal": None if proposal is None else dict(proposal),
    }
    content.update({name: value for name, value in given.items() if value is not None})
    file_list = within_budget([context_file(item) for item in files])
    if file_list:
        context = dict(content.get("context") or {})
        context["files"] = [*(context.get("files") or []), *file_list]
        content["context"] = context
    body: dict[str, Any] = {"payload": content}
    optional = {
        "agentId": agent_id,
        "runId": run_id,
        "title": title,
        "tags": list(tags) or None,
        "ttlSeconds": ttl,
    }
    body.update({name: value for name, value in optional.items() if value is not None})
    return body


def list_params(
    *,
    status: str | None = None,
    tags: Iterable[str] = (),
    agent_id: str | None = None,
    run_id: str | None = None,
    search: str | None = None,
    created_after: datetime | str | None = None,
    created_before: datetime | str | None = None,
    ordering: str | None = None,
    page_size: int | None = None,
) -> list[tuple[str, str]]:
    """Query parameters of `GET /api/breakpoints` (a repeated `tag`: all must match)."""
    single = {
        "status": status,
        "agentId": agent_id,
        "runId": run_id,
        "search": search,
        "createdAfter": _when(created_after),
        "createdBefore": _when(created_before),
        "ordering": ordering,
        "pageSize": None if page_size is None else str(page_size),
    }
    params = [(name, value) for name, value in single.items() if value is not None]
    return params + [("tag", tag) for tag in tags]


def _when(value: datetime | str | None) -> str | None:
    return value.isoformat() if isinstance(value, datetime) else value


def feedback_body(
    comment: str,
    *,
    release: bool,
    approved: bool = True,
    option: str | None = None,
    values: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {"comment": comment, "release": release}
    if release:
        body["approved"] = approved
    if option is not None:
        body["option"] = option
    if values is not None:
        body["values"] = dict(values)
    return body


def rule_body(
    pattern: str | None,
    *,
    action: str | None = None,
    key: str | None = None,
    n: int | None = None,
    since: str | None = None,
) -> dict[str, Any]:
    """The body of POST /api/rules/simulate, without the keys not given."""
    given = {"pattern": pattern, "action": action, "key": key, "n": n, "since": since}
    return {name: value for name, value in given.items() if value is not None}
