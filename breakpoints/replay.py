"""A rule replayed over the finished breakpoints of a window (policies.replay asks for it).

Never row by row for a pattern rule: the database groups the window's breakpoints by what
a pattern and the precedence can read (key, tags, experts, preventSelfReview, whether a
person had to answer a form) and by outcome; each distinct group is evaluated once, by the
production precedence (policies.autoapproval.precedence) with the candidate added after
the rules that exist now. Only the listed rejections are read one by one, newest first, up
to the cap. autoApproveAfterN depends on the order of decisions, so its replay walks the
key's breakpoints in order, per agent, as production counts them.
"""

import json
from collections import defaultdict
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.db.models import Count, Q, QuerySet, TextField
from django.db.models.functions import Cast

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


class _Judge:
    """The production verdict of a shape, with the rules and tags read once.

    A verdict reads tags and experts only through the rules' predicates and the
    always-break-on list: a shape is judged by its key, the tags and experts some rule or
    the list names (in their order), preventSelfReview and the form, and shapes that agree
    on those share one verdict."""

    def __init__(self, candidate: AutoApprovalRule | None) -> None:
        existing = list(rule_list())
        self.rules = [*existing, candidate] if candidate is not None else existing
        self.blocked = frozenset(always_break_on_tags())
        named: dict[str, set[str]] = {"tags": set(self.blocked), "expert": set()}
        for rule in self.rules:
            for predicate in getattr(stored_pattern(rule.pattern), "predicates", ()):
                named.setdefault(predicate.field, set()).add(predicate.value)
        self.tags, self.experts = frozenset(named["tags"]), frozenset(named["expert"])
        self.verdicts: dict[tuple, bool] = {}

    def blocking_tag(self, tags: list[str]) -> str | None:
        return next((tag for tag in tags if tag in self.blocked), None)

    def approves(self, shape: Shape, *, streak: int = 0, threshold: int = -1) -> bool:
        key, tags, experts, prevent, needs = shape
        tags = tuple(tag for tag in tags if tag in self.tags)
        experts = tuple(expert for expert in experts if expert in self.experts)
        judged = (key, tags, experts, prevent, needs, streak, threshold)
        if judged not in self.verdicts:
            self.verdicts[judged] = precedence(
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
        return self.verdicts[judged]


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
    """Two aggregates over bp_replay alone: the window's keys (considered, and the keys the
    glob matches), then the groups of those keys' breakpoints, each judged once."""
    pattern = stored_pattern(rule.pattern)
    assert pattern is not None  # policies.replay canonicalised it
    judge, decoded = _Judge(rule), _Decoded()
    per_key = finished_since(since).values_list("key").annotate(count=Count("*")).order_by()
    keys, every_key = [], True
    for key, count in per_key:
        replay.considered += count
        if pattern.matches_key(key):
            keys.append(key)
        else:
            every_key = False
    window = finished_since(since) if every_key else finished_since(since).filter(key__in=keys)
    groups = (
        _with_json_text(window)
        .values_list(*_SHAPE_COLUMNS, "person_decision")
        .annotate(count=Count("*"))
        .order_by()
    )
    verdicts: dict[Shape, bool | None] = {}  # None: not matched
    listed: set[Shape] = set()
    for *columns, decision, count in _aggregated(groups):
        shape = decoded.shape(*columns)
        if shape not in verdicts:
            matched = pattern.matches(shape[0], tags=shape[1], experts=shape[2])
            verdicts[shape] = judge.approves(shape) if matched else None
        would = verdicts[shape]
        if would is None:
            continue
        _tally(replay, count, decision, would)
        if would and decision == REJECTED:
            listed.add(shape)
    replay.rejected_but_would_approve = _rejections_of(since, listed, decoded)
    return replay


def _aggregated(groups: QuerySet) -> list:
    """The groups, aggregated in memory: PostgreSQL's default work_mem (4 MB) sorts a
    window of a million on disk, several times slower than hashing it in 100 MB."""
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL work_mem = '128MB'")
        return list(groups)


# A breakpoint's shape as the aggregates read it: tags and experts as JSON text (decoded
# once per distinct text by _Decoded, not once per row).
_SHAPE_COLUMNS = ("key", "tags_text", "experts_text", "prevent_self_review", "needs_person")


def _with_json_text(queryset: QuerySet[Breakpoint]) -> QuerySet[Breakpoint]:
    return queryset.annotate(
        tags_text=Cast("tags", TextField()), experts_text=Cast("experts", TextField())
    )


class _Decoded:
    """Shapes from the aggregates' columns, each distinct JSON text decoded once."""

    def __init__(self) -> None:
        self.lists: dict[str, tuple[str, ...]] = {}

    def _list(self, text: str | None) -> tuple[str, ...]:
        if text is None:
            return ()
        if text not in self.lists:
            value = json.loads(text)
            self.lists[text] = tuple(value) if isinstance(value, list) else ()
        return self.lists[text]

    def shape(self, key: str, tags: str | None, experts: str | None, prevent, needs) -> Shape:
        return (key, self._list(tags), self._list(experts), bool(prevent), bool(needs))


def _rejections_of(since: datetime, shapes: set[Shape], decoded: _Decoded) -> list[dict]:
    """The newest rejections (at most LIST_CAP) whose shape is one of `shapes`: their ids
    from bp_rejected alone, newest first, then the listed ones' details by id."""
    if not shapes:
        return []
    rows = (
        _with_json_text(
            Breakpoint.objects.filter(
                person_decision=REJECTED,  # released, so finished
                created_at__gte=since,
                key__in={shape[0] for shape in shapes},
            )
        )
        .order_by("-created_at", "-id")
        .values_list("id", *_SHAPE_COLUMNS)
    )
    found = []
    for bp_id, *columns in rows.iterator(chunk_size=LIST_CAP * 10):
        if decoded.shape(*columns) in shapes:
            found.append(bp_id)
            if len(found) == LIST_CAP:
                break
    return _listed(found)


def _listed(ids: list[str]) -> list[dict[str, Any]]:
    """The listed rejections' details, in the order of `ids`."""
    columns = ("id", "key", "result__respondedBy", "result__feedback", "released_at")
    rows = {row["id"]: row for row in Breakpoint.objects.filter(pk__in=ids).values(*columns)}
    return [
        {
            "breakpointId": pk,
            "key": rows[pk]["key"],
            "respondedBy": rows[pk]["result__respondedBy"],
            "feedback": rows[pk]["result__feedback"],
            "decidedAt": timestamp(rows[pk]["released_at"]),
        }
        for pk in ids
    ]


def _replay_after_n(replay: Replay, candidate: Candidate, since: datetime) -> Replay:
    """autoApproveAfterN on one key, as production counts it: per agent, in the order of
    creation, a person's approval adds one, a person's rejection resets, anything else
    (expiry, cancellation, an automatic approval) leaves the count. Every breakpoint the
    replayed setting would have approved takes no person's decision, so no longer counts.
    Counting starts at zero at the window's start."""
    assert candidate.key is not None and candidate.n is not None
    key, threshold = candidate.key, candidate.n
    judge, decoded = _Judge(None), _Decoded()
    replay.considered = finished_since(since).count()
    rows = finished_since(since).filter(key=key)
    if key == FALLBACK_KEY:  # the breakpoints that chose this key, as production counts
        rows = rows.filter(Q(payload__breakpointId=key) | Q(title__isnull=False))
    streaks: dict[str, int] = defaultdict(int)
    wrongly: list[str] = []
    verdicts: dict[tuple[Shape, bool], bool] = {}  # the streak counts only as reached or not
    ordered = _with_json_text(rows).order_by("created_at", "id")
    columns = ordered.values_list("id", "agent_id", "person_decision", *_SHAPE_COLUMNS)
    for bp_id, agent, outcome, *shape_columns in columns.iterator(chunk_size=5000):
        shape = decoded.shape(*shape_columns)
        reached = streaks[agent] >= threshold
        if (shape, reached) not in verdicts:
            streak = threshold if reached else 0
            verdicts[shape, reached] = judge.approves(shape, streak=streak, threshold=threshold)
        would = verdicts[shape, reached]
        _tally(replay, 1, outcome, would)
        if would:
            if outcome == REJECTED:
                wrongly.append(bp_id)
        elif outcome == APPROVED:
            streaks[agent] += 1
        elif outcome == REJECTED:
            streaks[agent] = 0
    replay.rejected_but_would_approve = _listed(wrongly[::-1][:LIST_CAP])
    return replay
