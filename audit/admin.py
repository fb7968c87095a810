"""The audit trail in the console: read-only for everyone, superusers included; the sign-ins
(access events) and the rules' changes (rule events) for admins alone."""

import json
from typing import Any

from django.contrib import admin
from django.contrib.admin.utils import quote
from django.urls import reverse
from django.utils.html import format_html

from audit.models import AccessEvent, Event, EventType, RuleEvent
from infra.net import redacted_url
from web.console.admin import AdminOnly, ReadOnly, ReviewerReadOnly


def shown_metadata(event: Event) -> dict[str, Any]:
    """The metadata as the console shows it: a delivery's URL always redacted, since
    events recorded before the redaction may hold its credentials."""
    metadata = event.metadata if isinstance(event.metadata, dict) else {}
    if event.type == EventType.NOTIFICATION and isinstance(metadata.get("url"), str):
        return {**metadata, "url": redacted_url(metadata["url"])}
    return metadata


@admin.register(Event)
class EventAdmin(ReviewerReadOnly, admin.ModelAdmin):
    """Append-only: events are written by audit.services inside each transition."""

    list_display = ("timestamp", "type", "actor", "breakpoint_link", "details")
    list_filter = ("type", ("timestamp", admin.DateFieldListFilter))
    search_fields = ("actor", "=breakpoint__id")
    fields = ("timestamp", "type", "actor", "breakpoint_link", "metadata_shown")
    readonly_fields = fields
    ordering = ("-timestamp", "-id")
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    list_per_page = 100

    @admin.display(description="Breakpoint", ordering="breakpoint_id")
    def breakpoint_link(self, event: Event) -> str:
        # breakpoint_id only: no join, no payload loaded per row.
        url = reverse("admin:breakpoints_breakpoint_change", args=[quote(event.breakpoint_id)])
        return format_html('<a href="{}">{}</a>', url, event.breakpoint_id)

    @admin.display(description="Details")
    def details(self, event: Event) -> str:
        metadata = shown_metadata(event)
        parts = [f"{key}={value}" for key, value in metadata.items() if value not in (None, "")]
        return format_html('<span class="bpm-muted">{}</span>', ", ".join(parts)[:200])

    @admin.display(description="Metadata")
    def metadata_shown(self, event: Event) -> str:
        shown = shown_metadata(event) if isinstance(event.metadata, dict) else event.metadata
        return json.dumps(shown, ensure_ascii=False, sort_keys=True)


@admin.register(AccessEvent)
class AccessEventAdmin(AdminOnly, ReadOnly, admin.ModelAdmin):
    """Sign-ins, refusals, role changes and ended sessions: who, with which identity
    provider groups, when. Admins read them; nobody edits them."""

    list_display = ("timestamp", "type", "actor", "via", "groups_shown", "details")
    list_filter = ("type", "via", ("timestamp", admin.DateFieldListFilter))
    search_fields = ("actor", "=subject")
    fields = ("timestamp", "type", "actor", "via", "subject", "groups_shown", "metadata_shown")
    readonly_fields = fields
    ordering = ("-timestamp", "-id")
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    list_per_page = 100

    @admin.display(description="Groups (identity provider)")
    def groups_shown(self, event: AccessEvent) -> str:
        groups = event.groups if isinstance(event.groups, list) else []
        return ", ".join(str(group) for group in groups)

    @admin.display(description="Details")
    def details(self, event: AccessEvent) -> str:
        metadata = event.metadata if isinstance(event.metadata, dict) else {}
        parts = [f"{key}={value}" for key, value in metadata.items() if value not in (None, "", [])]
        return format_html('<span class="bpm-muted">{}</span>', ", ".join(parts)[:300])

    @admin.display(description="Metadata")
    def metadata_shown(self, event: AccessEvent) -> str:
        return json.dumps(event.metadata, ensure_ascii=False, sort_keys=True)


@admin.register(RuleEvent)
class RuleEventAdmin(AdminOnly, ReadOnly, admin.ModelAdmin):
    """Changes to auto-approval rules (a shadow rule promoted to live): who, which rule,
    when. Admins read them; nobody edits them."""

    list_display = ("timestamp", "type", "rule_id", "pattern", "actor")
    list_filter = ("type", ("timestamp", admin.DateFieldListFilter))
    search_fields = ("=rule_id", "pattern", "actor")
    fields = ("timestamp", "type", "rule_id", "pattern", "actor", "metadata_shown")
    readonly_fields = fields
    ordering = ("-timestamp", "-id")
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    list_per_page = 100

    @admin.display(description="Metadata")
    def metadata_shown(self, event: RuleEvent) -> str:
        return json.dumps(event.metadata, ensure_ascii=False, sort_keys=True)
