"""A rule replayed over the finished breakpoints of a window (policies.replay asks for it).

Never row by row for a pattern rule: the database groups the window's breakpoints by what
the precedence can read of them and by outcome, from the index bp_replay alone; each
distinct group is judged once, by the production precedence
(policies.autoapproval.precedence) with the candidate added after the rules that exist
now. What it can read: the key, preventSelfReview, whether a person had to fill a form
in, and of the tags and experts only those a rule's predicate or the always-break-on list
names (a replay where none is named groups by neither). Only the listed rejections are
read one by one, newest first, up to the cap (bp_rejected). autoApproveAfterN depends on
the order of decisions, so its replay walks the key's breakpoints in order, per agent, as
production counts them.
"""

import json
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.db.models import Count, Q, QuerySet, TextField
from django.db.models.functions import Cast

from audit.models import GrantEvent, GrantEventType
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

# What the precedence reads of a breakpoint: key, the named tags and experts (in their
# order), preventSelfReview, and whether its form needed a person.
Shape = tuple[str, tuple[str, ...], tuple[str, ...], bool, bool]


def finished_since(since: datetime) -> QuerySet[Breakpoint]:
    """The window: finished breakpoints created at or after `since` (a rule acts at creation)."""
    return Breakpoint.objects.filter(status__in=FINISHED, created_at__gte=since)


class _Judge:
    """The production verdict of a shape, with the rules and the tags read once."""

    def __init__(self, candidate: AutoApprovalRule | None) -> None:
        existing = list(rule_list())
        self.rules = [*existing, candidate] if candidate is not None else existing
        self.blocked = frozenset(always_break_on_tags())
        named: dict[str, set[str]] = {"tags": set(self.blocked), "expert": set()}
        for rule in self.rules:
            for predicate in getattr(stored_pattern(rule.pattern), "predicates", ()):
                named.setdefault(predicate.field, set()).add(predicate.value)
        self.named = {"tags_text": frozenset(named["tags"]), "experts_text": named["expert"]}
        self.lists: dict[tuple[str, str], tuple[str, ...]] = {}
        self.verdicts: dict[tuple, bool] = {}

    @property
    def columns(self) -> tuple[str, ...]:
        """The columns a shape is made of (tags and experts only when something names one)."""
        lists = [column for column, names in self.named.items() if names]
        return ("key", *lists, "prevent_self_review", "needs_person")

    def shape(self, row: dict[str, Any]) -> Shape:
        return (
            row["key"],
            self._named("tags_text", row.get("tags_text")),
            self._named("experts_text", row.get("experts_text")),
            bool(row["prevent_self_review"]),
            bool(row["needs_person"]),
        )

    def _named(self, column: str, text: str | None) -> tuple[str, ...]:
        """The named ones of a JSON list, decoded once per distinct text."""
        if text is None:
            return ()
        if (column, text) not in self.lists:
            values = json.loads(text)
            names = self.named[column]
            kept = [v for v in values if v in names] if isinstance(values, list) else []
            self.lists[column, text] = tuple(kept)
        return self.lists[column, text]

    def blocking_tag(self, tags: list[str]) -> str | None:
        return next((tag for tag in tags if tag in self.blocked), None)

    def approves(self, shape: Shape, *, streak: int = 0, threshold: int = -1) -> bool:
        judged = (shape, streak, threshold)
        if judged not in self.verdicts:
            key, tags, experts, prevent, needs = shape
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
    judge = _Judge(rule)
    per_key = finished_since(since).values_list("key").annotate(count=Count("*")).order_by()
    keys, every_key = [], True
    for key, count in per_key:
        replay.considered += count
        if pattern.matches_key(key):
            keys.append(key)
        else:
            every_key = False
    window = finished_since(since) if every_key else finished_since(since).filter(key__in=keys)
    listed: set[Shape] = set()
    with aggregate_memory():
        groups = list(shape_groups(window, judge.columns))
    for group in groups:
        shape, decision = judge.shape(group), group["person_decision"]
        if not pattern.matches(shape[0], tags=shape[1], experts=shape[2]):
            continue
        would = judge.approves(shape)
        _tally(replay, group["count"], decision, would)
        if would and decision == REJECTED:
            listed.add(shape)
    replay.rejected_but_would_approve = _rejections_of(since, listed, judge)
    replay.grant_approved = _grant_approved(since, pattern.matches_key, pattern.matches)
    return replay


GRANT_CHUNK = 1000


def _grant_approved(
    since: datetime, key_matches: Callable[[str], bool], matches: Callable[..., bool]
) -> int:
    """How many of the window's breakpoints that `matches` (key, tags, experts) a
    reviewer's grant approved: the grants' `used` events since the window's start
    (grantevent_type_time), their breakpoints read by id, a thousand at a time."""
    used = GrantEvent.objects.filter(type=GrantEventType.USED, timestamp__gte=since)
    ids = [pk for pk, key in used.values_list("breakpoint_id", "key") if key_matches(key)]
    count = 0
    for start in range(0, len(ids), GRANT_CHUNK):
        rows = finished_since(since).filter(pk__in=ids[start : start + GRANT_CHUNK])
        for key, tags, experts in rows.values_list("key", "tags", "experts"):
            count += bool(matches(key, tags=tags or [], experts=experts or []))
    return count


def shape_groups(window: QuerySet[Breakpoint], columns: tuple[str, ...]) -> QuerySet:
    """{columns..., person_decision, count} of the breakpoints of `window` (tags_text and
    experts_text: the lists as JSON text, decoded once per distinct text)."""
    return (
        _with_json_text(window)
        .values(*columns, "person_decision")
        .annotate(count=Count("*"))
        .order_by()
    )


@contextmanager
def aggregate_memory() -> Iterator[None]:
    """A transaction in which PostgreSQL aggregates in memory: with its default work_mem
    (4 MB) it sorts a window of a million on disk, several times slower than hashing it
    in 128 MB."""
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL work_mem = '128MB'")
        yield


def _with_json_text(queryset: QuerySet[Breakpoint]) -> QuerySet[Breakpoint]:
    return queryset.annotate(
        tags_text=Cast("tags", TextField()), experts_text=Cast("experts", TextField())
    )


def _rejections_of(since: datetime, shapes: set[Shape], judge: _Judge) -> list[dict]:
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
        .values("id", *judge.columns)
    )
    found = []
    for row in rows.iterator(chunk_size=LIST_CAP * 10):
        if judge.shape(row) in shapes:
            found.append(row["id"])
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
    judge = _Judge(None)
    replay.considered = finished_since(since).count()
    rows = finished_since(since).filter(key=key)
    if key == FALLBACK_KEY:  # the breakpoints that chose this key, as production counts
        rows = rows.filter(Q(payload__breakpointId=key) | Q(title__isnull=False))
    streaks: dict[str, int] = defaultdict(int)
    wrongly: list[str] = []
    ordered = _with_json_text(rows).order_by("created_at", "id")
    columns = ordered.values("id", "agent_id", "person_decision", *judge.columns)
    for row in columns.iterator(chunk_size=5000):
        agent, outcome = row["agent_id"], row["person_decision"]
        reached = streaks[agent] >= threshold
        streak = threshold if reached else 0  # only reached or not tells
        would = judge.approves(judge.shape(row), streak=streak, threshold=threshold)
        _tally(replay, 1, outcome, would)
        if would:
            if outcome == REJECTED:
                wrongly.append(row["id"])
        elif outcome == APPROVED:
            streaks[agent] += 1
        elif outcome == REJECTED:
            streaks[agent] = 0
    replay.rejected_but_would_approve = _listed(wrongly[::-1][:LIST_CAP])
    replay.grant_approved = _grant_approved(
        since, lambda seen: seen == key, lambda seen, **_: seen == key
    )
    return replay
