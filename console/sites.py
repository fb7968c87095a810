"""The console's admin site: the waiting queue is the landing page.

Settings install console.apps.ConsoleAdminConfig in place of django.contrib.admin, so
`admin.site` (and every @admin.register) is this site. Reviewers who open /admin/ (the
login redirect, "Home", the branding) land on the queue filtered to waiting; the stock
app index stays one click away as "All sections" (/admin/sections/).
"""

import functools
import logging
from collections.abc import Callable
from typing import Any, TypeVar, cast

from django.contrib import admin
from django.contrib.admin.views.main import ERROR_FLAG
from django.contrib.auth.decorators import login_not_required
from django.core.exceptions import BadRequest
from django.db import DataError
from django.http import HttpRequest, HttpResponse, HttpResponseBase, HttpResponseRedirect
from django.urls import URLPattern, URLResolver, path, reverse
from django.utils.functional import SimpleLazyObject
from django.utils.http import urlencode

from console.manifest import manifest_view
from console.signin import guarding_password_checks
from core.actors import is_reviewer
from core.choices import Status
from sso.views import leaving_page, sign_out_destination

logger = logging.getLogger(__name__)
View = TypeVar("View", bound=Callable[..., HttpResponseBase])


def waiting_queue_url(site_name: str = "admin") -> str:
    """The queue, filtered to waiting (oldest first): where reviewers start."""
    url = reverse(f"{site_name}:breakpoints_breakpoint_changelist", current_app=site_name)
    return f"{url}?{urlencode({'status__exact': Status.WAITING})}"


class ConsoleAdminSite(admin.AdminSite):
    # No public site behind the console: "View site" pointed at /, a 404.
    site_url = None
    # The queue needs the width; the header links to "All sections" instead.
    enable_nav_sidebar = False

    def admin_view(self, view: View, cacheable: bool = False) -> View:
        """Every console view (the sections' too), with input the database refuses as 400."""
        return super().admin_view(refusing_unstorable_input(view), cacheable)

    def get_app_list(self, request: HttpRequest, app_label: str | None = None) -> list[Any]:
        """The stock list, built when a template first reads it. Every page's context has
        it (`available_apps`) for the nav sidebar alone, which is off here: building it
        checks each section's permissions, two queries and several ms on every refresh of
        the queue."""
        build = super().get_app_list
        return cast(list[Any], SimpleLazyObject(lambda: build(request, app_label)))

    def get_urls(self) -> list[URLResolver | URLPattern]:
        return [
            path("sections/", self.admin_view(self.sections), name="sections"),
            path("manifest.webmanifest", self.manifest, name="manifest"),
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

    # The forms that check a password: their POSTs pass the address's attempt limit and
    # this process's bound on password checks before the password is hashed: a flood of
    # sign-ins with made-up usernames (each a costly hash) must not take every web thread.
    @login_not_required
    def login(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        return guarding_password_checks(super().login)(request, extra_context)

    # A refusal is a plain page, not a TemplateResponse: django-stubs narrow the result,
    # Django itself serves whatever the view returns.
    def password_change(  # type: ignore[override]
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        return guarding_password_checks(super().password_change)(request, extra_context)

    # Signed in through the identity provider: its session ends too (a page that moves on
    # to its end-session endpoint), when it offers one.
    def logout(  # type: ignore[override]
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        destination = sign_out_destination(request) if request.method == "POST" else None
        response = super().logout(request, extra_context)
        return leaving_page(destination) if destination else response

    # Public: browsers fetch a web app manifest without the session's cookie.
    @login_not_required
    def manifest(self, request: HttpRequest) -> HttpResponse:
        """The web app manifest (console.manifest): installs the console, opening on the queue."""
        scope = reverse(f"{self.name}:index", current_app=self.name)
        return manifest_view(request, scope=scope, start_url=waiting_queue_url(self.name))

    def sections(self, request: HttpRequest) -> HttpResponse:
        """The stock app index: every section this user may open."""
        return super().index(request)


def refusing_unstorable_input(view: View) -> View:
    """`view`, answering input that the database refuses at query time as bad, not a 500.

    A NUL in any filter, search or object id (PostgreSQL text cannot hold one), a UTC offset
    beyond +-15:59 in a date filter (PostgreSQL), a date that leaves years 1-9999 once in
    UTC (SQLite): Django's admin validates lookups against the field, not the database.
    A list answers as the admin does for lookups it cannot use (back to the list, `?e=1`),
    any other view 400. Such a statement fails alone: no transaction is left half done.
    """

    @functools.wraps(view)
    def guarded(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        try:
            return view(request, *args, **kwargs)
        except (DataError, OverflowError) as exc:
            logger.info("console: the database refused the input of %s: %s", request.path, exc)
            match = request.resolver_match
            listing = match is not None and (match.url_name or "").endswith("_changelist")
            if listing and request.method in ("GET", "HEAD") and ERROR_FLAG not in request.GET:
                return HttpResponseRedirect(f"{request.path}?{ERROR_FLAG}=1")
            raise BadRequest("The request holds a value the database cannot take.") from exc

    return cast(View, guarded)
