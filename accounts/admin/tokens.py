"""Agent tokens in the console (admins only): list, create (raw token shown once), revoke.

Tokens are minted and revoked only through accounts.tokens; the hash is never shown.
"""

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html

from accounts.models import ApiToken
from accounts.tokens import token_create_for_agent, token_revoke
from core.actors import Actor, is_admin
from core.exceptions import DomainError
from core.limits import MAX_AGENT_ID_LENGTH, MAX_REQUESTED_BY_LENGTH, MAX_TOKEN_NAME_LENGTH
from web.console.admin import ServiceAdmin, ShownOnce


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
    owner = forms.CharField(
        max_length=MAX_REQUESTED_BY_LENGTH,
        required=False,
        help_text="Optional: the person (username or email) the agent acts for. Its "
        "breakpoints are requested by them unless they name someone else (requestedBy).",
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
class ApiTokenAdmin(ServiceAdmin):
    list_display = (
        "prefix_display",
        "kind",
        "bound_to",
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
        "owner",
        "name",
        "created_at",
        "last_used_at",
        "revoked_at",
    )
    readonly_fields = fields
    actions = ["revoke_selected"]
    add_form = AgentTokenForm

    # No change step (revoke instead), and never deleted: the token keeps its history.
    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_revoke_permission(self, request: HttpRequest) -> bool:
        return is_admin(request.user)

    @admin.display(description="Token", ordering="prefix")
    def prefix_display(self, token: ApiToken) -> str:
        return format_html("<code>{}…</code>", token.prefix)

    @admin.display(description="Agent / user")
    def bound_to(self, token: ApiToken) -> str:
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

    def add(self, actor: Actor, data: dict[str, Any]) -> ShownOnce:
        """Mint an agent token; its raw value is on this one response, never stored."""
        token, raw = token_create_for_agent(
            agent_id=data["agent_id"], name=data["name"], owner=data.get("owner")
        )
        return ShownOnce(
            "admin/accounts/apitoken/created.html",
            {"title": "Agent token created", "token": token, "raw_token": raw},
        )

    def add_context(self, form: forms.Form, error: DomainError | None) -> dict[str, Any]:
        return {"title": "New agent token", "submit_label": "Create token"}
