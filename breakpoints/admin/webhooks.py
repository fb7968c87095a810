"""Webhooks in the console (admins only): subscriptions, and their deliveries with every
attempt, re-sendable. Writes go through breakpoints.webhooks.
"""

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import quote
from django.db import models
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.text import Truncator, capfirst

from audit.models import Event, EventType
from breakpoints.actors import is_admin
from breakpoints.admin.base import AdminOnly
from breakpoints.limits import MAX_WEBHOOK_SECRET_LENGTH, MAX_WEBHOOK_URL_LENGTH
from breakpoints.models import DeliveryStatus, Webhook, WebhookDelivery, WebhookEventType
from breakpoints.models.webhook import redacted_url
from breakpoints.webhooks import (
    delivery_resend,
    webhook_add,
    webhook_build,
    webhook_remove,
    webhook_update,
)
from config.exceptions import DomainError


def _https_url_fields(db_field: models.Field, **kwargs: Any) -> forms.Field | None:
    """Model URL fields default to https when the scheme is left out (Django 6's default)."""
    if isinstance(db_field, models.URLField):
        kwargs.setdefault("assume_scheme", "https")
    return db_field.formfield(**kwargs)


class WebhookForm(forms.ModelForm):
    url = forms.URLField(max_length=MAX_WEBHOOK_URL_LENGTH, assume_scheme="https")
    event_types = forms.MultipleChoiceField(
        choices=WebhookEventType.choices,
        widget=forms.CheckboxSelectMultiple,
        required=False,
        help_text="None ticked means every event type.",
    )
    secret = forms.CharField(
        required=False,
        max_length=MAX_WEBHOOK_SECRET_LENGTH,
        help_text="Leave empty to generate a whsec_ secret. Shown once, after saving.",
    )

    class Meta:
        model = Webhook
        fields = ("url", "event_types", "secret", "active")
        formfield_callback = _https_url_fields

    def clean(self):
        super().clean()
        data = self.cleaned_data
        if self.instance.pk is None and "url" in data:
            try:
                webhook_build(
                    url=data["url"], event_types=data["event_types"], secret=data["secret"]
                )
            except DomainError as exc:
                raise forms.ValidationError(exc.message) from exc
        return data


@admin.register(Webhook)
class WebhookAdmin(AdminOnly, admin.ModelAdmin):
    form = WebhookForm
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}
    list_display = ("id", "url", "events", "active", "created_at")
    list_filter = ("active",)
    search_fields = ("url",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Webhook]:
        # A removed webhook is history (its deliveries keep it): no page to revive it.
        return super().get_queryset(request).filter(removed_at__isnull=True)

    def get_fields(self, request: HttpRequest, obj: Webhook | None = None):
        return ("url", "event_types", "secret", "active") if obj is None else (
            "url", "event_types", "active", "created_at"
        )  # fmt: skip

    def get_readonly_fields(self, request: HttpRequest, obj: Webhook | None = None):
        return () if obj is None else ("url", "created_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return is_admin(request.user)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return is_admin(request.user)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return is_admin(request.user)

    @admin.display(description="Events")
    def events(self, webhook: Webhook) -> str:
        return ", ".join(webhook.event_types) or "all"

    def save_model(self, request: HttpRequest, obj: Webhook, form, change: bool) -> None:
        """Through the webhook services; the form has already validated the input."""
        data = form.cleaned_data
        if change:
            saved = webhook_update(
                webhook_id=obj.pk, event_types=data["event_types"], active=data["active"]
            )
        else:
            saved = webhook_add(
                url=data["url"], event_types=data["event_types"], secret=data["secret"]
            )
            if not data["active"]:
                saved = webhook_update(
                    webhook_id=saved.pk, event_types=saved.event_types, active=False
                )
            # A generated secret is shown once, by response_add; never again after.
            # secret_generated is a flag for response_add only, not a model field.
            obj.secret, obj.secret_generated = saved.secret, not data["secret"]  # type: ignore[attr-defined]
        obj.pk = saved.pk

    def response_add(self, request: HttpRequest, obj: Webhook, post_url_continue=None):
        if not getattr(obj, "secret_generated", False):
            return super().response_add(request, obj, post_url_continue)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "app_label": self.opts.app_label,
            "title": "Webhook added",
            "webhook": obj,
            "secret": obj.secret,
        }
        response = TemplateResponse(request, "admin/breakpoints/webhook/created.html", context)
        response["Cache-Control"] = "no-store"
        return response

    def delete_model(self, request: HttpRequest, obj: Webhook) -> None:
        """The console's delete removes softly, as remove_webhook does: deliveries stay."""
        try:
            webhook_remove(webhook_id=obj.pk)
        except DomainError as exc:
            self.message_user(request, exc.message, messages.ERROR)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Webhook]) -> None:
        for webhook_id in queryset.values_list("pk", flat=True):
            try:
                webhook_remove(webhook_id=webhook_id)
            except DomainError:
                pass  # removed meanwhile

    def get_deleted_objects(self, objs, request):
        # Only the subscriptions go: their deliveries and audit events stay.
        webhooks = list(objs)
        listed = [format_html("{}: {}", capfirst(self.opts.verbose_name), w) for w in webhooks]
        return listed, {self.opts.verbose_name_plural: len(webhooks)}, set(), []


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


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(AdminOnly, admin.ModelAdmin):
    # Narrow enough for a laptop (1366px) with the filters: short ids, status early.
    list_display = (
        "short_id",
        "status_badge",
        "event_type",
        "target",
        "breakpoint_short",
        "attempts",
        "last_code",
        "next_attempt",
    )
    list_filter = ("status", "event_type")
    search_fields = ("=id", "=breakpoint__id")
    list_select_related = ("webhook",)
    readonly_fields = (
        "id",
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

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_resend_permission(self, request: HttpRequest) -> bool:
        return is_admin(request.user)

    @admin.display(description="Id", ordering="id")
    def short_id(self, delivery: WebhookDelivery) -> str:
        return _short(delivery.pk, SHORT_ID_CHARS)

    @admin.display(description="Webhook", ordering="webhook__url")
    def target(self, delivery: WebhookDelivery) -> str:
        url = redacted_url(delivery.webhook.url)  # never the URL's credentials
        removed = " (removed)" if delivery.webhook.is_removed else ""
        return format_html('<span title="{}">{}</span>{}', url, Truncator(url).chars(40), removed)

    @admin.display(description="Breakpoint", ordering="breakpoint_id")
    def breakpoint_short(self, delivery: WebhookDelivery) -> str:
        # breakpoint_id only: no join, no payload loaded per row.
        url = reverse("admin:breakpoints_breakpoint_change", args=[quote(delivery.breakpoint_id)])
        return format_html(
            '<a href="{}">{}</a>', url, _short(delivery.breakpoint_id, SHORT_ID_CHARS)
        )

    @admin.display(description="Last HTTP", ordering="last_status_code")
    def last_code(self, delivery: WebhookDelivery) -> str:
        return str(delivery.last_status_code or "—")

    @admin.display(description="Next attempt", ordering="next_attempt_at")
    def next_attempt(self, delivery: WebhookDelivery) -> str:
        if delivery.status != DeliveryStatus.PENDING:
            return "—"
        return delivery.next_attempt_at.strftime("%Y-%m-%d %H:%M UTC")

    @admin.display(description="Status", ordering="status")
    def status_badge(self, delivery: WebhookDelivery) -> str:
        css = DeliveryStatusBadge.CLASSES.get(delivery.status, "waiting")
        return format_html('<span class="bpm-badge bpm-badge--{}">{}</span>', css, delivery.status)

    @admin.display(description="Attempts")
    def attempt_history(self, delivery: WebhookDelivery) -> str:
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
    def resend_selected(self, request: HttpRequest, queryset: QuerySet[WebhookDelivery]) -> None:
        count = 0
        for delivery_id in queryset.values_list("pk", flat=True):
            try:
                delivery_resend(delivery_id=delivery_id)
            except DomainError as exc:  # its webhook was removed, or it is gone
                self.message_user(request, exc.message, messages.ERROR)
                continue
            count += 1
        self.message_user(request, f"Queued {count} deliver(ies) again.", messages.SUCCESS)
