"""Grants in the console: reviewers see the grants they gave, admins every one; live ones
unless the filter asks for the ended; each revoked after a confirmation, through
grants.services.grant_revoke (its granter or an admin: the service decides)."""

import json
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join

from core.actors import Actor, is_admin, is_reviewer
from core.exceptions import DomainError
from grants import selectors, services
from grants.models import Grant, GrantStatus
from web.console.admin import ReviewerReadOnly

LIVE, ENDED, ALL = "live", "ended", "all"
STATUS_BADGE: dict[str, str] = {
    GrantStatus.LIVE: "released",
    GrantStatus.USED: "expired",
    GrantStatus.EXPIRED: "expired",
    GrantStatus.REVOKED: "cancelled",
}


class GrantStateFilter(admin.SimpleListFilter):
    """Live grants unless asked otherwise: ended ones (revoked, used up, expired), or all."""

    title = "state"
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return ((LIVE, "Live"), (ENDED, "Ended"), (ALL, "All"))

    def queryset(self, request, queryset):
        value = self.value()
        if value == ALL:
            return queryset
        if value == ENDED:
            return queryset.exclude(selectors.live())
        return queryset.filter(selectors.live())  # live, and whatever else is asked

    def choices(self, changelist):
        # No stock "All" entry that clears the parameter: without it, the list is live.
        current = self.value() if self.value() in (ENDED, ALL) else LIVE
        for value, label in self.lookup_choices:
            yield {
                "selected": current == value,
                "query_string": changelist.get_query_string({self.parameter_name: value}),
                "display": label,
            }


@admin.register(Grant)
class GrantAdmin(ReviewerReadOnly, admin.ModelAdmin):
    list_display = ("id", "agent", "key_display", "run_display", "values_display", "uses_display", "expiry", "granted_by", "breakpoint_link", "state", "revoke_button")  # fmt: skip
    list_display_links = ("id",)
    list_filter = (GrantStateFilter,)
    fields = ("id", "scope", "agent_id", "key", "run_id", "values_display", "uses_display", "expires_at", "granted_by", "breakpoint_link", "created_at", "state", "revoked_by", "revoked_at", "ended_at", "ended_reason")  # fmt: skip
    readonly_fields = fields
    ordering = ("-created_at", "-id")
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    list_per_page = 50

    def get_queryset(self, request: HttpRequest) -> QuerySet[Grant]:
        # The reviewer's own (grant_granter_created), every one for admins (grant_created).
        if not is_reviewer(request.user):
            return Grant.objects.none()
        return selectors.grant_list(actor=Actor.for_user(request.user))

    def get_urls(self):
        revoke = self.admin_site.admin_view(self.revoke_view)
        info = self.opts.app_label, self.opts.model_name
        return [
            path("<path:object_id>/revoke/", revoke, name="{}_{}_revoke".format(*info)),
            *super().get_urls(),
        ]

    def _url(self, name: str, *args: Any) -> str:
        opts = self.opts
        return reverse(
            f"admin:{opts.app_label}_{opts.model_name}_{name}",
            args=[quote(arg) for arg in args],
            current_app=self.admin_site.name,
        )

    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None):
        title = "Grants" if is_admin(request.user) else "Your grants"
        return super().changelist_view(request, {"title": title, **(extra_context or {})})

    # --- columns ----------------------------------------------------------------------

    @admin.display(description="Agent", ordering="agent_id")
    def agent(self, grant: Grant) -> str:
        return grant.agent_id

    @admin.display(description="Key", ordering="key")
    def key_display(self, grant: Grant) -> str:
        return format_html("<code>{}</code>", grant.key)

    @admin.display(description="Run")
    def run_display(self, grant: Grant) -> str:
        return format_html("<code>{}</code>", grant.run_id) if grant.run_id else "any run"

    @admin.display(description="Values")
    def values_display(self, grant: Grant) -> str:
        if not grant.values:
            return "any"
        return format_html_join(
            ", ",
            "<code>{}</code> {} <code>{}</code>",
            (
                (name, "starts with" if kind == "prefix" else kind, json.dumps(expected))
                for name, rule in grant.values.items()
                for kind, expected in rule.items()
            ),
        )

    @admin.display(description="Uses left")
    def uses_display(self, grant: Grant) -> str:
        if grant.uses_granted is None:
            return "no limit"
        return f"{grant.uses_left} of {grant.uses_granted}"

    @admin.display(description="Expires", ordering="expires_at")
    def expiry(self, grant: Grant) -> str:
        if grant.expires_at is None:
            return "—"
        return format_html(
            '<time datetime="{}">{} UTC</time>',
            grant.expires_at.isoformat(),
            grant.expires_at.strftime("%Y-%m-%d %H:%M"),
        )

    @admin.display(description="From breakpoint")
    def breakpoint_link(self, grant: Grant) -> str:
        # breakpoint_id only: no join, no payload loaded per row.
        url = reverse("admin:breakpoints_breakpoint_change", args=[quote(grant.breakpoint_id)])
        return format_html('<a href="{}">{}</a>', url, grant.breakpoint_id)

    @admin.display(description="State")
    def state(self, grant: Grant) -> str:
        status = grant.status
        return format_html(
            '<span class="bpm-badge bpm-badge--{}">{}</span>', STATUS_BADGE[status], status
        )

    @admin.display(description="")
    def revoke_button(self, grant: Grant) -> str:
        if grant.status != GrantStatus.LIVE:
            return ""
        return format_html(
            '<a class="button bpm-danger bpm-revoke" href="{}">Revoke…</a>',
            self._url("revoke", grant.pk),
        )

    # --- revoke -----------------------------------------------------------------------

    def revoke_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """GET: what the grant covers, and a Revoke button; POST: grant_revoke, then the
        list, with what was done or the service's refusal."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        actor, grant_id = Actor.for_user(request.user), unquote(object_id)
        back = HttpResponseRedirect(self._url("changelist"))
        try:
            if request.method == "POST":
                grant = services.grant_revoke(actor=actor, grant_id=grant_id)
            else:
                grant = selectors.grant_get(actor=actor, grant_id=grant_id)
        except DomainError as exc:
            messages.error(request, exc.message)
            return back
        if request.method == "POST":
            messages.success(
                request, f"Revoked grant {grant.pk}: it approves nothing more of “{grant.key}”."
            )
            return back
        return TemplateResponse(
            request,
            "admin/grants/grant/revoke_confirm.html",
            {
                **self.admin_site.each_context(request),
                "opts": self.opts,
                "app_label": self.opts.app_label,
                "title": f"Revoke grant {grant.pk}",
                "grant": grant,
                "terms": grant_shown_terms(grant),
                "changelist_url": self._url("changelist"),
                "revoke_url": self._url("revoke", grant.pk),
            },
        )


def grant_shown_terms(grant: Grant) -> dict[str, Any]:
    """A given grant's terms for admin/grants/grant/terms.html (uses: those left)."""
    return {
        "agent": grant.agent_id,
        "key": grant.key,
        "run": grant.run_id,
        "uses": grant.uses_left,
        "until": grant.expires_at,
        "values": [
            (name, "starts with" if kind == "prefix" else kind, json.dumps(expected))
            for name, rule in grant.values.items()
            for kind, expected in rule.items()
        ],
    }
