"""Auto-approval: rules, always-break-on tags, the verdict for a key, and decision history.

Precedence, highest first (babysitter's table):
1. a matching `never-auto-approve` rule: always prompt;
2. a tag in the always-break-on list: always prompt;
3. a matching `auto-approve` rule: approve without prompting;
4. `autoApproveAfterN`: approve once the last N manual decisions on the key's breakpoints
   of the same agent were approvals (a rejection resets the count; auto-approvals,
   expiries and cancellations neither count nor reset it). Per (agent, key): another agent
   reusing a key does not inherit those approvals;
5. otherwise prompt.

Above them all, four eyes (policies.foureyes), then a form only a person can answer
(policies.answers): a breakpoint under either is never approved automatically, whatever
the rules, tags or history say.

Only live rules decide (rule_list). A shadow rule (policies.shadow) is listed in the
verdict's `shadowRules` when it would have approved: the same precedence with it taken as
live approves, and the live verdict does not.
"""

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from django.db import transaction
from django.db.models import QuerySet

from core.actors import Actor, require_admin
from core.exceptions import InvalidInput, NotFound
from core.limits import (
    MAX_KEY_LENGTH,
    MAX_RULE_NOTE_LENGTH,
    MAX_TAG_LENGTH,
    MIN_AUTO_APPROVE_AFTER_N,
    NO_AUTO_APPROVE_THRESHOLD,
)
from infra.db.prepared import Prepared
from policies.answers import NEEDS_ANSWER_REASON
from policies.configuration import Copied
from policies.foureyes import FOUR_EYES_REASON, under_four_eyes
from policies.models import AlwaysBreakOnTag, AutoApprovalRule, RuleAction, RuleMode
from policies.patterns import PatternError, parse_pattern, stored_pattern
from policies.ruleaudit import RULE_CREATED, RULE_REMOVED, rule_audit

logger = logging.getLogger(__name__)

# Without a threshold, consecutiveApprovals is still reported, counted this far back.
REPORTED_STREAK_LIMIT = 20
# The verdict's reason when nothing approves and nothing forbids an automatic approval: the
# one where a reviewer's grant may still approve (breakpoints.services.create).
NO_MATCHING_RULE = "No matching rule"
MAX_HISTORY_LIMIT = 1000


@dataclass(frozen=True)
class Verdict:
    """The autoApproval object: stored on the breakpoint at creation and returned by evaluate."""

    recommended: bool
    reason: str
    matched_rule: str | None = None
    consecutive_approvals: int = 0
    responder: str | None = None  # who approves when recommended: rule:<id> or auto:after-N
    shadow_rules: tuple[str, ...] = ()  # the shadow rules that would have approved it

    def as_dict(self) -> dict[str, Any]:
        verdict: dict[str, Any] = {
            "recommended": self.recommended,
            "reason": self.reason,
            "matchedRule": self.matched_rule,
            "consecutiveApprovals": self.consecutive_approvals,
        }
        if self.shadow_rules:  # only then: the common verdict keeps its four keys
            verdict.update(shadow=True, shadowRules=list(self.shadow_rules))
        return verdict


# --- rules -----------------------------------------------------------------------


def _check_manager(actor: Actor) -> None:
    """Admins, and the system (management commands), manage rules and tags."""
    require_admin(actor, "Only admins may manage auto-approval rules.", or_system=True)


def canonical_pattern(pattern: str) -> str:
    """The canonical text of a pattern; a malformed one is a 400 naming the position."""
    if not isinstance(pattern, str):
        raise InvalidInput("pattern must be a string.", {"pattern": ["Must be a string."]})
    try:
        return str(parse_pattern(pattern))
    except PatternError as exc:
        raise InvalidInput(
            f"Invalid pattern: {exc}.",
            {"pattern": [f"{exc.message} at position {exc.position}."], "position": exc.position},
        ) from exc


def _rule_insert(
    *, pattern: str, action: str, note: str, created_by: str, mode: str = RuleMode.LIVE
) -> AutoApprovalRule:
    if action not in RuleAction.values:
        raise InvalidInput(
            f"action must be one of: {', '.join(RuleAction.values)}.",
            {"action": [f"Must be one of: {', '.join(RuleAction.values)}."]},
        )
    _check_mode(mode, action)
    note = (note or "").strip()
    if len(note) > MAX_RULE_NOTE_LENGTH:
        raise InvalidInput(
            f"note has at most {MAX_RULE_NOTE_LENGTH} characters.",
            {"note": [f"At most {MAX_RULE_NOTE_LENGTH} characters."]},
        )
    with transaction.atomic():
        rule = AutoApprovalRule.objects.create(
            pattern=canonical_pattern(pattern),
            action=action,
            note=note,
            created_by=created_by,
            mode=mode,
        )
        rule_audit(
            type=RULE_CREATED,
            rule_id=rule.pk,
            pattern=rule.pattern,
            actor=created_by,
            action=action,
            mode=mode,
            note=note,
        )
    return rule


def _check_mode(mode: str, action: str) -> None:
    """A known mode; shadow only for auto-approve rules (a shadow rule records what it would
    have approved: a never-auto-approve rule approves nothing)."""
    if mode not in RuleMode.values:
        raise InvalidInput(
            f"mode must be one of: {', '.join(RuleMode.values)}.",
            {"mode": [f"Must be one of: {', '.join(RuleMode.values)}."]},
        )
    if mode == RuleMode.SHADOW and action != RuleAction.AUTO_APPROVE:
        problem = "Only auto-approve rules have a shadow mode."
        raise InvalidInput(f"mode: {problem}", {"mode": [problem]})


def rule_create(
    *,
    actor: Actor,
    pattern: str,
    action: str = RuleAction.AUTO_APPROVE,
    note: str = "",
    mode: str = RuleMode.LIVE,
) -> AutoApprovalRule:
    """Add a rule (admins and management commands); `mode` shadow: it records the breakpoints
    it would have approved and decides none, until promoted (policies.shadow.rule_promote)."""
    _check_manager(actor)
    return _rule_insert(pattern=pattern, action=action, note=note, created_by=actor.name, mode=mode)


def rule_always_approve_key(*, actor: Actor, key: str, note: str) -> AutoApprovalRule:
    """The auto-approve rule for exactly `key`, made by a reviewer's "Always approve".

    An existing identical rule is reused rather than duplicated.
    """
    existing = AutoApprovalRule.objects.filter(
        pattern=key, action=RuleAction.AUTO_APPROVE, mode=RuleMode.LIVE
    ).first()
    if existing is not None:
        return existing
    return _rule_insert(
        pattern=key, action=RuleAction.AUTO_APPROVE, note=note, created_by=actor.name
    )


def rule_remove(*, actor: Actor, rule_id: str) -> None:
    _check_manager(actor)
    with transaction.atomic():
        rule = AutoApprovalRule.objects.select_for_update().filter(pk=rule_id).first()
        if rule is None:
            raise NotFound(f"No rule {rule_id}.")
        AutoApprovalRule.objects.filter(pk=rule.pk).delete()
        rule_audit(
            type=RULE_REMOVED,
            rule_id=rule.pk,
            pattern=rule.pattern,
            actor=actor.name,
            action=rule.action,
            mode=rule.mode,
            note=rule.note,
        )


def rule_list() -> QuerySet[AutoApprovalRule]:
    """The rules that decide (live ones), oldest first: what evaluate applies."""
    return AutoApprovalRule.objects.filter(mode=RuleMode.LIVE).order_by("created_at", "id")


def shadow_rule_list() -> QuerySet[AutoApprovalRule]:
    """The shadow rules, oldest first: they record what they would have approved, and decide
    nothing."""
    return AutoApprovalRule.objects.filter(mode=RuleMode.SHADOW).order_by("created_at", "id")


def rule_list_all() -> QuerySet[AutoApprovalRule]:
    """Every rule, live and shadow, oldest first: what admins list."""
    return AutoApprovalRule.objects.order_by("created_at", "id")


# rule_list_all(), as every create reads it: compiled once (infra.db.prepared), read again only
# after the configuration changed (policies.configuration).
_EVERY_RULE: Copied[list[AutoApprovalRule]] = Copied(Prepared(rule_list_all))


def rule_get(rule_id: str) -> AutoApprovalRule:
    rule = AutoApprovalRule.objects.filter(pk=rule_id).first()
    if rule is None:
        raise NotFound(f"No rule {rule_id}.")
    return rule


# --- always-break-on tags -----------------------------------------------------------


def always_break_on_tags() -> list[str]:
    return list(AlwaysBreakOnTag.objects.order_by("tag").values_list("tag", flat=True))


def always_break_on_add(*, actor: Actor, tag: str, note: str = "") -> AlwaysBreakOnTag:
    """Make `tag` always require a manual decision (idempotent)."""
    _check_manager(actor)
    tag = (tag or "").strip() if isinstance(tag, str) else ""
    if not tag or len(tag) > MAX_TAG_LENGTH:
        raise InvalidInput(
            f"tag must be 1 to {MAX_TAG_LENGTH} characters.",
            {"tag": [f"Must be 1 to {MAX_TAG_LENGTH} characters."]},
        )
    with transaction.atomic():
        entry, _ = AlwaysBreakOnTag.objects.get_or_create(
            tag=tag, defaults={"note": note.strip(), "created_by": actor.name}
        )
    return entry


def always_break_on_remove(*, actor: Actor, tag: str) -> None:
    _check_manager(actor)
    deleted, _ = AlwaysBreakOnTag.objects.filter(tag=tag).delete()
    if not deleted:
        raise NotFound(f"{tag!r} is not an always-break-on tag.")


class Keyed(Protocol):
    """What always_approve_refusal reads of a breakpoint."""

    @property
    def payload(self) -> Any: ...
    @property
    def key(self) -> str: ...
    @property
    def key_is_explicit(self) -> bool: ...


# --- evaluation ----------------------------------------------------------------------


class DecisionHistory(Protocol):
    def __call__(self, key: str, *, agent_id: str | None = None, limit: int) -> int: ...


_decision_history: DecisionHistory | None = None


def decision_history_register(reader: DecisionHistory) -> None:
    """The streak of approvals of a key, read from the breakpoints' decisions: registered by
    the breakpoints app when ready (breakpoints.selectors.consecutive_approvals), so this
    app does not import it."""
    global _decision_history
    _decision_history = reader


def _threshold(auto_approve_after_n: int, *, explicit_key: bool) -> int:
    if auto_approve_after_n >= MIN_AUTO_APPROVE_AFTER_N and explicit_key:
        return auto_approve_after_n
    return NO_AUTO_APPROVE_THRESHOLD


def consecutive_approvals(
    key: str,
    *,
    agent_id: str | None = None,
    auto_approve_after_n: int = NO_AUTO_APPROVE_THRESHOLD,
    explicit_key: bool = True,
) -> int:
    """The streak evaluate() weighs: the latest approvals of `key` in a row, counted up to
    the threshold (or REPORTED_STREAK_LIMIT without one), none for a key that is not explicit.
    A create reads it first: inside configuration.reading(), the configuration comes with
    it, in the same statement (breakpoints.selectors)."""
    if not explicit_key:
        return 0
    if _decision_history is None:
        raise RuntimeError("No decision history registered (the breakpoints app is not ready).")
    threshold = _threshold(auto_approve_after_n, explicit_key=explicit_key)
    limit = threshold if threshold >= 1 else REPORTED_STREAK_LIMIT
    return _decision_history(key, agent_id=agent_id, limit=limit)


def evaluate(
    *,
    key: str,
    tags: Iterable[str] = (),
    experts: Iterable[str] = (),
    auto_approve_after_n: int = NO_AUTO_APPROVE_THRESHOLD,
    agent_id: str | None = None,
    explicit_key: bool = True,
    prevent_self_review: bool = False,
    needs_answer: bool = False,
    streak: int | None = None,
) -> Verdict:
    """The auto-approval verdict for a breakpoint key, by the precedence in this module's doc.

    `prevent_self_review`: the breakpoint's own; under four eyes (it, or the service's
    setting) nothing approves it automatically and the verdict says so; nor when it
    `needs_answer` (a form with required fields and no proposal: policies.answers).

    `agent_id` scopes the consecutive approvals to that agent's breakpoints; creation always
    passes it. Without it (admins asking about a key) they are counted across all agents.
    A breakpoint without an explicit key (`explicit_key` false: the fallback key every
    unnamed breakpoint shares) has no decision history: nothing is counted for it.
    `streak`: consecutive_approvals() of the same arguments, when the caller read it first.
    """
    tags, experts = list(tags), list(experts)
    threshold = _threshold(auto_approve_after_n, explicit_key=explicit_key)
    if streak is None:
        streak = consecutive_approvals(
            key,
            agent_id=agent_id,
            auto_approve_after_n=auto_approve_after_n,
            explicit_key=explicit_key,
        )
    return precedence(
        key=key,
        tags=tags,
        experts=experts,
        rules=_EVERY_RULE.get(),
        blocking_tag=_blocking_tag,
        four_eyes=under_four_eyes(prevent_self_review),
        needs_answer=needs_answer,
        streak=streak,
        threshold=threshold,
    )


def precedence(
    *,
    key: str,
    tags: list[str],
    experts: list[str],
    rules: Iterable[AutoApprovalRule],
    blocking_tag: Callable[[list[str]], str | None],
    four_eyes: bool,
    needs_answer: bool,
    streak: int = 0,
    threshold: int = NO_AUTO_APPROVE_THRESHOLD,
) -> Verdict:
    """The verdict by the precedence in this module's doc, from what the caller read: the
    one place that orders four eyes, a form, the rules, the tags and the streak.

    Reads nothing itself: `rules` in their order (rule_list(), or those and a candidate
    for a replay), `blocking_tag` names the first always-break-on tag of its argument
    (asked only when no never-auto-approve rule has decided), `threshold` is the
    autoApproveAfterN in force (NO_AUTO_APPROVE_THRESHOLD: none) and `streak` the
    consecutive manual approvals it is compared with.
    """
    if four_eyes:
        return Verdict(False, FOUR_EYES_REASON, None, streak)
    if needs_answer:
        return Verdict(False, NEEDS_ANSWER_REASON, None, streak)
    never, auto, shadow = _matches(rules, key, tags, experts)
    if never is not None:
        return Verdict(False, f"Matched never-auto-approve rule: {never.pk}", never.pk, streak)
    tag = blocking_tag(tags)
    if tag is not None:
        return Verdict(False, f"Tag '{tag}' is in alwaysBreakOn", None, streak)
    if auto is not None:
        return Verdict(
            True, f"Matched auto-approve rule: {auto.pk}", auto.pk, streak, f"rule:{auto.pk}"
        )
    if threshold >= 1 and streak >= threshold:
        return Verdict(
            True,
            f"{streak} consecutive approvals (threshold {threshold})",
            None,
            streak,
            f"auto:after-{threshold}",
        )
    # Nothing live approves, nothing above auto-approve rules forbids: a matching shadow
    # rule taken as live would have approved.
    return Verdict(False, NO_MATCHING_RULE, None, streak, shadow_rules=shadow)


def _matching_rules(
    rules: Iterable[AutoApprovalRule], key: str, tags: list[str], experts: list[str]
) -> tuple[AutoApprovalRule | None, AutoApprovalRule | None]:
    """The first matching never-auto-approve rule, and the first matching auto-approve one
    (live rules only)."""
    never, auto, _ = _matches(rules, key, tags, experts)
    return never, auto


def _matches(
    rules: Iterable[AutoApprovalRule], key: str, tags: list[str], experts: list[str]
) -> tuple[AutoApprovalRule | None, AutoApprovalRule | None, tuple[str, ...]]:
    """_matching_rules, and the ids of the matching shadow auto-approve rules, from one read
    of `rules` (evaluate gives live and shadow together: no second query whether shadow
    rules exist or not). A matching live never-auto-approve rule ends the search: nothing else counts."""
    never = auto = None
    shadow: list[str] = []
    for rule in rules:
        compiled = stored_pattern(rule.pattern)
        if compiled is None or not compiled.matches(key, tags=tags, experts=experts):
            continue
        if rule.mode == RuleMode.SHADOW:
            if rule.action == RuleAction.AUTO_APPROVE:
                shadow.append(rule.pk)
            continue
        if rule.action == RuleAction.NEVER_AUTO_APPROVE:
            never = rule
            break
        auto = auto or rule
    return never, auto, tuple(shadow)


def _blocking_tag(tags: list[str]) -> str | None:
    """The first of `tags` that is in the always-break-on list."""
    if not tags:
        return None
    blocking = _ALWAYS_BREAK_ON.get()
    return next((tag for tag in tags if tag in blocking), None)


# Every always-break-on tag, as each create with tags reads them (policies.configuration).
_ALWAYS_BREAK_ON = Copied(
    Prepared(lambda: AlwaysBreakOnTag.objects.values_list("tag", flat=True)), frozenset
)


def forbidding_reason(
    *,
    key: str,
    tags: Iterable[str],
    experts: Iterable[str],
    prevent_self_review: bool = False,
    needs_answer: bool = False,
) -> str | None:
    """Why no automatic approval may release this breakpoint now, or None if one may.

    Four eyes, a form only a person can answer, and the rules above auto-approve rules in
    the precedence (never-auto-approve, always-break-on tags); a timeout policy of
    `approve` obeys them too.
    """
    if under_four_eyes(prevent_self_review):
        return FOUR_EYES_REASON
    if needs_answer:
        return NEEDS_ANSWER_REASON
    tags, experts = list(tags), list(experts)
    never, _ = _matching_rules(rule_list(), key, tags, experts)
    if never is not None:
        return f"Matched never-auto-approve rule: {never.pk}"
    tag = _blocking_tag(tags)
    return f"Tag '{tag}' is in alwaysBreakOn" if tag is not None else None


def check_key(key: Any) -> str:
    if not isinstance(key, str) or not key.strip() or len(key) > MAX_KEY_LENGTH:
        raise InvalidInput(
            f"key must be 1 to {MAX_KEY_LENGTH} characters.",
            {"key": [f"Must be 1 to {MAX_KEY_LENGTH} characters."]},
        )
    return key.strip()


def always_approve_refusal(bp: Keyed) -> str | None:
    """Why "Always approve" is not offered for `bp`, or None when it is.

    Not when the agent sent presentAlwaysApprove: false, nor when the key is the fallback
    every unnamed breakpoint shares (a rule for it would approve unrelated questions).
    """
    if (bp.payload or {}).get("presentAlwaysApprove") is False:
        return "The agent set presentAlwaysApprove to false."
    if not bp.key_is_explicit:
        return (
            "This breakpoint has no key of its own (no breakpointId or title): a rule for "
            "the key every unnamed question shares would approve unrelated questions."
        )
    return None
