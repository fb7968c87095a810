"""Who signs in through the identity provider: each account's issuer, subject and last
groups, for admins to read (the provider writes them, nobody edits them here)."""

from django.contrib import admin

from sso.models import Identity
from web.console.admin import AdminOnly, ReadOnly


@admin.register(Identity)
class IdentityAdmin(AdminOnly, ReadOnly, admin.ModelAdmin):
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

    @admin.display(description="Groups at the provider (last sign-in or re-check)")
    def groups_shown(self, identity: Identity) -> str:
        groups = identity.groups if isinstance(identity.groups, list) else []
        return ", ".join(str(group) for group in groups)
