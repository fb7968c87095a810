"""The policies' validators, one per setting, used wherever the setting is given: the
timeout policy (a payload's, or a notification route's defaults) and autoApproveAfterN
(a payload, the API, the console, the command)."""

from collections.abc import Mapping
from typing import Any

from core.choices import OnTimeout
from core.limits import (
    MAX_AUTO_APPROVE_AFTER_N,
    MAX_EXPERT_NAME_LENGTH,
    MAX_TTL_SECONDS,
    MIN_AUTO_APPROVE_AFTER_N,
    MIN_REMIND_EVERY_SECONDS,
    NO_AUTO_APPROVE_THRESHOLD,
)
from core.storable import text_problem


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_seconds(errors: dict, path: str, value: Any, low: int) -> None:
    if not (is_int(value) and low <= value <= MAX_TTL_SECONDS):
        errors[path] = [f"Must be a whole number of seconds from {low} to {MAX_TTL_SECONDS}."]


def check_prevent_self_review(
    errors: dict, values: Mapping[str, Any], prefix: str = "payload"
) -> None:
    """preventSelfReview (a payload, or a route's defaults) is true, false or absent."""
    prevent = values.get("preventSelfReview")
    if prevent is not None and not isinstance(prevent, bool):
        errors[f"{prefix}.preventSelfReview"] = ["Must be true or false."]


def check_timeout_policy(errors: dict, payload: Mapping[str, Any], prefix: str = "payload") -> None:
    """onTimeout, escalateAfterSeconds + escalateTo, remindEverySeconds (a payload, or a
    route's defaults: `prefix` names where they are in the error paths)."""
    on_timeout = payload.get("onTimeout")
    if on_timeout is not None and on_timeout not in OnTimeout.values:
        errors[f"{prefix}.onTimeout"] = [f"Must be one of: {', '.join(OnTimeout.values)}."]
    if payload.get("escalateAfterSeconds") is not None:
        _check_seconds(errors, f"{prefix}.escalateAfterSeconds", payload["escalateAfterSeconds"], 1)
    if payload.get("remindEverySeconds") is not None:
        _check_seconds(
            errors,
            f"{prefix}.remindEverySeconds",
            payload["remindEverySeconds"],
            MIN_REMIND_EVERY_SECONDS,
        )
    escalate_to = payload.get("escalateTo")
    if escalate_to is not None:
        if not isinstance(escalate_to, str) or not escalate_to.strip():
            errors[f"{prefix}.escalateTo"] = ["Must be an expert name (a non-empty string)."]
        elif len(escalate_to) > MAX_EXPERT_NAME_LENGTH:
            errors[f"{prefix}.escalateTo"] = [f"At most {MAX_EXPERT_NAME_LENGTH} characters."]
        elif problem := text_problem(escalate_to):
            errors[f"{prefix}.escalateTo"] = [problem]
    elif on_timeout == OnTimeout.ESCALATE or payload.get("escalateAfterSeconds") is not None:
        errors[f"{prefix}.escalateTo"] = [
            "Required with onTimeout: escalate or escalateAfterSeconds: the expert to escalate to."
        ]


def auto_approve_after_n_problem(value: Any) -> str | None:
    """What is wrong with an autoApproveAfterN (payload, API, console, command), or None."""
    if is_int(value) and (
        value == NO_AUTO_APPROVE_THRESHOLD
        or MIN_AUTO_APPROVE_AFTER_N <= value <= MAX_AUTO_APPROVE_AFTER_N
    ):
        return None
    return (
        f"Must be {NO_AUTO_APPROVE_THRESHOLD} (disabled) or a whole number from "
        f"{MIN_AUTO_APPROVE_AFTER_N} to {MAX_AUTO_APPROVE_AFTER_N}."
    )
