"""From a babysitter breakpoint effect to this service's request, and from a decision back
to the `BreakpointResult` value the run's process receives.

The effect's task.json holds the `ctx.breakpoint(payload, options)` call:
`metadata.payload` is the payload as the process wrote it; `metadata.label`, and
`metadata.expert`/`tags`/`strategy` when the process passed them in `options`. A form the
reviewer answers goes in the payload (`payload.form`, `payload.proposal`): babysitter's SDK
(0.0.187) copies no other option into the metadata; a metadata `form`/`proposal` is read
too, should a later SDK copy them. The approved `values` come back in the result. The payload
is sent as it is (its other keys, `autoApproveAfterN`, `onTimeout`, `previousFeedback`...,
keep their meaning here), with the fields below filled in or made acceptable.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..bodies import within_budget
from ..models import BreakpointResult, StatusEntry
from .files import project_file
from .runs import Effect

TAG = "babysitter"  # every breakpoint the bridge asks carries it (and its effect id)
DEFAULT_LABEL = "breakpoint"  # the SDK's label when the process gave none
MAX_TAGS = 50
MAX_KEY_LENGTH = 200
KEY_PART = re.compile(r"[^a-z0-9]+")


def breakpoint_request(effect: Effect, project_dir: Path) -> dict[str, Any]:
    """Keyword arguments of `Client.create` for the effect (its payload, title, tags, run)."""
    meta = effect.metadata
    given = meta.get("payload")
    payload: dict[str, Any] = dict(given) if isinstance(given, Mapping) else {}
    if given is not None and not isinstance(given, Mapping):
        payload["question"] = str(given)  # ctx.breakpoint("Continue?")
    label = meta.get("label") if isinstance(meta.get("label"), str) else None
    named = label if label and label != DEFAULT_LABEL else None
    title = payload.get("title") if isinstance(payload.get("title"), str) else named
    if not isinstance(payload.get("question"), str) or not payload["question"].strip():
        payload["question"] = title or f"babysitter breakpoint {effect.effect_id}"
    for field in ("expert", "strategy", "form", "proposal"):
        if payload.get(field) is None and meta.get(field) is not None:
            payload[field] = meta[field]
    if "breakpointId" in payload:
        key = canonical_key(payload["breakpointId"])
        if key:
            payload["breakpointId"] = key
        else:
            del payload["breakpointId"]
    context = payload.get("context")
    if isinstance(context, Mapping) and isinstance(context.get("files"), list):
        files = within_budget([with_content(item, project_dir) for item in context["files"]])
        payload["context"] = {**context, "files": files}
    return {
        "payload": payload,
        "title": title,
        "tags": tags_of(effect, payload),
        "run_id": effect.run.run_id,
    }


def canonical_key(value: Any) -> str | None:
    """`breakpointId` as the dotted kebab-case key the service takes ('Deploy Plan' ->
    'deploy-plan'); a valid key is unchanged, so rules written for it match."""
    if not isinstance(value, str):
        return None
    parts = (KEY_PART.sub("-", part.lower()).strip("-") for part in value.split("."))
    key = ".".join(part for part in parts if part)[:MAX_KEY_LENGTH].strip(".-")
    return key or None


def tags_of(effect: Effect, payload: Mapping[str, Any]) -> list[str]:
    """The process's tags (payload, then options), then `babysitter` and the effect id."""
    found: list[Any] = []
    for source in (payload.get("tags"), effect.metadata.get("tags")):
        if isinstance(source, list):
            found += source
    own = [t.strip() for t in found if isinstance(t, str) and t.strip()]
    own = [t for t in dict.fromkeys(own) if t not in (TAG, effect.effect_id)]
    return [*own[: MAX_TAGS - 2], TAG, effect.effect_id]


def with_content(item: Any, project_dir: Path) -> Any:
    """A context file with its text, read from inside the project (the reviewer reads it;
    the service has no access to the agent's disk). A file left out says which and why."""
    if not isinstance(item, Mapping) or not isinstance(item.get("path"), str):
        return item
    if item.get("content") is not None:
        return dict(item)
    return project_file(item, project_dir)


def run_answer(entry: StatusEntry) -> dict[str, Any]:
    """The value posted to the run for a decided (or vanished) breakpoint.

    A release is the service's BreakpointResult as it is: `approved`, `response`,
    `feedback`, `option`, `respondedBy`, `allResponses`, and the answer to a form:
    `values` (what the process should run) and `edited`. An expiry or a cancellation is a
    rejection whose `feedback` says why, so the process's own retry pattern takes over.
    `status` and `breakpointId` say which it was and where.
    """
    if entry.error is not None or entry.status is None:
        reason = "The breakpoint no longer exists in Breakpoint Manager."
        return {"approved": False, "feedback": reason, "status": "deleted"}
    result = entry.result or BreakpointResult(approved=False)
    value = {k: v for k, v in result.to_json().items() if v is not None}
    value["approved"] = bool(result.approved) and entry.status == "released"
    if entry.status != "released" and not value.get("feedback"):
        value["feedback"] = f"The breakpoint was {entry.status} in Breakpoint Manager."
    value["status"] = entry.status
    value["breakpointId"] = entry.breakpoint_id
    return value


def refused_answer(message: str) -> dict[str, Any]:
    """The value posted when the service refuses to store the breakpoint (400, 413, 409)."""
    return {
        "approved": False,
        "feedback": f"Breakpoint Manager refused this breakpoint: {message}",
        "status": "refused",
    }
