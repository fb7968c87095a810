"""Who signs in through the identity provider: each account's issuer, subject and last
groups, for admins to read (the provider writes them, nobody edits them here)."""

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from sso.models import Identity
from web.console.admin import AdminOnly


@admin.register(Identity)
class IdentityAdmin(AdminOnly, admin.ModelAdmin):
    list_display = ("user", "subject", "groups_shown", "signed_in_at", "checked_at")
    list_select_related = ("user",)
    search_fields = ("user__username", "user__email", "=subject")
    fields = (
        "user",
        "issuer",
        "subject",
        "groups_shown",
        "created_at",
        "signed_in_at",
        "checked_at",
    )
    readonly_fields = fields
    ordering = ("-signed_in_at", "-id")
    show_facets = admin.ShowFacets.NEVER

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="Groups at the provider (last sign-in or re-check)")
    def groups_shown(self, identity: Identity) -> str:
        groups = identity.groups if isinstance(identity.groups, list) else []
        return ", ".join(str(group) for group in groups)
