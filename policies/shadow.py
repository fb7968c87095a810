"""Shadow mode: auto-approve rules that never decide, what they would have done, and how often
people then agreed; the promotion of such a rule to live.

A shadow rule "fires" on a breakpoint exactly when the verdict with that rule taken as live
would approve while the live verdict does not (policies.autoapproval.evaluate computes it:
four eyes, a form only a person answers, a never-auto-approve rule and an always-break-on
tag still win). The breakpoints app records each fire at creation (shadow_fires_record,
beside its `auto_approval.shadow` audit event) and its outcome when a person decides
(shadow_outcome_record): approved is agreed, rejected is disagreed. A timeout policy, an
expiry or a cancellation is nobody's judgement and leaves the fire undecided.
"""

from collections.abc import Iterable
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Count, IntegerField, OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce

from core.actors import Actor, require_admin
from core.exceptions import Conflict, NotFound
from policies.models import AutoApprovalRule, RuleMode, ShadowFire, ShadowOutcome
from policies.ruleaudit import RULE_PROMOTED, rule_audit


@dataclass(frozen=True)
class ShadowCounts:
    """How often a shadow rule would have approved, and what people then decided."""

    fires: int = 0
    agreed: int = 0
    disagreed: int = 0

    @property
    def undecided(self) -> int:
        """Still waiting, or ended without a person's decision (timeout, expiry, cancel)."""
        return self.fires - self.agreed - self.disagreed


# --- writes ---------------------------------------------------------------------------


def rule_promote(*, actor: Actor, rule_id: str) -> AutoApprovalRule:
    """Make a shadow rule live (admins and management commands): from the next breakpoint on
    it decides. Recorded as a `promoted` rule event in the same transaction.

    A rule that is already live is a 409 (conflict): the promotion happened once, and
    was recorded once; a retry learns that rather than adding a second record.
    """
    require_admin(actor, "Only admins may manage auto-approval rules.", or_system=True)
    with transaction.atomic():
        rule = AutoApprovalRule.objects.select_for_update().filter(pk=rule_id).first()
        if rule is None:
            raise NotFound(f"No rule {rule_id}.")
        # Conditional UPDATE too: correct where SELECT ... FOR UPDATE is a no-op (SQLite).
        moved = AutoApprovalRule.objects.filter(pk=rule.pk, mode=RuleMode.SHADOW).update(
            mode=RuleMode.LIVE
        )
        if not moved:
            raise Conflict(f"Rule {rule.pk} is already live.", {"mode": RuleMode.LIVE})
        rule.mode = RuleMode.LIVE
        fires = shadow_counts([rule.pk]).get(rule.pk, ShadowCounts())
        rule_audit(
            type=RULE_PROMOTED,
            rule_id=rule.pk,
            pattern=rule.pattern,
            actor=actor.name,
            modeFrom=RuleMode.SHADOW,
            modeTo=RuleMode.LIVE,
            shadowFires=fires.fires,
            shadowAgreed=fires.agreed,
            shadowDisagreed=fires.disagreed,
        )
    return rule


def shadow_fires_record(*, breakpoint_id: str, rule_ids: Iterable[str]) -> None:
    """The shadow rules that would have approved a breakpoint just created (its transaction)."""
    ShadowFire.objects.bulk_create(
        [ShadowFire(breakpoint_id=breakpoint_id, rule_id=rule_id) for rule_id in rule_ids]
    )


def shadow_outcome_record(*, breakpoint_id: str, approved: bool) -> None:
    """A person decided a breakpoint that shadow rules fired on: approved agrees with them,
    rejected disagrees. Called only for breakpoints whose autoApproval says shadow."""
    outcome = ShadowOutcome.AGREED if approved else ShadowOutcome.DISAGREED
    ShadowFire.objects.filter(breakpoint_id=breakpoint_id, outcome="").update(outcome=outcome)


# --- reads ----------------------------------------------------------------------------


def shadow_counts(rule_ids: Iterable[str] | None = None) -> dict[str, ShadowCounts]:
    """Fires, agreements and disagreements per rule, in one grouped query (every rule that
    fired when `rule_ids` is None). A rule that never fired is absent: ShadowCounts() is 0."""
    fires = ShadowFire.objects.order_by()
    if rule_ids is not None:
        fires = fires.filter(rule_id__in=list(rule_ids))
    rows = fires.values("rule_id").annotate(
        fires=Count("pk"),
        agreed=Count("pk", filter=Q(outcome=ShadowOutcome.AGREED)),
        disagreed=Count("pk", filter=Q(outcome=ShadowOutcome.DISAGREED)),
    )
    return {
        row["rule_id"]: ShadowCounts(row["fires"], row["agreed"], row["disagreed"]) for row in rows
    }


def with_shadow_counts(rules: QuerySet[AutoApprovalRule]) -> QuerySet[AutoApprovalRule]:
    """`rules` annotated with shadow_fired, shadow_agreed and shadow_disagreed: a subquery
    each per row returned, through the (rule, outcome) index (a page of rules costs one
    query, whatever the number of fires)."""

    def counted(outcome: str | None) -> Coalesce:
        fires = ShadowFire.objects.filter(rule=OuterRef("pk"))
        if outcome is not None:
            fires = fires.filter(outcome=outcome)
        count = fires.order_by().values("rule").annotate(n=Count("pk")).values("n")[:1]
        return Coalesce(Subquery(count, output_field=IntegerField()), Value(0))

    return rules.annotate(
        shadow_fired=counted(None),
        shadow_agreed=counted(ShadowOutcome.AGREED),
        shadow_disagreed=counted(ShadowOutcome.DISAGREED),
    )


def shadow_counts_of_shadow_rules() -> dict[str, ShadowCounts]:
    """The counts of every rule in shadow mode now (zeros for one that never fired): what the
    metrics expose, their labels bounded by the shadow rules that exist."""
    ids = list(AutoApprovalRule.objects.filter(mode=RuleMode.SHADOW).values_list("pk", flat=True))
    counts = shadow_counts(ids) if ids else {}
    return {rule_id: counts.get(rule_id, ShadowCounts()) for rule_id in ids}
