"""Replay: what a rule would have done over the decisions already made, before it goes live.

An admin (or a management command, or CI through `bpm rules simulate`) gives a rule's body
(`pattern` + `action`, or `autoApproveAfterN` with a `key` and `n`) and a window (`since`);
the breakpoints app reads the finished breakpoints created in it and evaluates each with
the rule added to the rules that exist now, by the production precedence
(policies.autoapproval.precedence). This module checks who asks and what they sent; the
reading is registered by the breakpoints app (breakpoints.rule_replay), so this app does not
import it. docs/routing-and-auto-approval.md defines every figure of the answer.
"""

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from django.utils import timezone
from django.utils.dateparse import parse_datetime

from core.actors import Actor, require_admin
from core.exceptions import InvalidInput
from core.limits import MAX_AUTO_APPROVE_AFTER_N, MIN_AUTO_APPROVE_AFTER_N
from policies import autoapproval
from policies.models import AutoApprovalRule, RuleAction
from policies.validators import is_int

AFTER_N = "autoApproveAfterN"
ACTIONS = (*RuleAction.values, AFTER_N)
DEFAULT_SINCE = "90d"
MAX_SINCE_DAYS = 3660  # ten years: a window no retention keeps longer
LIST_CAP = 100  # rejectedButWouldApprove lists at most this many, newest first
CANDIDATE_ID = "candidate"  # what the simulated rule is called in a verdict's matchedRule
_DURATION = re.compile(r"^\s*(\d{1,7})\s*([wdhm])\s*$")
_UNIT_SECONDS = {"w": 7 * 86400, "d": 86400, "h": 3600, "m": 60}


@dataclass(frozen=True)
class Candidate:
    """The rule to replay: a pattern rule (`rule`, unsaved), or autoApproveAfterN on `key`."""

    action: str
    rule: AutoApprovalRule | None = None
    key: str | None = None
    n: int | None = None

    def describe(self) -> dict[str, Any]:
        if self.rule is not None:
            return {"action": self.action, "pattern": self.rule.pattern}
        return {"action": self.action, "key": self.key, "n": self.n}


@dataclass
class Replay:
    """The answer: the figures (docs/routing-and-auto-approval.md), and the rejected
    breakpoints the rule would have approved, newest first, at most `LIST_CAP`."""

    candidate: Candidate
    since: datetime
    considered: int = 0
    matched: int = 0
    would_auto_approve: int = 0
    agreed_with_humans: int = 0
    human_approved: int = 0
    human_rejected: int = 0
    rejected_but_would_approve: list[dict[str, Any]] = field(default_factory=list)
    rejected_but_would_approve_count: int = 0
    grant_approved: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "rule": self.candidate.describe(),
            "since": self.since,
            "considered": self.considered,
            "matched": self.matched,
            "wouldAutoApprove": self.would_auto_approve,
            "agreedWithHumans": self.agreed_with_humans,
            "humanApproved": self.human_approved,
            "humanRejected": self.human_rejected,
            "rejectedButWouldApprove": self.rejected_but_would_approve,
            "rejectedButWouldApproveCount": self.rejected_but_would_approve_count,
            "grantApproved": self.grant_approved,
        }


class HistoryReplay(Protocol):
    def __call__(self, candidate: Candidate, *, since: datetime) -> Replay: ...


_reader: HistoryReplay | None = None


def replay_register(reader: HistoryReplay) -> None:
    """The replay over the breakpoints' history: registered by the breakpoints app when
    ready (breakpoints.rule_replay.rule_replay), as the decision history is."""
    global _reader
    _reader = reader


def rule_simulate(
    *,
    actor: Actor,
    action: Any = RuleAction.AUTO_APPROVE,
    pattern: Any = None,
    key: Any = None,
    n: Any = None,
    since: Any = None,
    now: datetime | None = None,
) -> Replay:
    """What the rule would have done over the finished breakpoints created since `since`
    (admins and management commands). Bad input is InvalidInput naming the field."""
    require_admin(actor, "Only admins may simulate auto-approval rules.", or_system=True)
    candidate = _candidate(action=action, pattern=pattern, key=key, n=n)
    start = parse_since(DEFAULT_SINCE if since is None else since, now=now)
    if _reader is None:
        raise RuntimeError("No replay registered (the breakpoints app is not ready).")
    return _reader(candidate, since=start)


def _candidate(*, action: Any, pattern: Any, key: Any, n: Any) -> Candidate:
    if action not in ACTIONS:
        raise InvalidInput(
            f"action must be one of: {', '.join(ACTIONS)}.",
            {"action": [f"Must be one of: {', '.join(ACTIONS)}."]},
        )
    if action == AFTER_N:
        if pattern is not None:
            raise InvalidInput(
                f"{AFTER_N} takes a key and n, not a pattern.",
                {"pattern": [f"Not allowed with action {AFTER_N}: give key and n."]},
            )
        if not (is_int(n) and MIN_AUTO_APPROVE_AFTER_N <= n <= MAX_AUTO_APPROVE_AFTER_N):
            bounds = f"a whole number from {MIN_AUTO_APPROVE_AFTER_N} to {MAX_AUTO_APPROVE_AFTER_N}"
            raise InvalidInput(f"n must be {bounds}.", {"n": [f"Must be {bounds}."]})
        return Candidate(action=action, key=autoapproval.check_key(key), n=n)
    for name, value in (("key", key), ("n", n)):
        if value is not None:
            raise InvalidInput(
                f"{name} is only for action {AFTER_N}.",
                {name: [f"Only for action {AFTER_N}."]},
            )
    if pattern is None:
        raise InvalidInput("pattern is required.", {"pattern": ["This field is required."]})
    rule = AutoApprovalRule(
        id=CANDIDATE_ID,
        pattern=autoapproval.canonical_pattern(pattern),
        action=action,
        created_at=timezone.now(),
    )
    return Candidate(action=action, rule=rule)


def parse_since(value: Any, *, now: datetime | None = None) -> datetime:
    """The window's start: an ISO 8601 time (UTC when it names no offset) or a duration
    back from now (`90d`, `12h`, `30m`, `2w`); not in the future, at most MAX_SINCE_DAYS."""
    now = now or timezone.now()
    problem = "Must be an ISO 8601 time or a duration such as 90d, 12h, 30m or 2w."
    if not isinstance(value, str):
        raise InvalidInput(f"since: {problem}", {"since": [problem]})
    duration = _DURATION.match(value)
    try:
        if duration:
            start = now - timedelta(seconds=int(duration[1]) * _UNIT_SECONDS[duration[2].lower()])
        else:
            parsed = parse_datetime(value.strip())
            if parsed is None:
                raise ValueError(value)
            start = parsed if timezone.is_aware(parsed) else parsed.replace(tzinfo=UTC)
    except (ValueError, OverflowError):
        raise InvalidInput(f"since: {problem}", {"since": [problem]}) from None
    if start > now:
        raise InvalidInput("since is in the future.", {"since": ["Must not be in the future."]})
    if now - start > timedelta(days=MAX_SINCE_DAYS):
        limit = f"At most {MAX_SINCE_DAYS} days back."
        raise InvalidInput(f"since: {limit}", {"since": [limit]})
    return start
