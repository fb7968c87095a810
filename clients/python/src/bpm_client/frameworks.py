"""What the agent-framework adapters (langgraph.py, openai_agents.py) share: breakpoint keys
from the framework's names, idempotency keys from its ids, and the words a refusal gives.

No framework is imported here.
"""

from __future__ import annotations

import hashlib
import re

from .models import BreakpointResult

# The service's limits (core/limits.py): a key, an Idempotency-Key, a runId.
MAX_KEY_LENGTH = 255
MAX_IDEMPOTENCY_KEY_LENGTH = 255
MAX_RUN_ID_LENGTH = 128


def kebab(name: str) -> str:
    """`Deploy_Prod` -> `deploy-prod`: one part of a key in the service's dotted kebab-case."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "x"


def breakpoint_key(framework: str, name: str) -> str:
    """`langgraph.<node>`, `openai-agents.<tool>`: the key auto-approval rules and
    autoApproveAfterN count by, one per node or tool."""
    return f"{framework}.{kebab(name)}"[:MAX_KEY_LENGTH].rstrip("-.")


def idempotency_key(framework: str, *ids: str) -> str:
    """`<framework>.<id>.<id>` from the framework's own ids (a thread and an interrupt, a
    tool call): the same ids give the same key, so a run that starts again finds the
    breakpoint it opened before. Too long for the service, the ids are hashed."""
    key = ".".join((framework, *ids))
    if len(key) <= MAX_IDEMPOTENCY_KEY_LENGTH:
        return key
    digest = hashlib.sha256("\0".join(ids).encode()).hexdigest()
    return f"{framework}.sha256.{digest}"


def run_id(candidate: str | None) -> str | None:
    """`candidate` as the breakpoint's runId when the service takes it (else none)."""
    if candidate and len(candidate) <= MAX_RUN_ID_LENGTH:
        return candidate
    return None


def people(responded_by: str | list[str] | None) -> str:
    if isinstance(responded_by, list):
        return ", ".join(responded_by)
    return responded_by or ""


def not_approved(result: BreakpointResult) -> str:
    """Why nothing ran, for a model or a log: rejected by whom (and their feedback), expired,
    or cancelled; with the breakpoint's id."""
    who = people(result.responded_by)
    request = f"approval request {result.breakpoint_id}"
    if result.status == "expired":
        why = f"nobody answered {request} in time (it expired)"
    elif result.status == "cancelled":
        why = f"{request} was cancelled" + (f" by {who}" if who else "")
    else:
        why = f"rejected by {who or 'a reviewer'} ({request})"
    feedback = (result.feedback or "").strip()
    return f"{why}. Their feedback: {feedback}" if feedback else why
