"""Notification routes in the console (admins only): which channels hear about which
breakpoints, and the timeout defaults they give. Writes go through
policies.routes with the admin as actor; its refusals are form errors.
"""

import json
import re
from typing import Any

from django import forms
from django.contrib import admin
from django.utils.functional import lazy
from django.utils.html import format_html
from django.utils.text import Truncator

from core.actors import Actor
from core.channels import EXPERTS, channel_providers
from core.exceptions import DomainError
from core.limits import MAX_PATTERN_LENGTH, MAX_ROUTE_NAME_LENGTH
from core.storable import NO_LONE_SURROGATE, storable_document, storable_problem
from policies.models import NotificationRoute
from policies.routes import route_add, route_remove, route_update
from web.console.admin import ServiceAdmin

MONO = {"autocomplete": "off", "spellcheck": "false", "class": "vLargeTextField bpm-mono"}
DEFAULTS_EXAMPLE = '{"onTimeout": "escalate", "escalateTo": "ops-lead", "remindEverySeconds": 3600}'  # fmt: skip
# The JSON fields' text, at most (a route has at most 20 channels of 50 addresses).
MAX_JSON_CHARS = 300_000


class JSONTextField(forms.CharField):
    """JSON typed into a textarea: parsed here, judged by the service."""

    def __init__(self, *, empty: Any, **kwargs: Any) -> None:
        self.empty = empty
        kwargs.setdefault("widget", forms.Textarea(attrs={**MONO, "rows": 6}))
        super().__init__(**kwargs)

    def prepare_value(self, value: Any) -> Any:
        if value is None or isinstance(value, str):
            return value or ""
        if isinstance(value, list) and value:  # one channel spec a line
            return "[\n" + ",\n".join(f"  {json.dumps(item)}" for item in value) + "\n]"
        return json.dumps(value)

    def to_python(self, value: Any) -> Any:
        text = super().to_python(value) or ""
        if len(text) > MAX_JSON_CHARS:
            raise forms.ValidationError(f"At most {MAX_JSON_CHARS:,} characters.")
        if not text:
            return self.empty
        try:
            parsed = json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise forms.ValidationError(f"Not valid JSON: {str(exc)[:200]}") from None
        if not storable_document([parsed]):  # PostgreSQL cannot store it
            raise forms.ValidationError(storable_problem([parsed]) or NO_LONE_SURROGATE)
        return parsed

    def validate(self, value: Any) -> None:
        if self.required and value is self.empty:  # left blank ("[]" is the service's)
            raise forms.ValidationError(self.error_messages["required"], code="required")

    def run_validators(self, value: Any) -> None:
        """The stock validators measure text; to_python checked the text already."""


def on_fields(exc: DomainError) -> DomainError:
    """The service names "channels[1]" or "defaults.onTimeout": put them on the field
    (channels, defaults), saying which entry, so the form shows every problem."""
    details: dict[str, list[str]] = {}
    for key, texts in (exc.details or {}).items():
        base = re.split(r"[\[.]", str(key), maxsplit=1)[0]
        prefix = "" if base == key else f"{key}: "
        for text in texts if isinstance(texts, list) else [texts]:
            details.setdefault(base, []).append(f"{prefix}{text}")
    exc.details = details
    return exc


def channels_help() -> str:
    """The channels field's help: each channel's example specs, and what "to": "experts"
    means on the channels that take it (read when shown: the channels load lazily)."""
    channels = channel_providers().values()
    examples = [spec for channel in channels for spec in channel.example_specs]
    experts = " or ".join(channel.experts_phrase for channel in channels if channel.experts_phrase)
    return (
        f"A JSON list of channel specs, e.g. {json.dumps(examples)}. "
        f'"to": "{EXPERTS}" means {experts} to each routed expert.'
    )


class RouteForm(forms.Form):
    name = forms.CharField(max_length=MAX_ROUTE_NAME_LENGTH)
    pattern = forms.CharField(
        max_length=MAX_PATTERN_LENGTH,
        widget=forms.TextInput(attrs={**MONO, "class": "vTextField bpm-mono"}),
        help_text="The rule pattern language: a key glob (* matches anything), optionally "
        "with predicates: deploy.*, *(tags contains 'prod'), "
        "gate.*(tags contains 'security' AND expert = 'owner').",
    )
    channels = JSONTextField(empty=[], help_text=lazy(channels_help, str)())
    defaults = JSONTextField(
        empty={},
        required=False,
        help_text="Optional JSON object: the timeout policy a matching breakpoint gets when "
        f"its payload leaves a key out, e.g. {DEFAULTS_EXAMPLE}.",
    )
    enabled = forms.BooleanField(required=False, initial=True)


def channels_summary(channels: Any) -> str:
    """One short phrase per spec: its kind and its value (an address list shortened)."""
    parts = []
    for spec in channels if isinstance(channels, list) else []:
        if not isinstance(spec, dict):
            continue
        target = next((value for key, value in spec.items() if key != "kind"), None)
        if isinstance(target, list):
            more = f" (+{len(target) - 3})" if len(target) > 3 else ""
            target = ", ".join(str(address) for address in target[:3]) + more
        parts.append(f"{spec.get('kind')} {target}")
    return Truncator("; ".join(parts)).chars(120)


@admin.register(NotificationRoute)
class NotificationRouteAdmin(ServiceAdmin):
    list_display = ("name", "pattern_display", "channels_display", "enabled", "created_by")
    list_display_links = ("name",)
    list_filter = ("enabled",)
    search_fields = ("name", "pattern")
    ordering = ("name",)
    add_form = RouteForm
    change_form = RouteForm

    @admin.display(description="Pattern", ordering="pattern")
    def pattern_display(self, route: NotificationRoute) -> str:
        return format_html("<code>{}</code>", route.pattern)

    @admin.display(description="Channels")
    def channels_display(self, route: NotificationRoute) -> str:
        return channels_summary(route.channels)

    def add(self, actor: Actor, data: dict[str, Any]) -> str:
        try:
            route = route_add(actor=actor, **data)
        except DomainError as exc:
            raise on_fields(exc) from None
        return f"Added route “{route.name}”: {route.pattern}."

    def add_context(self, form: forms.Form, error: DomainError | None) -> dict[str, Any]:
        return {"title": "New notification route", "submit_label": "Add route"}

    def change_initial(self, obj: NotificationRoute) -> dict[str, Any]:
        return {
            "name": obj.name,
            "pattern": obj.pattern,
            "channels": obj.channels,
            "defaults": obj.defaults or "",
            "enabled": obj.enabled,
        }

    def change(self, actor: Actor, obj: NotificationRoute, data: dict[str, Any]) -> str:
        try:
            route = route_update(actor=actor, route_id=obj.pk, **data)
        except DomainError as exc:
            raise on_fields(exc) from None
        return f"Saved route “{route.name}”."

    def change_context(self, obj: NotificationRoute) -> dict[str, Any]:
        facts = [
            ("Created", f"{obj.created_at:%Y-%m-%d %H:%M} UTC by {obj.created_by or '—'}"),
        ]
        return {"title": f"Route “{obj.name}”", "submit_label": "Save", "facts": facts}

    def remove(self, actor: Actor, obj: NotificationRoute) -> None:
        route_remove(actor=actor, route_id=obj.pk)
