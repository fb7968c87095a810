"""Auto-approval in the console (admins only): rules, always-break-on tags, and an evaluator.

Rules and tags are added and removed only through policies.autoapproval, with the
admin as actor; nothing is edited in place (remove and add again), so a rule always
reads as its author wrote it. The evaluator answers what `should_auto_approve` answers.
A shadow rule shows how often it would have fired and how often people then agreed; it
is promoted to live (policies.shadow.rule_promote) from the list's action or its page.
"""

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.text import Truncator
from django.views.decorators.http import require_POST

from core.actors import Actor, is_admin
from core.exceptions import DomainError
from core.limits import (
    MAX_KEY_LENGTH,
    MAX_PATTERN_LENGTH,
    MAX_RULE_NOTE_LENGTH,
    MAX_TAG_LENGTH,
    NO_AUTO_APPROVE_THRESHOLD,
)
from policies import autoapproval, shadow
from policies.models import AlwaysBreakOnTag, AutoApprovalRule, RuleAction, RuleMode
from policies.validators import auto_approve_after_n_problem
from web.console.admin import ServiceAdmin, add_service_error

ACTION_BADGE: dict[str, str] = {
    RuleAction.AUTO_APPROVE: "approved",
    RuleAction.NEVER_AUTO_APPROVE: "rejected",
}
MONO = {"autocomplete": "off", "spellcheck": "false", "class": "vTextField bpm-mono"}


class RuleForm(forms.Form):
    pattern = forms.CharField(
        max_length=MAX_PATTERN_LENGTH,
        widget=forms.TextInput(attrs={**MONO, "placeholder": "confirm.*"}),
        help_text="A breakpoint key glob (* matches anything), optionally with predicates: "
        "confirm.*, *.review(tags contains 'design'), "
        "gate.*(tags contains 'prerequisites' AND expert = 'owner').",
    )
    action = forms.ChoiceField(
        choices=RuleAction.choices, initial=RuleAction.AUTO_APPROVE, widget=forms.RadioSelect
    )
    mode = forms.ChoiceField(
        choices=RuleMode.choices,
        initial=RuleMode.LIVE,
        required=False,  # left out: live, as in the API
        widget=forms.RadioSelect,
        help_text="Shadow: the rule decides nothing; this page counts the breakpoints it "
        "would have approved and what reviewers then decided, until you promote it.",
    )
    note = forms.CharField(
        required=False,
        max_length=MAX_RULE_NOTE_LENGTH,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="Why the rule exists, for the next admin.",
    )


class AlwaysBreakOnForm(forms.Form):
    tag = forms.CharField(max_length=MAX_TAG_LENGTH, widget=forms.TextInput(attrs=MONO))
    note = forms.CharField(
        required=False, max_length=MAX_RULE_NOTE_LENGTH, widget=forms.Textarea({"rows": 3})
    )


def _names(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


class EvaluateForm(forms.Form):
    key = forms.CharField(
        max_length=MAX_KEY_LENGTH,
        widget=forms.TextInput(attrs={**MONO, "placeholder": "confirm.star-repo"}),
    )
    tags = forms.CharField(required=False, help_text="Comma-separated.")
    experts = forms.CharField(required=False, help_text="Comma-separated expert names.")
    after_n = forms.IntegerField(
        required=False, label="autoApproveAfterN", help_text="Optional threshold (-1: none)."
    )

    def clean_tags(self) -> list[str]:
        return _names(self.cleaned_data["tags"])

    def clean_experts(self) -> list[str]:
        return _names(self.cleaned_data["experts"])

    def clean_after_n(self) -> int:
        after_n = self.cleaned_data["after_n"]
        if after_n is None:
            return NO_AUTO_APPROVE_THRESHOLD
        problem = auto_approve_after_n_problem(after_n)
        if problem:
            raise forms.ValidationError(problem)
        return after_n


@admin.register(AutoApprovalRule)
class AutoApprovalRuleAdmin(ServiceAdmin):
    list_display = ("id", "pattern_display", "action_badge", "mode_badge", "fired", "agreed", "disagreed", "note_excerpt", "created_by", "created_at")  # fmt: skip
    list_display_links = ("id",)
    list_filter = ("action", "mode")
    search_fields = ("=id", "pattern", "note", "created_by")
    fields = ("id", "pattern", "action", "mode", "fired", "agreed", "disagreed", "note", "created_by", "created_at")  # fmt: skip
    readonly_fields = fields
    ordering = ("created_at", "id")
    add_form = RuleForm
    actions = ["promote_selected"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[AutoApprovalRule]:
        # The shadow counts as three subqueries per listed row: no query per rule.
        return shadow.with_shadow_counts(super().get_queryset(request))

    def has_promote_permission(self, request: HttpRequest) -> bool:
        return is_admin(request.user)

    @admin.display(description="Mode", ordering="mode")
    def mode_badge(self, rule: AutoApprovalRule) -> str:
        css = "waiting" if rule.mode == RuleMode.SHADOW else "released"
        return format_html('<span class="bpm-badge bpm-badge--{}">{}</span>', css, rule.mode)

    def _count(self, rule: AutoApprovalRule, name: str) -> str | int:
        # A live rule that never was in shadow has nothing to count.
        if rule.mode == RuleMode.LIVE and not getattr(rule, "shadow_fired", 0):
            return "—"
        return getattr(rule, name, 0)

    @admin.display(description="Would have fired", ordering="shadow_fired")
    def fired(self, rule: AutoApprovalRule) -> str | int:
        return self._count(rule, "shadow_fired")

    @admin.display(description="Agreed (approved)", ordering="shadow_agreed")
    def agreed(self, rule: AutoApprovalRule) -> str | int:
        return self._count(rule, "shadow_agreed")

    @admin.display(description="Disagreed (rejected)", ordering="shadow_disagreed")
    def disagreed(self, rule: AutoApprovalRule) -> str | int:
        return self._count(rule, "shadow_disagreed")

    @admin.action(description="Promote selected shadow rules to live", permissions=["promote"])
    def promote_selected(self, request: HttpRequest, queryset: QuerySet) -> None:
        actor = Actor.for_user(request.user)
        for rule_id in queryset.values_list("pk", flat=True):
            self._promote(request, actor, rule_id)

    def _promote(self, request: HttpRequest, actor: Actor, rule_id: str) -> None:
        try:
            rule = shadow.rule_promote(actor=actor, rule_id=rule_id)
        except DomainError as exc:
            self.message_user(request, exc.message, messages.WARNING)
        else:
            self.message_user(
                request, f"Promoted rule {rule.pk}: it now decides.", messages.SUCCESS
            )

    def promote_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """The rule page's Promote button (POST only): one service call, then the list."""
        if not self.has_promote_permission(request):
            raise PermissionDenied
        self._promote(request, Actor.for_user(request.user), unquote(object_id))
        return HttpResponseRedirect(self.changelist_url())

    @admin.display(description="Pattern", ordering="pattern")
    def pattern_display(self, rule: AutoApprovalRule) -> str:
        return format_html("<code>{}</code>", rule.pattern)

    @admin.display(description="Action", ordering="action")
    def action_badge(self, rule: AutoApprovalRule) -> str:
        css = ACTION_BADGE.get(rule.action, "expired")
        return format_html('<span class="bpm-badge bpm-badge--{}">{}</span>', css, rule.action)

    @admin.display(description="Note")
    def note_excerpt(self, rule: AutoApprovalRule) -> str:
        return Truncator(rule.note).chars(100)

    def add(self, actor: Actor, data: dict[str, Any]) -> str:
        rule = autoapproval.rule_create(
            actor=actor,
            pattern=data["pattern"],
            action=data["action"],
            note=data["note"],
            mode=data["mode"] or RuleMode.LIVE,
        )
        shadow_note = " in shadow mode (it decides nothing)" if rule.mode == RuleMode.SHADOW else ""
        return f"Added rule {rule.pk}{shadow_note}: {rule.action} {rule.pattern}."

    def remove(self, actor: Actor, obj: AutoApprovalRule) -> None:
        autoapproval.rule_remove(actor=actor, rule_id=obj.pk)

    def add_context(self, form: forms.Form, error: DomainError | None) -> dict[str, Any]:
        context: dict[str, Any] = {"title": "New auto-approval rule", "submit_label": "Add rule"}
        position = error.details.get("position") if error is not None else None
        if isinstance(position, int):
            # The pattern with a caret under the character the parser stopped at.
            pattern = str(form.data.get("pattern", "")).strip()  # as the service saw it
            context["pointer"] = {"field": "pattern", "text": f"{pattern}\n{' ' * position}^"}
        return context

    def get_urls(self):
        name = f"{self.opts.app_label}_{self.opts.model_name}"
        evaluate = path(
            "evaluate/", self.admin_site.admin_view(self.evaluate_view), name=f"{name}_evaluate"
        )
        promote = path(
            "<path:object_id>/promote/",
            self.admin_site.admin_view(require_POST(self.promote_view)),
            name=f"{name}_promote",
        )
        return [evaluate, promote, *super().get_urls()]

    def evaluate_view(self, request: HttpRequest) -> HttpResponse:
        """What the rules say about a key now (read-only; GET, so it can be bookmarked)."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        form = EvaluateForm(request.GET or None)
        verdict, rule_url = None, None
        if form.is_valid():
            data = form.cleaned_data
            try:
                verdict = autoapproval.evaluate(
                    key=autoapproval.check_key(data["key"]),
                    tags=data["tags"],
                    experts=data["experts"],
                    auto_approve_after_n=data["after_n"],
                )
            except DomainError as exc:
                add_service_error(form, exc)
            if verdict is not None and verdict.matched_rule:
                rule_url = reverse(
                    "admin:policies_autoapprovalrule_change",
                    args=[quote(verdict.matched_rule)],
                    current_app=self.admin_site.name,
                )
        return self.form_page(
            request,
            form,
            "admin/policies/autoapprovalrule/evaluate.html",
            title="Evaluate a key",
            submit_label="Evaluate",
            method="get",
            verdict=verdict,
            rule_url=rule_url,
            always_break_on=autoapproval.always_break_on_tags(),
        )


@admin.register(AlwaysBreakOnTag)
class AlwaysBreakOnTagAdmin(ServiceAdmin):
    list_display = ("tag", "note_excerpt", "created_by", "created_at")
    search_fields = ("tag", "note")
    fields = ("tag", "note", "created_by", "created_at")
    readonly_fields = fields
    add_form = AlwaysBreakOnForm

    @admin.display(description="Note")
    def note_excerpt(self, entry: AlwaysBreakOnTag) -> str:
        return Truncator(entry.note).chars(100)

    def add(self, actor: Actor, data: dict[str, Any]) -> str:
        entry = autoapproval.always_break_on_add(actor=actor, tag=data["tag"], note=data["note"])
        return f"Breakpoints tagged “{entry.tag}” now always wait for a reviewer."

    def remove(self, actor: Actor, obj: AlwaysBreakOnTag) -> None:
        autoapproval.always_break_on_remove(actor=actor, tag=obj.tag)

    def add_context(self, form: forms.Form, error: DomainError | None) -> dict[str, Any]:
        return {"title": "New always-break-on tag", "submit_label": "Add tag"}
