"""The console's admin site: the waiting queue is the landing page.

Settings install reviews.apps.ConsoleAdminConfig in place of django.contrib.admin, so
`admin.site` (and every @admin.register) is this site. Reviewers who open /admin/ (the
login redirect, "Home", the branding) land on the queue filtered to waiting; the stock
app index stays one click away as "All sections" (/admin/sections/).
"""

from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import URLPattern, URLResolver, path, reverse
from django.utils.http import urlencode

from breakpoints.actors import is_reviewer
from breakpoints.choices import Status


def waiting_queue_url(site_name: str = "admin") -> str:
    """The queue, filtered to waiting (oldest first): where reviewers start."""
    url = reverse(f"{site_name}:breakpoints_breakpoint_changelist", current_app=site_name)
    return f"{url}?{urlencode({'status__exact': Status.WAITING})}"


class ConsoleAdminSite(admin.AdminSite):
    # No public site behind the console: "View site" pointed at /, a 404.
    site_url = None
    # The queue needs the width; the header links to "All sections" instead.
    enable_nav_sidebar = False

    def get_urls(self) -> list[URLResolver | URLPattern]:
        return [
            path("sections/", self.admin_view(self.sections), name="sections"),
            *super().get_urls(),
        ]

    # A redirect for reviewers: django-stubs narrow index() to TemplateResponse, Django
    # itself serves whatever response the view returns.
    def index(  # type: ignore[override]
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        if is_reviewer(request.user):
            return HttpResponseRedirect(waiting_queue_url(self.name))
        return super().index(request, extra_context)  # staff without a role: "nothing here"

    def sections(self, request: HttpRequest) -> HttpResponse:
        """The stock app index: every section this user may open."""
        return super().index(request)
