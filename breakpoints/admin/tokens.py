"""Agent tokens in the console (admins only): list, create (raw token shown once), revoke.

Tokens are minted and revoked only through breakpoints.tokens; the hash is never shown.
"""

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.html import format_html

from breakpoints.actors import is_admin
from breakpoints.admin.base import AdminOnly
from breakpoints.limits import MAX_AGENT_ID_LENGTH, MAX_TOKEN_NAME_LENGTH
from breakpoints.models import ApiToken
from breakpoints.tokens import token_create_for_agent, token_revoke
from config.exceptions import DomainError


class AgentTokenForm(forms.Form):
    agent_id = forms.CharField(
        label="Agent id",
        max_length=MAX_AGENT_ID_LENGTH,
        help_text="The agentId this token may create and read breakpoints for.",
    )
    name = forms.CharField(
        max_length=MAX_TOKEN_NAME_LENGTH,
        required=False,
        help_text="Optional: where the token is used.",
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
class ApiTokenAdmin(AdminOnly, admin.ModelAdmin):
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

    # Tokens are never edited (revoke instead) nor deleted (keeps history).
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
