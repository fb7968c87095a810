"""Auto-approval in the console (admins only): rules, always-break-on tags, and an evaluator.

Rules and tags are added and removed only through policies.autoapproval, with the
admin as actor; nothing is edited in place (remove and add again), so a rule always
reads as its author wrote it. The evaluator answers what `should_auto_approve` answers.
"""

from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.admin.utils import quote
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.text import Truncator

from core.actors import Actor
from core.exceptions import DomainError
from core.limits import (
    MAX_KEY_LENGTH,
    MAX_PATTERN_LENGTH,
    MAX_RULE_NOTE_LENGTH,
    MAX_TAG_LENGTH,
    NO_AUTO_APPROVE_THRESHOLD,
)
from policies import autoapproval
from policies.models import AlwaysBreakOnTag, AutoApprovalRule, RuleAction
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
    list_display = ("id", "pattern_display", "action_badge", "note_excerpt", "created_by", "created_at")  # fmt: skip
    list_display_links = ("id",)
    list_filter = ("action",)
    search_fields = ("=id", "pattern", "note", "created_by")
    fields = ("id", "pattern", "action", "note", "created_by", "created_at")
    readonly_fields = fields
    ordering = ("created_at", "id")
    add_form = RuleForm

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
            actor=actor, pattern=data["pattern"], action=data["action"], note=data["note"]
        )
        return f"Added rule {rule.pk}: {rule.action} {rule.pattern}."

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
        return [evaluate, *super().get_urls()]

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
