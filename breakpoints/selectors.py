"""Reads of breakpoints, scoped to what the caller may see.

Agents see only their own breakpoints (another agent's is "not found"); reviewers and
admins see all. Selectors only read: views go through services/reads.py, which expires
an overdue waiting breakpoint before anyone sees it.
"""

import functools
import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, cast

from django.db import connection
from django.db.models import (
    BooleanField,
    Count,
    ExpressionWrapper,
    F,
    FloatField,
    Func,
    JSONField,
    Min,
    Prefetch,
    Q,
    QuerySet,
    TextField,
    Value,
)

from audit.models import Event, EventType
from breakpoints.models import Breakpoint, DecisionBasis, Feedback
from breakpoints.models.breakpoint import BreakpointQuerySet
from breakpoints.representation import contract
from breakpoints.representation.expected_decision import percentile, seats_of
from core.actors import AgentPrincipal
from core.choices import Status, via_label
from core.exceptions import InvalidInput, NotFound
from core.ijson import MAX_EXACT_INTEGER
from core.limits import MAX_QUEUE_GROUPS
from core.naming import FALLBACK_KEY
from core.rawjson import RawJSON
from core.timestamps import timestamp
from infra.db.prepared import Prepared
from policies import configuration
from policies.autoapproval import MAX_HISTORY_LIMIT


def breakpoint_list(user: Any) -> QuerySet[Breakpoint]:
    """Visible breakpoints (model instances) with their feedback prefetched in one extra
    query, never N+1: single reads, and the console's re-reads of a page."""
    return Breakpoint.objects.visible_to(user).prefetch_related(
        Prefetch("feedback", queryset=Feedback.objects.order_by("created_at", "id"))
    )


def breakpoint_groups(user: Any, *, limit: int = MAX_QUEUE_GROUPS) -> list[dict[str, Any]]:
    """The waiting breakpoints the caller may see, grouped by key and run: each group's
    key, runId (None: no run), count and oldest createdAt, the largest groups first (then
    the longest waiting), at most `limit` of them. One GROUP BY query, read from the
    partial index bp_waiting_key_run alone."""
    return [
        {
            "key": row["key"],
            "runId": row["run_id"],
            "count": row["count"],
            "oldestCreatedAt": row["oldest"],
        }
        for row in breakpoint_groups_query(user, limit=limit)
    ]


def breakpoint_groups_query(user: Any, *, limit: int) -> QuerySet[Breakpoint, Mapping[str, Any]]:
    """breakpoint_groups' query: rows of key, run_id, count and oldest."""
    return (
        Breakpoint.objects.visible_to(user)
        .filter(status=Status.WAITING)
        .values("key", "run_id")
        .annotate(count=Count("*"), oldest=Min("created_at"))
        .order_by("-count", "oldest", "key", "run_id")[:limit]
    )


class ListedFeedback(Func):
    """A breakpoint's feedback rows, oldest first, as one JSON array of objects (every
    column, by column name; [] when none): a subquery PostgreSQL answers from the
    feedback_bp_created index. Written as SQL, not as a Subquery of JSONObject: Django
    compiles that per request, which cost more than the query it saves."""

    template = (
        "(SELECT COALESCE(jsonb_agg(to_jsonb(listed) ORDER BY listed.created_at, listed.id), "
        "'[]'::jsonb) FROM {table} listed WHERE listed.{column} = %(expressions)s)"
    )
    output_field = JSONField()

    def __init__(self, breakpoint_id: Any) -> None:
        table = connection.ops.quote_name(Feedback._meta.db_table)
        column = connection.ops.quote_name(Feedback._meta.get_field("breakpoint").column)
        super().__init__(breakpoint_id, template=self.template.format(table=table, column=column))


# The JSON columns a list passes through as PostgreSQL (or SQLite) wrote them: read as
# text, never parsed, embedded by the API's renderer (core.rawjson). Payloads carry whole
# context files: parsing and writing them again was a list page's largest cost after its
# query. `experts` is parsed: its names are resolved.
RAW_JSON_COLUMNS = ("payload", "tags", "result", "auto_approval", "votes")
_RAW_ALIAS = "raw_json_"
# jsonb writes a double of 1e16 or more without its exponent (1e21 as 1000000000000000000000),
# which a client reads as an integer past the exact ones: the rare payload holding one is
# parsed, and breakpoints.representation.contract gives such a number back as the double it is (what
# its payloadDigest was computed over). PostgreSQL finds them by walking the jsonb's values,
# not its text (a context file is one value). SQLite keeps the exponent Python wrote.
_LONG_NUMBERS = "payload_long_numbers_"
_LONG_NUMBER_PATH = (
    f'strict $.** ? (@.type() == "number" && (@ > {MAX_EXACT_INTEGER} || @ < -{MAX_EXACT_INTEGER}))'
)


class HasLongNumbers(Func):
    """Whether a jsonb document holds a number past ±MAX_EXACT_INTEGER (PostgreSQL)."""

    template = "jsonb_path_exists(%(expressions)s::jsonpath)"  # the path is a parameter
    output_field = BooleanField()

    def __init__(self, column: str) -> None:
        super().__init__(F(column), Value(_LONG_NUMBER_PATH))


# The other columns the representation shows (those it does not, such as the nudges'
# schedule and the idempotency key, are not read).
_PLAIN_COLUMNS = tuple(name for name in contract.ATTRIBUTES if name not in RAW_JSON_COLUMNS)


def breakpoint_page_keys(user: Any) -> QuerySet[Breakpoint, dict[str, Any]]:
    """breakpoint_page_list's keys only (id, and created_at for the cursor): for a search,
    whose walk in the list's order passes thousands of rows to fill a page of a rare term.
    bp_created carries search_text, so that walk reads the index alone; the page's rows are
    then read by id (breakpoint_page_rows)."""
    keys = Breakpoint.objects.visible_to(user).values(*_PAGE_KEYS)
    return cast("QuerySet[Breakpoint, dict[str, Any]]", keys)


_PAGE_KEYS = ("id", "created_at")


def breakpoint_page_rows(user: Any, page: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The listed_rows of a page of breakpoint_page_list, or of breakpoint_page_keys (its
    rows read by id in one query, in the page's order)."""
    if not page or page[0].keys() != set(_PAGE_KEYS):
        return listed_rows(page)
    ids = [key["id"] for key in page]
    found = breakpoint_page_list(user).filter(pk__in=ids).order_by()
    by_id = {row["id"]: row for row in listed_rows(found)}
    return [by_id[breakpoint_id] for breakpoint_id in ids if breakpoint_id in by_id]


def breakpoint_page_list(user: Any) -> QuerySet[Breakpoint, dict[str, Any]]:
    """The list endpoint's base queryset, of rows (dicts, see listed_rows), not instances:
    every column, the RAW_JSON_COLUMNS as text and, on PostgreSQL, the row's feedback in
    the same query (so a page is one query)."""
    rows = _page_rows(connection.vendor).visible_to(user)
    return cast("QuerySet[Breakpoint, dict[str, Any]]", rows)


@functools.cache
def _page_rows(vendor: str) -> BreakpointQuerySet:
    """Built once per process (never evaluated itself: each request clones it); building
    its columns cost a tenth of a list request."""
    raw: dict[str, Any] = {
        _RAW_ALIAS + name: ExpressionWrapper(F(name), output_field=TextField())
        for name in RAW_JSON_COLUMNS
    }
    if vendor == "postgresql":
        raw["listed_feedback"] = ListedFeedback("pk")
        raw[_LONG_NUMBERS] = HasLongNumbers("payload")
    return Breakpoint.objects.values(*_PLAIN_COLUMNS, **raw)


def listed_rows(page: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """A page of breakpoint_page_list as rows keyed like the model's attributes (what
    breakpoints.representation.contract.breakpoint_row_json reads): the raw JSON columns as RawJSON
    (None for SQL NULL) and `feedback`, oldest first, as rows of Feedback's columns."""
    rows = list(page)
    if rows and "listed_feedback" not in rows[0]:
        _feedback_read(rows)
    for row in rows:
        for name in RAW_JSON_COLUMNS:
            text = row.pop(_RAW_ALIAS + name)
            row[name] = None if text is None else RawJSON(text)
        if row.pop(_LONG_NUMBERS, False):
            row["payload"] = row["payload"].parsed()
        if "listed_feedback" in row:
            row["feedback"] = [_listed_feedback(item) for item in row.pop("listed_feedback")]
    return rows


def _listed_feedback(item: dict[str, Any]) -> dict[str, Any]:
    """A row of ListedFeedback's JSON: its time back from text (PostgreSQL writes ISO)."""
    return {**item, "created_at": datetime.fromisoformat(item["created_at"])}


def _feedback_read(rows: list[dict[str, Any]]) -> None:
    """Without PostgreSQL's ListedFeedback: the page's feedback in one query."""
    by_breakpoint: dict[str, list[dict[str, Any]]] = {row["id"]: [] for row in rows}
    found = Feedback.objects.filter(breakpoint_id__in=list(by_breakpoint))
    for item in found.order_by("created_at", "id").values():
        by_breakpoint[item["breakpoint_id"]].append(dict(item))
    for row in rows:
        row["feedback"] = by_breakpoint[row["id"]]


def decision_channels(feedback: Iterable[Feedback]) -> list[str]:
    """Where a decision came from: the `via` (core.choices.via_choices) of each response that
    made it (the release, or every seat's vote), in the order given, each once. The last
    is the deciding response's: the `via` its receipt names."""
    return list(
        dict.fromkeys(item.via for item in feedback if item.approved is not None and item.via)
    )


def decided_via_text(feedback: Iterable[Feedback]) -> str:
    """decision_channels for people: "Slack", "the console and Slack" ("" when unknown)."""
    labels = [via_label(via) for via in decision_channels(feedback)]
    return " and ".join(label for label in labels if label)


def decided_via(breakpoint_id: str) -> str:
    """decided_via_text of a breakpoint's responses, read now (one query)."""
    responses = Feedback.objects.filter(breakpoint_id=breakpoint_id, approved__isnull=False).only(
        "via", "approved"
    )
    return decided_via_text(responses.order_by("created_at", "id"))


def breakpoint_get(user: Any, breakpoint_id: str) -> Breakpoint:
    bp = breakpoint_list(user).filter(pk=breakpoint_id).first()
    if bp is None:
        raise NotFound("Breakpoint not found.")
    return bp


# key and experts: what expectedDecision is looked up by, in the same read.
_STATUS_COLUMNS = ("pk", "status", "updated_at", "result", "expires_at", "key", "experts")


def breakpoint_statuses(user: Any, breakpoint_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
    """The polling hot path: status rows of the visible ones among `breakpoint_ids`.

    One query by primary key of seven small columns, and nothing else in its WHERE: with
    `agent_id = $1` beside it, a planner without fresh statistics (a busy new agent between
    two ANALYZEs) chose the (agent_id, created_at) index and filtered the agent's whole
    history. An agent's rows are checked here instead: ids it may not see are simply
    absent, as before.
    """
    ids = list(breakpoint_ids)
    # order_by(): rows by primary key need no ORDER BY (Meta.ordering would add one).
    if isinstance(user, AgentPrincipal):
        found = Breakpoint.objects.filter(pk__in=ids).order_by()
        rows = found.values(*_STATUS_COLUMNS, "agent_id")
        return {row["pk"]: row for row in rows if row.pop("agent_id") == user.agent_id}
    found = Breakpoint.objects.visible_to(user).filter(pk__in=ids).order_by()
    return {row["pk"]: row for row in found.values(*_STATUS_COLUMNS)}


def status_rows_by_id(breakpoint_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Status rows by id, unscoped: for re-reading ids whose caller was already checked."""
    found = Breakpoint.objects.filter(pk__in=list(breakpoint_ids)).order_by()
    return {row["pk"]: row for row in found.values(*_STATUS_COLUMNS)}


def breakpoint_events(user: Any, breakpoint_id: str) -> QuerySet[Event]:
    """The audit trail of one visible breakpoint; an agent's has no deliveries (they concern
    the operator's channels) and no refused channel decisions (they concern reviewers)."""
    if not Breakpoint.objects.visible_to(user).filter(pk=breakpoint_id).exists():
        raise NotFound("Breakpoint not found.")
    events = Event.objects.filter(breakpoint_id=breakpoint_id)
    if isinstance(user, AgentPrincipal):
        events = events.exclude(type__in=[EventType.NOTIFICATION, EventType.REFUSED])
    return events.order_by("timestamp", "id")


# --- decision history (auto-approval's streaks, breakpoint_history) ---------------


def consecutive_approvals(key: str, *, agent_id: str | None = None, limit: int) -> int:
    """How many of the latest manual decisions on `key` were approvals in a row (the streak),
    counting at most `limit`: newest first, up to the first decision that was not one.

    Only `agent_id`'s breakpoints count when it is given (what a breakpoint of that agent
    gets); without it, every agent's (an admin's view of the key as a whole). Auto-approvals
    and timeout-policy decisions are nobody's decision: they neither count nor break it.
    Reads at most `limit` decisions. Without an agent, through the (key, -created_at)
    index; with one, that index also passes other agents' rows of the key until it has
    `limit` of this agent's (an index on (agent_id, key, -created_at) for released rows
    would read exactly `limit`).
    """
    if limit < 1:
        return 0
    read = _decisions_read(fallback=key == FALLBACK_KEY, of_agent=agent_id is not None, limit=limit)
    values = (key, agent_id) if agent_id is not None else (key,)
    # A create's first read: the configuration is read with it (policies.configuration).
    decisions = configuration.read_with(read, *values)
    streak = 0
    for decision, _ in decisions:
        if decision != "approved":
            break
        streak += 1
    return streak


@functools.lru_cache(maxsize=256)  # limits: the autoApproveAfterN thresholds in use
def _decisions_read(*, fallback: bool, of_agent: bool, limit: int) -> Prepared[Breakpoint]:
    """consecutive_approvals' read, compiled once per shape (infra.db.prepared): the latest
    `limit` person decisions on a key ('approved' or 'rejected'), of one agent's when
    `of_agent`; with `fallback`, only the breakpoints that chose FALLBACK_KEY."""

    def build(key: str, agent_id: str | None = None) -> QuerySet[Breakpoint, Any]:
        decided = Breakpoint.objects.filter(key=key, status=Status.RELEASED)
        if fallback:  # only the breakpoints that chose this key, not the unnamed ones
            decided = decided.filter(Q(payload__breakpointId=FALLBACK_KEY) | Q(title__isnull=False))
        if of_agent:
            decided = decided.filter(agent_id=agent_id)
        return (
            decided_by_people(decided)
            .order_by("-created_at")
            .values_list("person_decision", "created_at")[:limit]
        )

    return Prepared(build, parameters=2 if of_agent else 1)


def decided_by_people(released: BreakpointQuerySet) -> BreakpointQuerySet:
    """Of released breakpoints, those a person decided: not an auto-approval (a rule,
    autoApproveAfterN), not a timeout policy. The one definition is the model's
    person_decided, kept by the database as `person_decision` (NULL: nobody decided)."""
    return released.filter(person_decision__isnull=False)


def history(*, limit: int = 20, key: str | None = None) -> list[dict[str, Any]]:
    """Recent decisions (released breakpoints), newest first."""
    if not 1 <= limit <= MAX_HISTORY_LIMIT:
        raise InvalidInput(
            f"limit must be between 1 and {MAX_HISTORY_LIMIT}.",
            {"limit": [f"Must be between 1 and {MAX_HISTORY_LIMIT}."]},
        )
    decided = Breakpoint.objects.filter(status=Status.RELEASED)
    if key:
        decided = decided.filter(key=key)
    rows = decided.order_by("-created_at", "-id").only(
        "id", "key", "title", "created_at", "released_at", "result", "auto_approval"
    )[:limit]
    return [
        {
            "breakpointId": bp.pk,
            "key": bp.key,
            "title": bp.title,
            "approved": bool((bp.result or {}).get("approved")),
            "respondedBy": (bp.result or {}).get("respondedBy"),
            "autoApproved": bool((bp.auto_approval or {}).get("recommended")),
            "createdAt": timestamp(bp.created_at),
            "decidedAt": timestamp(bp.released_at),
        }
        for bp in rows
    ]


# --- how long people take to decide (the aggregate behind expectedDecision) -----------

# A trigger rule's release (triggers.actions) answers for an event, not a person.
_TRIGGER_RESPONDER_PREFIX = "trigger:"
# SQLite (the embedded default) computes in Python over at most this many decisions.
SQLITE_MAX_DECISIONS = 100_000


class _DecisionSeconds(Func):
    """released_at - created_at in seconds (PostgreSQL)."""

    template = "EXTRACT(EPOCH FROM (%(expressions)s))"
    arg_joiner = " - "
    output_field = FloatField()


class _SortedSeats(Func):
    """The experts array's names sorted, as jsonb text; NULL when it has none (PostgreSQL)."""

    template = (
        "(SELECT jsonb_agg(seat ORDER BY seat)::text "
        "FROM jsonb_array_elements_text(%(expressions)s) AS seat)"
    )
    output_field = TextField()


def human_decisions_since(since: datetime) -> BreakpointQuerySet:
    """Breakpoints created since `since` that a person released: decided_by_people, and
    not by a trigger rule."""
    released = Breakpoint.objects.filter(
        status=Status.RELEASED, created_at__gte=since, released_at__isnull=False
    )
    return decided_by_people(released).exclude(
        result__respondedBy__startswith=_TRIGGER_RESPONDER_PREFIX
    )


def decision_time_groups(*, since: datetime, min_samples: int) -> list[dict[str, Any]]:
    """p50 and p90 of the decision time (released_at - created_at, seconds) of the human
    decisions since `since`, per key (not FALLBACK_KEY), per set of expert seats (routed
    ones) and over all, for each group of at least `min_samples` decisions: dicts of
    DecisionTimeStat's columns. PostgreSQL computes them (percentile_cont, one pass with
    grouping sets); SQLite in Python, over the newest SQLITE_MAX_DECISIONS."""
    decided = human_decisions_since(since).order_by()
    if connection.vendor == "postgresql":
        groups = _decision_time_groups_sql(decided, min_samples)
    else:
        groups = _decision_time_groups_python(decided, min_samples)
    return [
        group
        for group in groups
        if not (group["basis"] == DecisionBasis.KEY and group["value"] == FALLBACK_KEY)
    ]


def _decision_time_groups_sql(decided: BreakpointQuerySet, min_samples: int) -> list[dict]:
    rows = decided.annotate(
        seats=_SortedSeats("experts"), seconds=_DecisionSeconds("released_at", "created_at")
    ).values_list("key", "seats", "seconds")
    inner, params = rows.query.sql_with_params()
    sql = (
        'SELECT GROUPING(d."key"), GROUPING(d.seats), d."key", d.seats, '
        "percentile_cont(0.5) WITHIN GROUP (ORDER BY d.seconds), "
        "percentile_cont(0.9) WITHIN GROUP (ORDER BY d.seconds), COUNT(*) "
        f"FROM ({inner}) AS d "
        'GROUP BY GROUPING SETS ((d."key"), (d.seats), ()) HAVING COUNT(*) >= %s'
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, min_samples])
        found = cursor.fetchall()
    groups = []
    for no_key, no_seats, key, seats, p50, p90, samples in found:
        if not no_key:
            basis, value = DecisionBasis.KEY, key
        elif not no_seats:
            if seats is None:  # the unrouted ones
                continue
            basis, value = DecisionBasis.EXPERTS, _seats_value(json.loads(seats))
        else:
            basis, value = DecisionBasis.ALL, ""
        groups.append(_group(basis, value, p50, p90, samples))
    return groups


def _decision_time_groups_python(decided: BreakpointQuerySet, min_samples: int) -> list[dict]:
    newest = decided.order_by("-created_at").values_list(
        "key", "experts", "created_at", "released_at"
    )[:SQLITE_MAX_DECISIONS]
    by_group: dict[tuple[str, str], list[float]] = {}
    for key, experts, created_at, released_at in newest.iterator(chunk_size=2_000):
        seconds = (cast(datetime, released_at) - created_at).total_seconds()  # not null
        wanted = [(DecisionBasis.KEY, key), (DecisionBasis.ALL, "")]
        if experts:
            wanted.append((DecisionBasis.EXPERTS, _seats_value(experts)))
        for group in wanted:
            by_group.setdefault(group, []).append(seconds)
    groups = []
    for (basis, value), durations in by_group.items():
        if len(durations) >= min_samples:
            durations.sort()
            p50, p90 = percentile(durations, 0.5), percentile(durations, 0.9)
            groups.append(_group(basis, value, p50, p90, len(durations)))
    return groups


def _seats_value(names: Iterable[str]) -> str:
    """DecisionTimeStat.value of a set of seats: the sorted names as a JSON array."""
    return json.dumps(list(seats_of(names)), ensure_ascii=False, separators=(",", ":"))


def _group(basis: str, value: str, p50: float, p90: float, samples: int) -> dict[str, Any]:
    return {
        "basis": basis,
        "value": value,
        "p50_seconds": float(p50),
        "p90_seconds": float(p90),
        "samples": int(samples),
    }
