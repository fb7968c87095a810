"""Webhooks in the console (admins only): subscriptions, and their deliveries with every
attempt, re-sendable. Writes go through notifications.services.
"""

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import quote
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.text import Truncator

from audit.models import Event, EventType
from core.actors import Actor, is_admin
from core.exceptions import DomainError
from core.limits import MAX_WEBHOOK_SECRET_LENGTH, MAX_WEBHOOK_URL_LENGTH
from notifications.models import Delivery, DeliveryStatus, Webhook, WebhookEventType
from notifications.services import (
    delivery_resend,
    webhook_add,
    webhook_build,
    webhook_remove,
    webhook_update,
)
from web.console.admin import AdminOnly, ReadOnly, ServiceAdmin, ShownOnce


class WebhookChangeForm(forms.Form):
    """What a subscription may change: what it receives, and whether it is paused."""

    event_types = forms.MultipleChoiceField(
        choices=WebhookEventType.choices,
        widget=forms.CheckboxSelectMultiple,
        required=False,
        help_text="None ticked means every event type.",
    )
    active = forms.BooleanField(
        required=False, initial=True, help_text="Untick to pause: nothing is sent meanwhile."
    )


class WebhookAddForm(WebhookChangeForm):
    url = forms.URLField(max_length=MAX_WEBHOOK_URL_LENGTH, assume_scheme="https")
    secret = forms.CharField(
        required=False,
        max_length=MAX_WEBHOOK_SECRET_LENGTH,
        help_text="Leave empty to generate a whsec_ secret. Shown once, after saving.",
    )
    field_order = ["url", "event_types", "secret", "active"]

    def clean(self):
        super().clean()
        data = self.cleaned_data
        if "url" in data:  # the service's own checks (address, secret), nothing written
            try:
                webhook_build(
                    url=data["url"], event_types=data["event_types"], secret=data["secret"]
                )
            except DomainError as exc:
                raise forms.ValidationError(exc.message) from exc
        return data


def _events(webhook: Webhook) -> str:
    return ", ".join(webhook.event_types) or "all"


@admin.register(Webhook)
class WebhookAdmin(ServiceAdmin):
    list_display = ("id", "url", "events", "active", "created_at")
    list_filter = ("active",)
    search_fields = ("url",)
    add_form = WebhookAddForm
    change_form = WebhookChangeForm

    def get_queryset(self, request: HttpRequest) -> QuerySet[Webhook]:
        # A removed webhook is history (its deliveries keep it): no page to revive it.
        return super().get_queryset(request).filter(removed_at__isnull=True)

    @admin.display(description="Events")
    def events(self, webhook: Webhook) -> str:
        return _events(webhook)

    def add(self, actor: Actor, data: dict[str, Any]) -> str | ShownOnce:
        webhook = webhook_add(
            url=data["url"], event_types=data["event_types"], secret=data["secret"]
        )
        if not data["active"]:
            webhook = webhook_update(
                webhook_id=webhook.pk, event_types=webhook.event_types, active=False
            )
        if data["secret"]:  # the admin's own secret is never echoed
            return f"Added webhook {webhook.pk}: {webhook} ({_events(webhook)})."
        # A generated secret is shown on this response only, never again after.
        context = {"title": "Webhook added", "webhook": webhook, "secret": webhook.secret}
        return ShownOnce("admin/notifications/webhook/created.html", context)

    def add_context(self, form: forms.Form, error: DomainError | None) -> dict[str, Any]:
        return {"title": "Add webhook", "submit_label": "Add webhook"}

    def change_initial(self, obj: Webhook) -> dict[str, Any]:
        return {"event_types": obj.event_types, "active": obj.active}

    def change(self, actor: Actor, obj: Webhook, data: dict[str, Any]) -> str:
        webhook = webhook_update(
            webhook_id=obj.pk, event_types=data["event_types"], active=data["active"]
        )
        state = "active" if webhook.active else "paused"
        return f"Saved webhook {webhook.pk}: {_events(webhook)}, {state}."

    def change_context(self, obj: Webhook) -> dict[str, Any]:
        facts = [("URL", obj.url), ("Created", obj.created_at.strftime("%Y-%m-%d %H:%M UTC"))]
        return {"title": f"Webhook {obj.pk}", "submit_label": "Save", "facts": facts}

    def remove(self, actor: Actor, obj: Webhook) -> None:
        """Softly, as remove_webhook does: the subscription and its deliveries stay."""
        webhook_remove(webhook_id=obj.pk)


class DeliveryStatusBadge:
    CLASSES: dict[str, str] = {
        DeliveryStatus.DELIVERED: "released",
        DeliveryStatus.PENDING: "waiting",
        DeliveryStatus.FAILED: "expired",
    }


# Ids are long random strings: the list shows their start (the whole one on hover).
SHORT_ID_CHARS = 14


def _short(value: str, chars: int) -> str:
    return format_html('<code title="{}">{}</code>', value, Truncator(value).chars(chars))


@admin.register(Delivery)
class WebhookDeliveryAdmin(AdminOnly, ReadOnly, admin.ModelAdmin):
    # Narrow enough for a laptop (1366px) with the filters: short ids, status early.
    list_display = (
        "short_id",
        "status_badge",
        "event_type",
        "sent_to",
        "breakpoint_short",
        "attempts",
        "last_code",
        "next_attempt",
    )
    # A channel's name (its label, from the registry) in the filter and on the detail page.
    list_filter = ("status", "channel", "event_type")
    search_fields = ("=id", "=breakpoint__id")
    list_select_related = ("webhook",)
    readonly_fields = (
        "id",
        "channel",
        "webhook",
        "breakpoint",
        "event_type",
        "status",
        "attempts",
        "next_attempt_at",
        "last_status_code",
        "last_error",
        "created_at",
        "delivered_at",
        "attempt_history",
        "body",
    )
    fields = readonly_fields
    actions = ["resend_selected"]
    show_full_result_count = False

    def has_resend_permission(self, request: HttpRequest) -> bool:
        return is_admin(request.user)

    @admin.display(description="Id", ordering="id")
    def short_id(self, delivery: Delivery) -> str:
        return _short(delivery.pk, SHORT_ID_CHARS)

    @admin.display(description="Webhook", ordering="webhook__url")
    def sent_to(self, delivery: Delivery) -> str:
        url = delivery.destination()  # never a URL's credentials
        removed = " (removed)" if delivery.webhook and delivery.webhook.is_removed else ""
        return format_html('<span title="{}">{}</span>{}', url, Truncator(url).chars(40), removed)

    @admin.display(description="Breakpoint", ordering="breakpoint_id")
    def breakpoint_short(self, delivery: Delivery) -> str:
        # breakpoint_id only: no join, no payload loaded per row.
        if delivery.breakpoint_id is None:
            return "—"  # a forwarded external event concerns no breakpoint
        url = reverse("admin:breakpoints_breakpoint_change", args=[quote(delivery.breakpoint_id)])
        return format_html(
            '<a href="{}">{}</a>', url, _short(delivery.breakpoint_id, SHORT_ID_CHARS)
        )

    @admin.display(description="Last HTTP", ordering="last_status_code")
    def last_code(self, delivery: Delivery) -> str:
        return str(delivery.last_status_code or "—")

    @admin.display(description="Next attempt", ordering="next_attempt_at")
    def next_attempt(self, delivery: Delivery) -> str:
        if delivery.status != DeliveryStatus.PENDING:
            return "—"
        return delivery.next_attempt_at.strftime("%Y-%m-%d %H:%M UTC")

    @admin.display(description="Status", ordering="status")
    def status_badge(self, delivery: Delivery) -> str:
        css = DeliveryStatusBadge.CLASSES.get(delivery.status, "waiting")
        return format_html('<span class="bpm-badge bpm-badge--{}">{}</span>', css, delivery.status)

    @admin.display(description="Attempts")
    def attempt_history(self, delivery: Delivery) -> str:
        attempts = Event.objects.filter(
            breakpoint_id=delivery.breakpoint_id,
            type=EventType.NOTIFICATION,
            metadata__deliveryId=delivery.pk,
        ).order_by("timestamp", "id")
        rows = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{} ms</td><td>{}</td></tr>",
            (
                (
                    event.metadata.get("attempt"),
                    event.timestamp.strftime("%Y-%m-%d %H:%M:%S"),
                    event.metadata.get("statusCode") or "—",
                    event.metadata.get("durationMs"),
                    event.metadata.get("error") or event.metadata.get("outcome"),
                )
                for event in attempts
            ),
        )
        if not rows:
            return "No attempt yet."
        return format_html(
            "<table><thead><tr><th>#</th><th>at</th><th>HTTP</th><th>took</th>"
            "<th>result</th></tr></thead><tbody>{}</tbody></table>",
            rows,
        )

    @admin.action(description="Re-send selected deliveries", permissions=["resend"])
    def resend_selected(self, request: HttpRequest, queryset: QuerySet[Delivery]) -> None:
        count = 0
        for delivery_id in queryset.values_list("pk", flat=True):
            try:
                delivery_resend(delivery_id=delivery_id)
            except DomainError as exc:  # its webhook was removed, or it is gone
                self.message_user(request, exc.message, messages.ERROR)
                continue
            count += 1
        self.message_user(request, f"Queued {count} deliver(ies) again.", messages.SUCCESS)
