"""The breakpoint: one pause an agent posted, waiting for a human or a rule."""

import secrets
from datetime import datetime
from typing import Any

from django.db import models
from django.db.models import BooleanField, Case, ExpressionWrapper, F, IntegerField, Q, Value, When
from django.db.models.functions import Concat, Upper
from django.utils import timezone

from breakpoints.answers.results import TIMEOUT_POLICY_RESPONDER
from breakpoints.payload.validation import key_is_explicit
from core import limits, naming
from core.actors import AgentPrincipal, is_reviewer
from core.choices import OnTimeout, Status, Strategy
from policies.answers import NEEDS_ANSWER_REASON


def new_breakpoint_id() -> str:
    """Opaque, unguessable id (128 random bits), in characters URLs never escape."""
    return "bp-" + secrets.token_hex(16)


# The reviewers' queue: waiting first, oldest waiting on top, then the rest newest first.
# Shared by the console's ordering and the index that serves it (same expressions).
QUEUE_ORDER = (
    Case(
        When(status=Status.WAITING, then=Value(0)), default=Value(1), output_field=IntegerField()
    ).asc(),
    Case(When(status=Status.WAITING, then=F("created_at"))).asc(),
    F("created_at").desc(),
    F("id").desc(),
)


FINISHED = (Status.RELEASED, Status.EXPIRED, Status.CANCELLED)
# What the precedence reads of a breakpoint (breakpoints.rule_replay).
REPLAY_SHAPE = ["key", "tags", "experts", "prevent_self_review", "needs_person"]


def person_decided(*, approved: bool) -> Q:
    """Released by a person's decision: not by a rule at creation, not by a timeout policy
    (expiries and cancellations are nobody's decision)."""
    return (
        Q(status=Status.RELEASED, result__approved=approved)
        & ~Q(auto_approval__recommended=True)
        & ~Q(result__respondedBy=TIMEOUT_POLICY_RESPONDER)
    )


def is_overdue(status: str, expires_at: datetime | None, now: datetime | None = None) -> bool:
    """Waiting past its expiresAt: the clock has decided, the sweep (or a read) expires it.

    The one definition of "overdue"; BreakpointQuerySet.overdue() is the same in SQL.
    """
    return (
        status == Status.WAITING
        and expires_at is not None
        and expires_at <= (now or timezone.now())
    )


class BreakpointQuerySet(models.QuerySet["Breakpoint"]):
    def waiting(self, now: datetime | None = None) -> "BreakpointQuerySet":
        """Waiting and not overdue: what the API and the console call waiting."""
        return self.filter(status=Status.WAITING).exclude(expires_at__lte=now or timezone.now())

    def overdue(self, now: datetime | None = None) -> "BreakpointQuerySet":
        """Still marked waiting, but past expiresAt (see is_overdue)."""
        return self.filter(status=Status.WAITING, expires_at__lte=now or timezone.now())

    def search(self, term: str) -> "BreakpointQuerySet":
        """Title or question contains `term`, in any case (?search= and the console's box).

        One LIKE on search_text, the term upper-cased by the database as the column is, so
        both sides fold case alike. On PostgreSQL the trigram index bp_search_trgm serves
        counts; the list's walk reads the column from bp_created.
        """
        return self.filter(search_text__contains=Upper(Value(term)))

    def visible_to(self, user: Any) -> "BreakpointQuerySet":
        """An agent sees its own breakpoints; reviewers and admins all; anyone else none."""
        if isinstance(user, AgentPrincipal):
            return self.filter(agent_id=user.agent_id)
        if is_reviewer(user):
            return self.all()
        return self.none()


class Breakpoint(models.Model):
    id = models.CharField(
        primary_key=True,
        max_length=limits.BREAKPOINT_ID_LENGTH,
        default=new_breakpoint_id,
        editable=False,
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.WAITING)
    agent_id = models.CharField(max_length=limits.MAX_AGENT_ID_LENGTH)
    run_id = models.CharField(max_length=limits.MAX_RUN_ID_LENGTH, null=True, blank=True)
    title = models.CharField(max_length=limits.MAX_TITLE_LENGTH, null=True, blank=True)
    key = models.CharField(
        max_length=limits.MAX_KEY_LENGTH, help_text="Canonical identity across runs."
    )
    question = models.TextField(null=True, blank=True)
    # UPPER(title, a newline, question), kept by the database for BreakpointQuerySet.search:
    # a rare term walks thousands of rows in the list's order, and upper-casing two columns
    # per row was most of that walk's time.
    search_text = models.GeneratedField(
        expression=Upper(Concat("title", Value("\n"), "question", output_field=models.TextField())),
        output_field=models.TextField(),
        db_persist=True,
    )
    payload = models.JSONField(default=dict)
    tags = models.JSONField(default=list, blank=True)
    ttl_seconds = models.PositiveIntegerField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    released_at = models.DateTimeField(null=True, blank=True)
    expired_at = models.DateTimeField(null=True, blank=True)
    cancelled_at = models.DateTimeField(null=True, blank=True)
    result = models.JSONField(null=True, blank=True)
    auto_approval = models.JSONField(null=True, blank=True)
    experts = models.JSONField(
        default=list, blank=True, help_text="Expert names it is routed to (payload.expert)."
    )
    strategy = models.CharField(max_length=32, choices=Strategy.choices, default=Strategy.SINGLE)
    votes = models.JSONField(
        default=list,
        blank=True,
        help_text="One entry per seat that responded: seat, respondedBy, approved, feedback, "
        "option, respondedAt.",
    )
    idempotency_key = models.CharField(
        max_length=limits.MAX_IDEMPOTENCY_KEY_LENGTH, null=True, blank=True
    )
    request_hash = models.CharField(max_length=64, null=True, blank=True)
    # When nobody answers: payload.onTimeout, escalateAfterSeconds + escalateTo and
    # remindEverySeconds, else the defaults of the notification routes it matched.
    on_timeout = models.CharField(
        max_length=16, choices=OnTimeout.choices, default=OnTimeout.EXPIRE
    )
    escalate_at = models.DateTimeField(null=True, blank=True)
    escalate_to = models.CharField(max_length=limits.MAX_EXPERT_NAME_LENGTH, blank=True)
    escalated_at = models.DateTimeField(null=True, blank=True)
    remind_every_seconds = models.PositiveIntegerField(null=True, blank=True)
    remind_at = models.DateTimeField(null=True, blank=True)
    reminders_sent = models.PositiveSmallIntegerField(default=0)
    # Who it is on behalf of (requestedBy: a username or an email), and whether that
    # person is refused a decision (payload.preventSelfReview or a matching route's
    # default; BPM_PREVENT_SELF_REVIEW applies to every breakpoint on top).
    requested_by = models.CharField(
        max_length=limits.MAX_REQUESTED_BY_LENGTH, null=True, blank=True
    )
    prevent_self_review = models.BooleanField(default=False)
    # "sha256:<hex>" of the RFC 8785 JSON of question, title and payload (core.digests),
    # computed at creation; the payload never changes after it.
    payload_digest = models.CharField(max_length=71, null=True, blank=True, editable=False)

    # What a rule's replay (breakpoints.rule_replay) reads besides key, tags and experts, kept by
    # the database so that the window is read from the index bp_replay alone, not from the
    # wide rows: whether a person approved or rejected it (NULL: nobody decided), and whether
    # its form needed a person (the reason the verdict stored at creation gives).
    person_decision = models.GeneratedField(
        expression=Case(
            When(person_decided(approved=True), then=Value("approved")),
            When(person_decided(approved=False), then=Value("rejected")),
            default=None,
            output_field=models.CharField(max_length=8),
        ),
        output_field=models.CharField(max_length=8, null=True),
        db_persist=True,
    )
    needs_person = models.GeneratedField(
        expression=ExpressionWrapper(
            Q(auto_approval__reason=NEEDS_ANSWER_REASON), output_field=BooleanField()
        ),
        output_field=models.BooleanField(null=True),
        db_persist=True,
    )

    objects = BreakpointQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            # The list's order. id and search_text ride along so that finding a page's keys
            # for a search (selectors.breakpoint_page_keys) reads this index alone. Not
            # (created_at, id): ordered exactly as the list, PostgreSQL preferred it to the
            # status indexes below and walked it past a sweep's 100,000 expired rows.
            models.Index(fields=["-created_at"], name="bp_created", include=["id", "search_text"]),
            models.Index(*QUEUE_ORDER, name="bp_queue_order"),
            models.Index(fields=["agent_id", "-created_at"], name="bp_agent_created"),
            models.Index(fields=["run_id"], name="bp_run"),
            models.Index(fields=["key", "-created_at"], name="bp_key_created"),
            # autoApproveAfterN counts one agent's consecutive approvals of a key.
            models.Index(
                fields=["agent_id", "key", "-created_at"],
                name="bp_agent_key_released",
                condition=Q(status="released"),
            ),
            models.Index(
                fields=["expires_at"], name="bp_waiting_expiry", condition=Q(status="waiting")
            ),
            # The sweeps that escalate and remind read only the few rows still due.
            models.Index(
                fields=["escalate_at"],
                name="bp_waiting_escalate",
                condition=Q(status="waiting", escalated_at__isnull=True),
            ),
            models.Index(
                fields=["remind_at"], name="bp_waiting_remind", condition=Q(status="waiting")
            ),
            # The queue's groups (selectors.breakpoint_groups): the waiting breakpoints
            # counted by key and run, and the oldest of each, from this index alone.
            models.Index(
                fields=["key", "run_id", "created_at"],
                name="bp_waiting_key_run",
                condition=Q(status="waiting"),
            ),
            # One partial index per status (bp_waiting_created, ...), newest or oldest first:
            # the status filters, the console's waiting queue, the counts. Not one
            # (status, created_at) index: PostgreSQL discounts a multi-column index's heap
            # correlation and walks bp_created instead, past every newer row of another
            # status (after a sweep expired the 100,000 newest, all of them). A row sits in
            # exactly one, so writes cost what one (status, created_at) index cost.
            *(
                models.Index(
                    fields=["-created_at"], name=f"bp_{status}_created", condition=Q(status=status)
                )
                for status in Status.values
            ),
            # A rule's replay (breakpoints.rule_replay) groups the finished breakpoints of a
            # window by what the precedence reads, and walks one key's in order for
            # autoApproveAfterN: this index holds all of it (index-only scans).
            models.Index(
                fields=["created_at"],
                name="bp_replay",
                include=[*REPLAY_SHAPE, "person_decision", "agent_id", "id"],
                condition=Q(status__in=FINISHED),
            ),
            # ... and lists the newest rejections it would have approved from this one.
            models.Index(
                fields=["-created_at", "-id"],
                name="bp_rejected",
                include=REPLAY_SHAPE,
                condition=Q(person_decision="rejected"),
            ),
            # The GIN indexes on tags and experts are PostgreSQL-only: see 0002 and 0004.
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["agent_id", "idempotency_key"],
                name="bp_unique_idempotency_key",
                condition=Q(idempotency_key__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.display_name} ({self.status})"

    @property
    def display_name(self) -> str:
        """What people see it called: its title, else its question (core.naming)."""
        return naming.display_name(
            {
                "title": self.title,
                "question": self.question,
                "key": self.key,
                "breakpointId": self.pk,
            }
        )

    @property
    def key_is_explicit(self) -> bool:
        """Whether its key names this question (a breakpointId or a title), not the fallback."""
        return key_is_explicit(self.payload or {}, self.title)

    @property
    def is_waiting(self) -> bool:
        return self.status == Status.WAITING

    def is_overdue(self, now: datetime | None = None) -> bool:
        return is_overdue(self.status, self.expires_at, now)
