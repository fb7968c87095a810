"""External events in the console (admins only): event sources (the secret shown once,
paused and resumed), trigger rules (added and removed, never edited in place), and the
events received with what each rule did. Every write goes through triggers.services with
the admin as actor (its refusals are form errors on their field); what senders wrote is
always escaped.
"""

from collections import Counter
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import quote
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.text import Truncator

from core.actors import Actor
from core.exceptions import DomainError
from core.limits import (
    MAX_EVENT_TYPE_LENGTH,
    MAX_SOURCE_NAME_LENGTH,
    MAX_WEBHOOK_SECRET_LENGTH,
)
from policies.admin.routes import JSONTextField
from triggers.api.serializers import source_url
from triggers.api.shapes import params_problems
from triggers.models import (
    EventSource,
    EventStatus,
    ExternalEvent,
    SourceKind,
    TriggerAction,
    TriggerRule,
)
from triggers.services import rule_add, rule_remove, source_add, source_set_enabled
from web.console.admin import AdminOnly, InputFilter, ServiceAdmin, ShownOnce
from web.console.pagination import CappedCountPaginator
from web.rendering.html import render_json

MONO = {"autocomplete": "off", "spellcheck": "false", "class": "vTextField bpm-mono"}
STATUS_BADGE: dict[str, str] = {EventStatus.PENDING: "waiting", EventStatus.PROCESSED: "released", EventStatus.FAILED: "expired"}  # fmt: skip
SHORT_ID_CHARS = 14
SUMMARY_CHARS = 160


# --- event sources --------------------------------------------------------------------------


class SourceAddForm(forms.Form):
    name = forms.CharField(
        max_length=MAX_SOURCE_NAME_LENGTH,
        widget=forms.TextInput(attrs={**MONO, "placeholder": "github"}),
        help_text="Lowercase letters, digits, - and _: the sender posts to /api/events/<name>.",
    )
    kind = forms.ChoiceField(
        choices=SourceKind.choices,
        help_text="How its deliveries are signed: Standard Webhooks, GitHub "
        "(X-Hub-Signature-256), GitLab (X-Gitlab-Token) or generic HMAC (bpm events send).",
    )
    secret = forms.CharField(
        required=False,
        max_length=MAX_WEBHOOK_SECRET_LENGTH,
        widget=forms.TextInput(attrs=MONO),
        help_text="At least 16 characters, e.g. the one already set in GitHub. Leave empty "
        "to generate one: it is shown once, after saving.",
    )


class SourceChangeForm(forms.Form):
    enabled = forms.BooleanField(
        required=False, help_text="Untick to pause: its URL answers 404 meanwhile."
    )


@admin.register(EventSource)
class EventSourceAdmin(ServiceAdmin):
    list_display = ("name", "kind", "enabled", "url", "created_by", "created_at")
    list_filter = ("kind", "enabled")
    search_fields = ("name",)
    ordering = ("name",)
    add_form = SourceAddForm
    change_form = SourceChangeForm
    actions = ["pause_selected", "resume_selected"]

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # its events keep it (PROTECT): pause it instead

    @admin.display(description="URL")
    def url(self, source: EventSource) -> str:
        return format_html("<code>{}</code>", source_url(source.name))

    def add(self, actor: Actor, data: dict[str, Any]) -> str | ShownOnce:
        source = source_add(
            actor=actor, name=data["name"], kind=data["kind"], secret=data["secret"] or None
        )
        if data["secret"]:  # the admin's own secret is never echoed
            return f"Added event source “{source.name}” ({source.kind})."
        context = {"title": "Event source added", "source": source, "secret": source.secret}
        return ShownOnce("admin/triggers/eventsource/created.html", context)

    def add_context(self, form: forms.Form, error: DomainError | None) -> dict[str, Any]:
        return {"title": "New event source", "submit_label": "Add source"}

    def change_initial(self, obj: EventSource) -> dict[str, Any]:
        return {"enabled": obj.enabled}

    def change(self, actor: Actor, obj: EventSource, data: dict[str, Any]) -> str:
        source = source_set_enabled(actor=actor, name=obj.name, enabled=data["enabled"])
        return f"Event source “{source.name}” is {'enabled' if source.enabled else 'paused'}."

    def change_context(self, obj: EventSource) -> dict[str, Any]:
        facts = [
            ("Kind", obj.kind),
            ("URL", source_url(obj.name)),
            ("Created", f"{obj.created_at:%Y-%m-%d %H:%M} UTC by {obj.created_by or '—'}"),
        ]
        return {"title": f"Event source “{obj.name}”", "submit_label": "Save", "facts": facts}

    def _set_enabled(self, request: HttpRequest, queryset: QuerySet, enabled: bool) -> None:
        actor = Actor.for_user(request.user)
        names = list(queryset.values_list("name", flat=True))
        for name in names:
            source_set_enabled(actor=actor, name=name, enabled=enabled)
        state = "Resumed" if enabled else "Paused"
        self.message_user(request, f"{state} {len(names)} source(s).", messages.SUCCESS)

    @admin.action(description="Pause selected sources", permissions=["change"])
    def pause_selected(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._set_enabled(request, queryset, False)

    @admin.action(description="Resume selected sources", permissions=["change"])
    def resume_selected(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._set_enabled(request, queryset, True)


# --- trigger rules --------------------------------------------------------------------------

CONDITIONS_EXAMPLE = """["workflow_run.conclusion == 'success'"]"""
PARAMS_EXAMPLE = (
    '{"selector": {"key": "wait-for-ci", "runId": "{{ workflow_run.head_sha }}"}, '
    '"feedback": "CI passed: {{ workflow_run.html_url }}"}'
)
# The service's names for the form's fields.
FORM_FIELDS = {"eventType": "event_type"}


class RuleAddForm(forms.Form):
    name = forms.CharField(max_length=MAX_SOURCE_NAME_LENGTH, widget=forms.TextInput(MONO))
    source = forms.ChoiceField(required=False, help_text="Events from this source only.")
    event_type = forms.CharField(
        label="Event type",
        initial="*",
        max_length=MAX_EVENT_TYPE_LENGTH,
        widget=forms.TextInput(MONO),
        help_text="The event type, or a glob: workflow_run, merge_request*, * (any).",
    )
    conditions = JSONTextField(
        empty=[],
        required=False,
        help_text="A JSON list of JMESPath expressions over the event's payload, every one "
        f"of which must hold. The CI gate: {CONDITIONS_EXAMPLE}",
    )
    action = forms.ChoiceField(choices=TriggerAction.choices)
    params = JSONTextField(
        empty=None,
        required=False,
        help_text="A JSON object; text values are templates ({{ expression }}). release: "
        "selector (key, runId, agentId, tags), approved, feedback; cancel: selector, reason; "
        "create: question, title, tags, expert, ttlSeconds, breakpointId, agentId, runId; "
        f"forward: none. The CI gate (release): {PARAMS_EXAMPLE}",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        names = EventSource.objects.order_by("name").values_list("name", flat=True)
        self.fields["source"].choices = [("", "Any source"), *((n, n) for n in names)]  # type: ignore[attr-defined]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("action") in TriggerAction.values and "params" in data:
            for key, texts in params_problems(data["action"], data["params"]).items():
                self.add_error("params", f"{key}: {texts[0]}")
        return data


def on_form_fields(exc: DomainError) -> DomainError:
    """ "conditions[1]" or "params.selector" on the field they concern, saying which."""
    details: dict[str, list[str]] = {}
    for key, texts in (exc.details or {}).items():
        base = str(key).split("[", 1)[0].split(".", 1)[0]
        field = FORM_FIELDS.get(base, base)
        prefix = "" if base == key else f"{key}: "
        for text in texts if isinstance(texts, list) else [texts]:
            details.setdefault(field, []).append(f"{prefix}{text}")
    exc.details = details
    return exc


@admin.register(TriggerRule)
class TriggerRuleAdmin(ServiceAdmin):
    list_display = ("name", "source_name", "event_type_code", "action", "conditions_summary", "owner", "enabled", "created_at")  # fmt: skip
    list_filter = ("action", "enabled", "source")
    list_select_related = ("source", "owner")
    search_fields = ("name", "event_type")
    ordering = ("name",)
    fields = ("name", "source", "event_type", "conditions_shown", "action", "params_shown", "owner", "enabled", "created_at")  # fmt: skip
    readonly_fields = fields
    add_form = RuleAddForm

    @admin.display(description="Source", ordering="source__name")
    def source_name(self, rule: TriggerRule) -> str:
        return rule.source.name if rule.source else "any"

    @admin.display(description="Event type", ordering="event_type")
    def event_type_code(self, rule: TriggerRule) -> str:
        return format_html("<code>{}</code>", rule.event_type)

    @admin.display(description="Conditions")
    def conditions_summary(self, rule: TriggerRule) -> str:
        text = " AND ".join(str(condition) for condition in rule.conditions or [])
        return format_html("<code>{}</code>", Truncator(text).chars(100)) if text else "always"

    @admin.display(description="Conditions")
    def conditions_shown(self, rule: TriggerRule) -> SafeString:
        return render_json(rule.conditions)

    @admin.display(description="Params")
    def params_shown(self, rule: TriggerRule) -> SafeString:
        return render_json(rule.params)

    def add(self, actor: Actor, data: dict[str, Any]) -> str:
        try:
            rule = rule_add(
                actor=actor,
                name=data["name"],
                action=data["action"],
                source=data["source"] or None,
                event_type=data["event_type"],
                conditions=data["conditions"],
                params=data["params"],
            )
        except DomainError as exc:
            raise on_form_fields(exc) from None
        return f"Added trigger rule “{rule.name}”: {rule.action}."

    def add_context(self, form: forms.Form, error: DomainError | None) -> dict[str, Any]:
        return {"title": "New trigger rule", "submit_label": "Add rule"}

    def remove(self, actor: Actor, obj: TriggerRule) -> None:
        rule_remove(actor=actor, name=obj.name)


# --- external events ------------------------------------------------------------------------


class TypeFilter(InputFilter):
    title = "event type"
    parameter_name = "type"

    def queryset(self, request, queryset):
        value = (self.value() or "").strip()
        return queryset.filter(type=value) if value else queryset


def _outcomes(results: Any) -> list[dict[str, Any]]:
    return [item for item in results if isinstance(item, dict)] if isinstance(results, list) else []  # fmt: skip


def _actions(outcome: dict[str, Any]) -> list[dict[str, Any]]:
    return _outcomes(outcome.get("actions"))


def summary(results: Any) -> str:
    """One line: each rule that matched (or failed) and what it did, counted."""
    outcomes = _outcomes(results)
    parts = []
    for outcome in outcomes:
        if outcome.get("error"):
            parts.append(f"{outcome.get('rule')}: error")
        elif outcome.get("matched"):
            done = Counter(str(taken.get("outcome")) for taken in _actions(outcome))
            said = ", ".join(f"{what} ×{n}" if n > 1 else what for what, n in done.items())
            parts.append(f"{outcome.get('rule')}: {said or 'nothing'}")
    if not parts:
        return f"no rule matched ({len(outcomes)} evaluated)" if outcomes else "—"
    return Truncator("; ".join(parts)).chars(SUMMARY_CHARS)


def breakpoint_link(breakpoint_id: Any) -> str:
    if not isinstance(breakpoint_id, str) or not breakpoint_id:
        return ""
    url = reverse("admin:breakpoints_breakpoint_change", args=[quote(breakpoint_id)])
    return format_html('<a href="{}">{}</a>', url, breakpoint_id)


def _taken_html(taken: dict[str, Any]) -> str:
    error = taken.get("error")
    return format_html(
        "<li>{} {} {}{}</li>",
        taken.get("action", ""),
        breakpoint_link(taken.get("breakpointId")),
        taken.get("outcome", ""),
        format_html(' <span class="bpm-muted">({})</span>', error) if error else "",
    )


def _row(outcome: dict[str, Any]) -> tuple[Any, ...]:
    taken = format_html_join("", "{}", ((_taken_html(item),) for item in _actions(outcome)))
    unmet = ", ".join(map(str, outcome.get("unmet") or []))
    said = outcome.get("matched")
    matched = ("yes" if said else "no") if isinstance(said, bool) else "—"
    return (outcome.get("rule", ""), matched, taken, outcome.get("error") or unmet)


def results_table(results: Any) -> str:
    """Per rule: matched, the actions taken (breakpoints linked), the error; all escaped."""
    row = "<tr><td><code>{}</code></td><td>{}</td><td><ul>{}</ul></td><td>{}</td></tr>"
    rows = format_html_join("", row, (_row(outcome) for outcome in _outcomes(results)))
    if not rows:
        return "No rule evaluated it."
    header = "<tr><th>Rule</th><th>Matched</th><th>Actions</th><th>Error or unmet</th></tr>"
    return format_html("<table><thead>{}</thead><tbody>{}</tbody></table>", SafeString(header), rows)  # fmt: skip


@admin.register(ExternalEvent)
class ExternalEventAdmin(AdminOnly, admin.ModelAdmin):
    """Read-only: events are stored by the ingest and evaluated by the worker."""

    list_display = ("short_id", "source", "type", "received_at", "status_badge", "rules", "error_excerpt")  # fmt: skip
    list_filter = ("status", "source", TypeFilter)
    list_select_related = ("source",)
    search_fields = ("=id",)  # the box; get_search_results decides
    search_help_text = "An event id (evt_…), or the sender's delivery id."
    ordering = ("-received_at", "-id")
    fields = ("id", "source", "type", "delivery_id", "received_at", "status_badge", "attempts", "processed_at", "results_shown", "error", "headers_shown", "payload_shown")  # fmt: skip
    readonly_fields = fields
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    paginator = CappedCountPaginator
    list_per_page = 50

    def get_queryset(self, request: HttpRequest) -> QuerySet[ExternalEvent]:
        # Payloads can be large: the list never loads them (the detail does, once).
        return super().get_queryset(request).defer("payload", "headers")

    def get_search_results(self, request: HttpRequest, queryset: QuerySet, search_term: str):
        """Exact, case-sensitive: the primary key, or (source, delivery_id)'s index once a
        source is chosen; never UPPER() over every row, as "=" fields would do."""
        term = search_term.strip()
        if not term:
            return queryset, False
        field = "pk" if term.startswith("evt_") else "delivery_id"
        return queryset.filter(**{field: term}), False

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="Id", ordering="id")
    def short_id(self, event: ExternalEvent) -> str:
        return format_html('<code title="{}">{}</code>', event.pk, Truncator(event.pk).chars(SHORT_ID_CHARS))  # fmt: skip

    @admin.display(description="Status", ordering="status")
    def status_badge(self, event: ExternalEvent) -> str:
        css = STATUS_BADGE.get(event.status, "waiting")
        return format_html('<span class="bpm-badge bpm-badge--{}">{}</span>', css, event.status)

    @admin.display(description="Rules and actions")
    def rules(self, event: ExternalEvent) -> str:
        return summary(event.results)

    @admin.display(description="Error")
    def error_excerpt(self, event: ExternalEvent) -> str:
        return Truncator(event.error).chars(80) if event.error else "—"

    @admin.display(description="Results")
    def results_shown(self, event: ExternalEvent) -> str:
        return results_table(event.results)

    @admin.display(description="Headers")
    def headers_shown(self, event: ExternalEvent) -> SafeString:
        return render_json(event.headers)

    @admin.display(description="Payload")
    def payload_shown(self, event: ExternalEvent) -> SafeString:
        return render_json(event.payload)
