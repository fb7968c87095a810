"""A rule replayed over the finished breakpoints of a window (policies.replay asks for it).

Never row by row for a pattern rule: the database groups the window's breakpoints by what
a pattern and the precedence can read (key, tags, experts, preventSelfReview, whether a
person had to answer a form) and by outcome; each distinct group is evaluated once, by the
production precedence (policies.autoapproval.precedence) with the candidate added after
the rules that exist now. Only the listed rejections are read one by one, newest first, up
to the cap. autoApproveAfterN depends on the order of decisions, so its replay walks the
key's breakpoints in order, per agent, as production counts them.
"""

from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.db.models import (
    Count,
    Q,
    QuerySet,
)

from breakpoints.models import Breakpoint
from breakpoints.models.breakpoint import FINISHED
from core.naming import FALLBACK_KEY
from core.timestamps import timestamp
from policies.autoapproval import always_break_on_tags, precedence, rule_list
from policies.foureyes import under_four_eyes
from policies.models import AutoApprovalRule
from policies.patterns import stored_pattern
from policies.replay import LIST_CAP, Candidate, Replay

APPROVED, REJECTED = "approved", "rejected"  # Breakpoint.person_decision; None: nobody's


# What the precedence reads of a breakpoint: key, tags, experts, preventSelfReview, and
# whether its form needed a person.
Shape = tuple[str, tuple[str, ...], tuple[str, ...], bool, bool]


def finished_since(since: datetime) -> QuerySet[Breakpoint]:
    """The window: finished breakpoints created at or after `since` (a rule acts at creation)."""
    return Breakpoint.objects.filter(status__in=FINISHED, created_at__gte=since)


def _shape(key: str, tags: Any, experts: Any, prevent: Any, needs: Any) -> Shape:
    return (key, tuple(tags or ()), tuple(experts or ()), bool(prevent), bool(needs))


class _Judge:
    """The production verdict of a shape, with the rules and tags read once."""

    def __init__(self, candidate: AutoApprovalRule | None) -> None:
        existing = list(rule_list())
        self.rules = [*existing, candidate] if candidate is not None else existing
        self.blocked = frozenset(always_break_on_tags())

    def blocking_tag(self, tags: list[str]) -> str | None:
        return next((tag for tag in tags if tag in self.blocked), None)

    def approves(self, shape: Shape, *, streak: int = 0, threshold: int = -1) -> bool:
        key, tags, experts, prevent, needs = shape
        return precedence(
            key=key,
            tags=list(tags),
            experts=list(experts),
            rules=self.rules,
            blocking_tag=self.blocking_tag,
            four_eyes=under_four_eyes(prevent),
            needs_answer=needs,
            streak=streak,
            threshold=threshold,
        ).recommended


def _tally(replay: Replay, count: int, outcome: str | None, would: bool) -> None:
    """Count `count` matched breakpoints of one outcome."""
    replay.matched += count
    if outcome == APPROVED:
        replay.human_approved += count
    elif outcome == REJECTED:
        replay.human_rejected += count
    if would:
        replay.would_auto_approve += count
        if outcome == APPROVED:
            replay.agreed_with_humans += count
        elif outcome == REJECTED:
            replay.rejected_but_would_approve_count += count


def rule_replay(candidate: Candidate, *, since: datetime) -> Replay:
    """policies.replay's reader (registered in apps.py)."""
    replay = Replay(candidate=candidate, since=since)
    if candidate.rule is None:
        return _replay_after_n(replay, candidate, since)
    return _replay_pattern(replay, candidate.rule, since)


def _replay_pattern(replay: Replay, rule: AutoApprovalRule, since: datetime) -> Replay:
    pattern = stored_pattern(rule.pattern)
    assert pattern is not None  # policies.replay canonicalised it
    judge = _Judge(rule)
    groups = (
        finished_since(since)
        .values("key", "tags", "experts", "prevent_self_review", "needs_person", "person_decision")
        .annotate(count=Count("*"))
        .order_by()
    )
    verdicts: dict[Shape, bool | None] = {}  # None: not matched
    listed: set[Shape] = set()
    for group in groups:
        count = group["count"]
        replay.considered += count
        shape = _shape(
            group["key"],
            group["tags"],
            group["experts"],
            group["prevent_self_review"],
            group["needs_person"],
        )
        if shape not in verdicts:
            matched = pattern.matches(shape[0], tags=shape[1], experts=shape[2])
            verdicts[shape] = judge.approves(shape) if matched else None
        would = verdicts[shape]
        if would is None:
            continue
        _tally(replay, count, group["person_decision"], would)
        if would and group["person_decision"] == REJECTED:
            listed.add(shape)
    replay.rejected_but_would_approve = _rejections_of(since, listed)
    return replay


def _rejected(since: datetime) -> QuerySet[Breakpoint]:
    return finished_since(since).filter(person_decision=REJECTED).order_by("-created_at", "-id")


def _listed(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "breakpointId": row["id"],
            "key": row["key"],
            "respondedBy": row["result__respondedBy"],
            "feedback": row["result__feedback"],
            "decidedAt": timestamp(row["released_at"]),
        }
        for row in rows
    ]


_LISTED_COLUMNS = ("id", "key", "result__respondedBy", "result__feedback", "released_at")


def _rejections_of(since: datetime, shapes: set[Shape]) -> list[dict[str, Any]]:
    """The newest rejections (at most LIST_CAP) whose shape is one of `shapes`."""
    if not shapes:
        return []
    rows = (
        _rejected(since)
        .filter(key__in={shape[0] for shape in shapes})
        .values(*_LISTED_COLUMNS, "tags", "experts", "prevent_self_review", "needs_person")
    )
    found = []
    for row in rows.iterator(chunk_size=LIST_CAP * 5):
        shape = _shape(
            row["key"], row["tags"], row["experts"], row["prevent_self_review"], row["needs_person"]
        )
        if shape in shapes:
            found.append(row)
            if len(found) == LIST_CAP:
                break
    return _listed(found)


def _replay_after_n(replay: Replay, candidate: Candidate, since: datetime) -> Replay:
    """autoApproveAfterN on one key, as production counts it: per agent, in the order of
    creation, a person's approval adds one, a person's rejection resets, anything else
    (expiry, cancellation, an automatic approval) leaves the count. Every breakpoint the
    replayed setting would have approved takes no person's decision, so no longer counts.
    Counting starts at zero at the window's start."""
    assert candidate.key is not None and candidate.n is not None
    key, threshold = candidate.key, candidate.n
    judge = _Judge(None)
    replay.considered = finished_since(since).count()
    rows = finished_since(since).filter(key=key)
    if key == FALLBACK_KEY:  # the breakpoints that chose this key, as production counts
        rows = rows.filter(Q(payload__breakpointId=key) | Q(title__isnull=False))
    streaks: dict[str, int] = defaultdict(int)
    wrongly: list[str] = []
    verdicts: dict[tuple[Shape, bool], bool] = {}  # the streak counts only as reached or not
    columns = ("id", "agent_id", "tags", "experts", "prevent_self_review", "needs_person")
    for row in rows.order_by("created_at", "id").values(*columns, "person_decision").iterator(2000):
        shape = _shape(
            key, row["tags"], row["experts"], row["prevent_self_review"], row["needs_person"]
        )
        agent, outcome = row["agent_id"], row["person_decision"]
        reached = streaks[agent] >= threshold
        if (shape, reached) not in verdicts:
            streak = threshold if reached else 0
            verdicts[shape, reached] = judge.approves(shape, streak=streak, threshold=threshold)
        would = verdicts[shape, reached]
        _tally(replay, 1, outcome, would)
        if would:
            if outcome == REJECTED:
                wrongly.append(row["id"])
        elif outcome == APPROVED:
            streaks[agent] += 1
        elif outcome == REJECTED:
            streaks[agent] = 0
    newest = wrongly[::-1][:LIST_CAP]
    by_id = {
        row["id"]: row for row in _rejected(since).filter(pk__in=newest).values(*_LISTED_COLUMNS)
    }
    replay.rejected_but_would_approve = _listed(by_id[pk] for pk in newest)
    return replay
