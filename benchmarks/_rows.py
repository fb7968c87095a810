"""Realistic benchmark rows: one breakpoint with its feedback and audit events, as plain dicts.

Rows are dicts of column values keyed by attname (JSON columns as Python objects), so the
same generator feeds PostgreSQL's COPY (benchmarks/_bulk.py) and the ORM's bulk_create.
"""

import random
from datetime import datetime, timedelta

from _common import AGENT_PREFIX, REVIEWER

AGENT_WEIGHTS = [30, 20, 15, 10, 10, 8, 5, 2]  # bench-agent-01 .. -08
STATUS_WEIGHTS = {"waiting": 20, "released": 62, "expired": 9, "cancelled": 9}
TAG_WEIGHTS = {
    "deploy": 18,
    "plan": 12,
    "production": 10,
    "staging": 8,
    "database": 7,
    "migration": 6,
    "design": 6,
    "security": 5,
    "infra": 5,
    "cost": 4,
    "data": 4,
    "billing": 2,
    "compliance": 1,
}
# (key, title, question); "rollback" is rare on purpose (~0.5%): a selective search term.
KEYS = [
    ("deploy.production", "Production Deployment", "Deploy {svc} to production?", 15),
    ("deploy.staging", "Staging Deployment", "Deploy {svc} to staging?", 15),
    ("plan-review", "Plan Review", "Approve the plan for {svc}?", 20),
    ("db.migration", "Database Migration", "Run migration {n} on {svc}?", 10),
    ("spend.approval", "Spend Approval", "Spend ${n} on {svc} capacity?", 8),
    ("security.exception", "Security Exception", "Allow {svc} to open port {n}?", 6),
    ("data.delete", "Data Deletion", "Delete {n} stale records from {svc}?", 6),
    ("design.review", "Design Review", "Is the proposed design of {svc} acceptable?", 12),
    ("rollback", "Rollback", "Roll back {svc} to the previous release?", 0.5),
]
KEY_WEIGHTS = [k[3] for k in KEYS]
SERVICES = ["billing-api", "checkout", "search", "auth", "ledger", "reports", "gateway"]
REVIEWERS = ["alice", "bob", "carol", "dave", "erin", REVIEWER]
EXPERT_GROUPS = ["security", "sre"]
# Routed breakpoints (~15%): groups, a user, the project owner and a name nobody holds.
ROUTINGS = [["security"], ["sre"], ["owner"], ["security", "sre"], [REVIEWER], ["typo-team"]]
COMMENTS = [
    "Looks good to me.",
    "Please attach the rollback plan first.",
    "Approved; watch the error rate for an hour.",
    "Not during the freeze, sorry.",
    "Which tables does this touch?",
    "Fine, but keep the old index until Monday.",
]
LOREM = (
    "## Step\n- check the dashboards before and after\n- migrate in small batches\n"
    "- keep the previous release warm for a quick rollback\n"
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor.\n"
) * 800
HISTORY_DAYS = 90  # spread of created_at (the default retention)
DUE_TTLS = [600, 1800, 3600, 7200]  # ttlSeconds of the breakpoints a TTL sweep takes

Row = dict[str, object]


class Runs:
    """Each agent's runs: a run holds 1-8 consecutive breakpoints of that agent."""

    def __init__(self, prefix: str = "run") -> None:
        self.prefix = prefix
        self.state: dict[str, list[int]] = {}  # agent -> [run number, breakpoints left in it]

    def next_for(self, rng: random.Random, agent: str) -> str:
        run = self.state.setdefault(agent, [0, 0])
        if run[1] <= 0:
            run[0], run[1] = run[0] + 1, rng.randint(1, 8)
        run[1] -= 1
        return f"{self.prefix}-{agent[len(AGENT_PREFIX) :]}-{run[0]:05d}"


def created_times(rng: random.Random, count: int, now: datetime) -> list[datetime]:
    """`count` creation times over the last HISTORY_DAYS, oldest first (rows arrive in time
    order, as in production, so the heap correlates with created_at)."""
    span = HISTORY_DAYS * 86400
    offsets = sorted((rng.random() * span for _ in range(count)), reverse=True)
    return [now - timedelta(seconds=offset) for offset in offsets]


def breakpoint_rows(
    rng: random.Random,
    created: datetime,
    now: datetime,
    runs: Runs,
    *,
    status: str | None = None,
    due: bool = False,
    key: str | None = None,
) -> tuple[Row, list[Row], list[Row]]:
    """One breakpoint, its feedback and its events.

    `status` forces the status (else drawn from STATUS_WEIGHTS); `due` (with "waiting") makes
    a waiting breakpoint whose expiresAt has passed, for the TTL sweep to take; `key`
    replaces the drawn key (the title and question stay realistic).
    """
    agent = f"{AGENT_PREFIX}{rng.choices(range(1, 9), weights=AGENT_WEIGHTS)[0]:02d}"
    run_id = runs.next_for(rng, agent)
    drawn_key, title, question, _ = rng.choices(KEYS, weights=KEY_WEIGHTS)[0]
    key = key or drawn_key
    question = question.format(svc=rng.choice(SERVICES), n=rng.randint(2, 9999))
    tags = _tags(rng)
    experts = list(rng.choice(ROUTINGS)) if rng.random() < 0.15 else []
    strategy = "collect-all" if len(experts) > 1 else "single"
    status = status or _pick(rng, STATUS_WEIGHTS)
    bp_id = "bp-" + rng.randbytes(16).hex()  # as breakpoints.models.new_breakpoint_id
    age = int((now - created).total_seconds())

    ttl = None
    if due:  # ran out a minute ago or earlier; agents pass a few round TTLs
        ttl = rng.choice([t for t in DUE_TTLS if t <= age - 60] or [age - 60])
    elif status == "expired" or rng.random() < 0.3:
        ttl = rng.randint(600, 3 * 86400)
        if status == "waiting":  # still waiting: its expiry lies ahead (no read expires it)
            ttl += age + 3600
        elif status == "expired":
            ttl = min(ttl, max(60, age - 60))
    expires_at = created + timedelta(seconds=ttl) if ttl else None

    payload: dict[str, object] = {
        "title": title,
        "question": question,
        "breakpointId": key,
        "tags": tags,
        "context": {
            "runId": run_id,
            "files": [
                {"path": "artifacts/plan.md", "format": "markdown", "content": _content(rng)}
            ],
        },
    }
    if experts:
        payload["expert"] = experts if len(experts) > 1 else experts[0]
        payload["strategy"] = strategy

    feedback: list[Row] = []
    events = [
        _event(bp_id, "created", f"agent:{agent}", created, {"statusTo": "waiting", "key": key})
    ]
    finished = None
    if status != "waiting":
        limit = (expires_at - created).total_seconds() if expires_at else 2 * 86400
        finished = min(now, created + timedelta(seconds=rng.uniform(30, max(60, limit))))
        if status == "expired" and expires_at:
            finished = min(now, expires_at + timedelta(seconds=rng.uniform(0, 10)))
    clock = created
    comments = 1 if rng.random() < (0.1 if status == "waiting" else 0.2) else 0
    for _ in range(comments + (1 if rng.random() < 0.3 and comments else 0)):
        clock = clock + timedelta(seconds=rng.uniform(5, 600))
        if (finished and clock >= finished) or clock >= now:
            break
        author = rng.choice(REVIEWERS)
        feedback.append(_feedback(bp_id, author, rng.choice(COMMENTS), clock))
        events.append(_event(bp_id, "feedback", author, clock, {}))

    result: dict | None = None
    votes: list[dict] = []
    auto_approval = _verdict(False, "no rule matches")
    released_at = expired_at = cancelled_at = None
    by = ""
    if status == "released":
        assert finished is not None
        released_at = finished
        if rng.random() < 0.1:  # released by an auto-approval rule at creation
            released_at = finished = created
            by = "rule:rule-bench001"
            auto_approval = _verdict(True, "rule rule-bench001 matches")
            result = {"approved": True, "response": "Auto-approved.", "respondedBy": by}
            events.append(_event(bp_id, "auto_approved", by, created, {}))
        else:
            author, approved = rng.choice(REVIEWERS), rng.random() < 0.85
            comment = rng.choice(COMMENTS)
            vote = {
                "respondedBy": author,
                "approved": approved,
                "feedback": comment,
                "respondedAt": finished.isoformat(),
            }
            if experts:
                vote["seat"] = experts[0]
            votes = [vote]
            result = {
                "approved": approved,
                "response": comment,
                "feedback": comment,
                "respondedBy": author,
                "allResponses": [vote],
            }
            feedback.append(
                _feedback(bp_id, author, comment, finished, releases=True, approved=approved)
            )
            events.append(_event(bp_id, "feedback", author, finished, {}))
            by = author
    elif status == "expired":
        expired_at, by = finished, "system:ttl"
        result = {"approved": False, "feedback": "Expired: its TTL ran out.", "respondedBy": by}
    elif status == "cancelled":
        cancelled_at, by = finished, f"agent:{agent}"
        result = {"approved": False, "feedback": "Cancelled: superseded.", "respondedBy": by}
    if status != "waiting":
        metadata = {"statusFrom": "waiting", "statusTo": status}
        events.append(_event(bp_id, status, by, finished, metadata))
    idempotency_key = f"idem-{bp_id[3:15]}" if rng.random() < 0.4 else None
    bp: Row = {
        "id": bp_id,
        "status": status,
        "agent_id": agent,
        "run_id": run_id,
        "title": title,
        "key": key,
        "question": question,
        "payload": payload,
        "tags": tags,
        "ttl_seconds": ttl,
        "expires_at": expires_at,
        "created_at": created,
        "updated_at": finished or (feedback[-1]["created_at"] if feedback else created),
        "released_at": released_at,
        "expired_at": expired_at,
        "cancelled_at": cancelled_at,
        "result": result,
        "auto_approval": auto_approval,
        "experts": experts,
        "strategy": strategy,
        "votes": votes,
        "idempotency_key": idempotency_key,
        "request_hash": f"{rng.getrandbits(256):064x}" if idempotency_key else None,
    }
    return bp, feedback, events


def _event(bp_id: str, type_: str, actor: str, at: datetime | None, metadata: dict) -> Row:
    return {
        "breakpoint_id": bp_id,
        "type": type_,
        "actor": actor,
        "timestamp": at,
        "metadata": metadata,
    }


def _feedback(
    bp_id: str,
    author: str,
    comment: str,
    at: datetime,
    *,
    releases: bool = False,
    approved: bool | None = None,
) -> Row:
    return {
        "breakpoint_id": bp_id,
        "author": author,
        "author_user_id": None,
        "comment": comment,
        "releases": releases,
        "approved": approved,
        "option": None,
        "created_at": at,
    }


def _pick(rng: random.Random, weights: dict[str, float]) -> str:
    return rng.choices(list(weights), weights=list(weights.values()))[0]


def _tags(rng: random.Random) -> list[str]:
    wanted = rng.choices([0, 1, 2, 3], weights=[15, 40, 30, 15])[0]
    tags: list[str] = []
    while len(tags) < wanted:
        tag = _pick(rng, TAG_WEIGHTS)
        if tag not in tags:
            tags.append(tag)
    if "deploy" in tags and "production" not in tags and rng.random() < 0.5:
        tags.append("production")  # tags co-occur, as they do in real use
    return tags


def _content(rng: random.Random) -> str:
    """Context file text: mostly 0.2-1.5 KB, some larger, a few big enough to be TOASTed."""
    roll = rng.random()
    size = (
        rng.randint(200, 1500)
        if roll < 0.85
        else rng.randint(1500, 6000)
        if roll < 0.98
        else rng.randint(20_000, 60_000)
    )
    start = rng.randint(0, 200)
    return LOREM[start : start + size]


def _verdict(recommended: bool, reason: str) -> dict:
    return {
        "recommended": recommended,
        "reason": reason,
        "matchedRule": "rule-bench001" if recommended else None,
        "consecutiveApprovals": 0,
    }
