"""Agent tokens and webhooks in the console (admins only).

Tokens: list, create (raw token shown once), revoke. Webhooks: subscriptions, and
their deliveries with every attempt, re-sendable.

The Breakpoint queue and review screens live in reviews/admin.py (the console app).
Tokens are minted and revoked only through breakpoints.tokens; the hash is never shown.
"""

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.html import format_html, format_html_join

from audit.models import Event, EventType
from breakpoints.actors import is_admin
from breakpoints.models import (
    ApiToken,
    DeliveryStatus,
    Webhook,
    WebhookDelivery,
    WebhookEventType,
)
from breakpoints.tokens import token_create_for_agent, token_revoke
from breakpoints.webhooks import delivery_resend, webhook_add, webhook_build, webhook_update
from config.errors import DomainError


class AgentTokenForm(forms.Form):
    agent_id = forms.CharField(
        label="Agent id",
        max_length=128,
        help_text="The agentId this token may create and read breakpoints for.",
    )
    name = forms.CharField(
        max_length=200, required=False, help_text="Optional: where the token is used."
    )


class ActiveFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return (("active", "Active"), ("revoked", "Revoked"))

    def queryset(self, request, queryset):
        if self.value() == "active":
            return queryset.filter(revoked_at__isnull=True)
        if self.value() == "revoked":
            return queryset.filter(revoked_at__isnull=False)
        return queryset


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = (
        "prefix_display",
        "kind",
        "owner",
        "name",
        "created_at",
        "last_used_at",
        "state",
    )
    list_filter = ("kind", ActiveFilter)
    search_fields = ("=prefix", "agent_id", "name", "user__username")
    list_select_related = ("user",)
    fields = (
        "prefix",
        "kind",
        "agent_id",
        "user",
        "name",
        "created_at",
        "last_used_at",
        "revoked_at",
    )
    readonly_fields = fields
    actions = ["revoke_selected"]
    show_facets = admin.ShowFacets.NEVER

    # Admins only; tokens are never edited (revoke instead) nor deleted (keeps history).
    def has_module_permission(self, request: HttpRequest) -> bool:
        return is_admin(request.user)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return is_admin(request.user)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return is_admin(request.user)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_revoke_permission(self, request: HttpRequest) -> bool:
        return is_admin(request.user)

    @admin.display(description="Token", ordering="prefix")
    def prefix_display(self, token: ApiToken) -> str:
        return format_html("<code>{}…</code>", token.prefix)

    @admin.display(description="Agent / user")
    def owner(self, token: ApiToken) -> str:
        return token.agent_id or (token.user.get_username() if token.user else "—")

    @admin.display(description="State", ordering="revoked_at")
    def state(self, token: ApiToken) -> str:
        if token.revoked_at is None:
            return format_html('<span class="bpm-badge bpm-badge--released">{}</span>', "active")
        return format_html('<span class="bpm-badge bpm-badge--cancelled">{}</span>', "revoked")

    @admin.action(description="Revoke selected tokens", permissions=["revoke"])
    def revoke_selected(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        revoked = 0
        for pk in queryset.filter(revoked_at__isnull=True).values_list("pk", flat=True):
            try:
                token_revoke(prefix_or_id=str(pk))
            except DomainError as exc:
                self.message_user(request, exc.message, messages.ERROR)
            else:
                revoked += 1
        self.message_user(
            request,
            f"Revoked {revoked} token(s); requests with them now get 401."
            if revoked
            else "The selected tokens were already revoked.",
            messages.SUCCESS if revoked else messages.WARNING,
        )

    def add_view(self, request: HttpRequest, form_url: str = "", extra_context=None):
        """Mint an agent token; the raw value is shown on this response only, never stored."""
        if not self.has_add_permission(request):
            raise PermissionDenied
        form = AgentTokenForm(request.POST or None)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "app_label": self.opts.app_label,
            "title": "New agent token",
            "form": form,
        }
        if request.method == "POST" and form.is_valid():
            try:
                token, raw = token_create_for_agent(
                    agent_id=form.cleaned_data["agent_id"], name=form.cleaned_data["name"]
                )
            except DomainError as exc:
                messages.error(request, exc.message)
            else:
                context.update(title="Agent token created", token=token, raw_token=raw)
                response: HttpResponse = TemplateResponse(
                    request, "admin/breakpoints/apitoken/created.html", context
                )
                response["Cache-Control"] = "no-store"
                return response
        return TemplateResponse(request, "admin/breakpoints/apitoken/add.html", context)


# --- webhooks (admins only) -------------------------------------------------------


class WebhookForm(forms.ModelForm):
    url = forms.URLField(max_length=2000, assume_scheme="https")
    event_types = forms.MultipleChoiceField(
        choices=WebhookEventType.choices,
        widget=forms.CheckboxSelectMultiple,
        required=False,
        help_text="None ticked means every event type.",
    )
    secret = forms.CharField(
        required=False,
        max_length=200,
        help_text="Leave empty to generate a whsec_ secret. Shown once, after saving.",
    )

    class Meta:
        model = Webhook
        fields = ("url", "event_types", "secret", "active")

    def clean(self):
        data = super().clean()
        if self.instance.pk is None and "url" in data:
            try:
                webhook_build(
                    url=data["url"], event_types=data["event_types"], secret=data["secret"]
                )
            except DomainError as exc:
                raise forms.ValidationError(exc.message) from exc
        return data


class AdminOnly:
    """Webhooks and deliveries are for admins alone."""

    def has_module_permission(self, request: HttpRequest) -> bool:
        return is_admin(request.user)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return is_admin(request.user)


@admin.register(Webhook)
class WebhookAdmin(AdminOnly, admin.ModelAdmin):
    form = WebhookForm
    list_display = ("id", "url", "events", "active", "created_at")
    list_filter = ("active",)
    search_fields = ("url",)

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
            if not data["secret"]:
                self.message_user(
                    request, f"Signing secret (shown once): {saved.secret}", messages.WARNING
                )
        obj.pk = saved.pk


class DeliveryStatusBadge:
    CLASSES = {
        DeliveryStatus.DELIVERED: "released",
        DeliveryStatus.PENDING: "waiting",
        DeliveryStatus.FAILED: "expired",
    }


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(AdminOnly, admin.ModelAdmin):
    list_display = (
        "id",
        "event_type",
        "webhook",
        "breakpoint_id",
        "status_badge",
        "attempts",
        "last_status_code",
        "next_attempt_at",
        "created_at",
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
            delivery_resend(delivery_id=delivery_id)
            count += 1
        self.message_user(request, f"Queued {count} deliver(ies) again.", messages.SUCCESS)
