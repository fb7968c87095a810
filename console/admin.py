"""The reviewer console: the Breakpoint queue and review screens, and read-only feedback.

Roles decide access (core.actors): reviewers see the queue, comment, release
and "Always approve"; admins also expire, cancel and delete. Nobody edits a breakpoint
in a form: what the agent sent is evidence, and every change of state goes through
breakpoints.services.
"""

import html
import unicodedata
import urllib.parse
from datetime import datetime
from typing import Any, cast

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.templatetags.admin_urls import add_preserved_filters
from django.contrib.admin.utils import display_for_field, display_for_value, quote
from django.contrib.admin.views.main import ChangeList
from django.db.models import (
    Model,
    QuerySet,
)
from django.db.models.expressions import Combinable
from django.db.models.fields.json import KT
from django.http import HttpRequest
from django.urls import path, reverse
from django.utils import timezone
from django.utils.http import RFC3986_SUBDELIMS
from django.utils.safestring import SafeString, mark_safe
from django.utils.text import Truncator, smart_split, unescape_string_literal
from django.utils.translation import gettext

from accounts import experts as routing
from breakpoints import services
from breakpoints.filters import filter_routed_to
from breakpoints.models import Breakpoint, Feedback
from breakpoints.models.breakpoint import QUEUE_ORDER, BreakpointQuerySet
from breakpoints.models.jsonlists import filter_has_all_tags
from breakpoints.services import breakpoint_expire
from console import batches
from console import views as console
from core.actors import Actor, is_admin, is_reviewer
from core.choices import Status, Via
from core.exceptions import DomainError
from web.console.admin import InputFilter, ReviewerReadOnly
from web.console.pagination import CappedCountPaginator
from web.rendering import html as rendering
from web.rendering.html import format_html

admin.site.site_header = "Breakpoint Manager"
admin.site.site_title = "Breakpoint Manager"
admin.site.index_title = "Reviewer console"

# Columns the queue never shows: payloads can be megabytes per row.
HEAVY_FIELDS = ("payload", "result", "auto_approval", "request_hash")
# What the queue's status badge needs of the (deferred) result: the decision, read in
# the row query ("true"/"false" and the option's text, or None).
DECISION_ANNOTATIONS = {
    "decision_approved": KT("result__approved"),
    "decision_option": KT("result__option"),
}
SOON_SECONDS = 5 * 60
# Stands for a breakpoint id in the review URL built once per page (no id contains it).
REVIEW_URL_MARK = "bpm-review-id-mark"

# The queue's default order: waiting first, oldest waiting at the top; then the rest,
# newest first. Expressions (not field names), so no column claims to be "the" sort.
QUEUE_ORDERING: list[str | Combinable] = list(QUEUE_ORDER)


class TagFilter(InputFilter):
    title = "tag"
    parameter_name = "tag"

    def tags(self) -> list[str]:
        return [t.strip() for t in (self.value() or "").split(",") if t.strip()][:10]

    def queryset(self, request, queryset):
        tags = self.tags()
        return filter_has_all_tags(queryset, tags) if tags else queryset


class AgentFilter(InputFilter):
    title = "agent id"
    parameter_name = "agent"

    def queryset(self, request, queryset):
        value = (self.value() or "").strip()
        return queryset.filter(agent_id=value) if value else queryset


class RunFilter(InputFilter):
    title = "run id"
    parameter_name = "run"

    def queryset(self, request, queryset):
        value = (self.value() or "").strip()
        return queryset.filter(run_id=value) if value else queryset


class KeyFilter(InputFilter):
    title = "key"
    parameter_name = "key"

    def queryset(self, request, queryset):
        value = (self.value() or "").strip()
        return queryset.filter(key=value) if value else queryset


class WithoutRunFilter(admin.SimpleListFilter):
    """Breakpoints that belong to no run: a group of the grouped queue without one."""

    title = "run"
    parameter_name = "norun"

    def lookups(self, request, model_admin):
        return (("1", "Without a run"),)

    def queryset(self, request, queryset):
        return queryset.filter(run_id__isnull=True) if self.value() == "1" else queryset


class AssignedToMeFilter(admin.SimpleListFilter):
    """Breakpoints routed (payload.expert) to the reviewer: the API's assignedTo=me."""

    title = "routing"
    parameter_name = "assigned"

    def lookups(self, request, model_admin):
        return (("me", "Assigned to me"),)

    def queryset(self, request, queryset):
        return filter_routed_to(queryset, request.user) if self.value() == "me" else queryset


def review_path_part(breakpoint_id: str) -> str:
    """The id as reverse() writes it in a URL: the admin's quote(), then percent-encoded."""
    return urllib.parse.quote(quote(breakpoint_id), safe=RFC3986_SUBDELIMS + "/~:@")


class QueueChangeList(ChangeList):
    """The queue's page, with every expert name on it resolved at once (not per row)."""

    def url_for_result(self, result: Model) -> str:
        """The review screen's URL: one reverse() per page, not one per row."""
        if not hasattr(self, "_review_url"):
            self._review_url = super().url_for_result(Breakpoint(pk=REVIEW_URL_MARK))
        return self._review_url.replace(REVIEW_URL_MARK, review_path_part(result.pk), 1)

    def get_results(self, request: HttpRequest) -> None:
        super().get_results(request)
        # An overdue waiting row is expired now (rare), so the queue never shows it waiting.
        self.result_list = rows = services.breakpoints_page_read(
            request.user, list(self.result_list)
        )
        names = {name for bp in rows for name in _experts(bp)}
        resolved = routing.resolve(names)  # one query per page, none without experts
        for bp in rows:
            # A per-page annotation for summary(), not a model field.
            bp.unresolved_experts = [  # type: ignore[attr-defined]
                name for name in _experts(bp) if not (name in resolved and resolved[name].resolved)
            ]


def queue_rows(cl: QueueChangeList) -> list[list[SafeString]]:
    """The cells of every row, as the admin's items_for_result writes them (the same HTML:
    tests/console/test_queue_rows.py compares them), with the work that does not depend on
    the row done once per page: the review link with its preserved filters, the columns'
    lookups, the checkbox's markup."""
    model_admin = cl.model_admin
    empty = model_admin.get_empty_value_display()
    link = cl.url_for_result(Breakpoint(pk=REVIEW_URL_MARK))
    if cl.preserved_filters:
        link = add_preserved_filters(
            {"preserved_filters": cl.preserved_filters, "opts": cl.opts}, link
        )
    columns: list[tuple[str, Any]] = []  # (name, None | the admin's method | the field)
    for name in cl.list_display:
        assert isinstance(name, str)  # BreakpointAdmin.list_display names its columns
        if name == "action_checkbox":
            columns.append((name, None))
        elif callable(getattr(model_admin, name, None)):
            columns.append((name, getattr(model_admin, name)))
        else:
            columns.append((name, cl.opts.get_field(name)))
    checkbox = (
        '<td class="action-checkbox"><input type="checkbox" name="'
        + html.escape(helpers.ACTION_CHECKBOX_NAME)
        + '" value="{pk}" class="action-select" aria-label="{label}"></td>'
    )
    label = gettext("Select this object for an action - {}")
    rows = []
    for bp in cl.result_list:
        cells = []
        for name, source in columns:
            if source is None:
                cells.append(
                    checkbox.format(
                        pk=html.escape(str(bp.pk)), label=_html(format_html(label, str(bp)))
                    )
                )
                continue
            if callable(source):
                value = source(bp)
                shown = _html(display_for_value("" if _blank(value) else value, empty))
            else:
                value = getattr(bp, source.attname)
                shown = _html(display_for_field("" if _blank(value) else value, source, empty))
            if name in cl.list_display_links:
                url = html.escape(link.replace(REVIEW_URL_MARK, review_path_part(bp.pk), 1))
                cells.append(f'<th class="field-{name}"><a href="{url}">{shown}</a></th>')
            else:
                cells.append(f'<td class="field-{name}">{shown}</td>')
        rows.append([mark_safe(cell) for cell in cells])  # every part escaped above
    return rows


def _html(value: Any) -> str:
    """conditional_escape(value), without its lazy-string wrapper (thousands per page)."""
    return value.__html__() if hasattr(value, "__html__") else html.escape(str(value))


def _blank(value: Any) -> bool:
    return isinstance(value, str) and value.strip() == ""


def _truncated(text: str, length: int) -> str:
    """Truncator(text).chars(length): at most `length` characters, NFC. What already fits is
    returned as it is, without Truncator's walk over every character (the queue shows two
    texts per row, on every refresh)."""
    if len(text) <= length and unicodedata.is_normalized("NFC", text):
        return text
    return Truncator(text).chars(length)


def _experts(bp: Breakpoint) -> list[str]:
    return (
        [name for name in bp.experts if isinstance(name, str)]
        if isinstance(bp.experts, list)
        else []
    )


@admin.register(Breakpoint)
class BreakpointAdmin(admin.ModelAdmin):
    list_display = ("summary", "agent_id", "run_id", "tag_list", "status_badge", "age", "time_left")
    list_display_links = ("summary",)
    list_filter = (
        "status",
        AssignedToMeFilter,
        TagFilter,
        KeyFilter,
        AgentFilter,
        RunFilter,
        WithoutRunFilter,
        ("created_at", admin.DateFieldListFilter),
    )
    search_fields = ("title", "question")
    search_help_text = "Search titles and questions."
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    # Rendering an admin row costs ~0.3 ms: 25 rows keep a queue page near 20 ms.
    list_per_page = 25
    paginator = CappedCountPaginator
    ordering = QUEUE_ORDERING
    actions = ["approve_selected", "reject_selected", "expire_selected"]
    sortable_by = ("agent_id", "run_id", "status_badge", "age", "time_left")

    # --- permissions: roles, not per-model grants --------------------------

    def has_module_permission(self, request: HttpRequest) -> bool:
        return is_reviewer(request.user)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return is_reviewer(request.user)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # agents create breakpoints through the API

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # the payload is what the agent sent; state moves only via services

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return is_admin(request.user)

    def has_release_permission(self, request: HttpRequest) -> bool:
        return is_reviewer(request.user)

    def has_expire_permission(self, request: HttpRequest) -> bool:
        return is_admin(request.user)

    def has_cancel_permission(self, request: HttpRequest) -> bool:
        return is_admin(request.user)  # agents cancel through the API; in the console, admins

    # --- the queue -----------------------------------------------------------

    def get_queryset(self, request: HttpRequest) -> QuerySet[Breakpoint]:
        return super().get_queryset(request).defer(*HEAVY_FIELDS).annotate(**DECISION_ANNOTATIONS)

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return QueueChangeList

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Breakpoint], search_term: str
    ) -> tuple[QuerySet[Breakpoint], bool]:
        """Every word in the box (a quoted phrase is one) is in the title or the question.

        Split as the admin splits it; each word matched as ?search= matches its term.
        """
        found = cast(BreakpointQuerySet, queryset)  # Breakpoint.objects' own class
        for word in smart_split(search_term):
            if word[0] in "\"'" and word[0] == word[-1]:
                word = unescape_string_literal(word)
            found = found.search(word)
        return found, False

    def get_ordering(self, request: HttpRequest) -> list[Any]:
        status = request.GET.get("status__exact")
        if status == Status.WAITING:
            return ["created_at"]  # oldest first, from the bp_waiting_created partial index
        if status in Status.values:
            # The queue's own order for one finished status, read from its partial index.
            return ["-created_at"]
        return list(self.ordering)

    @admin.display(description="Breakpoint")
    def summary(self, bp: Breakpoint) -> str:
        # Without a title the question is the name: shown once, as the title.
        question = _truncated(bp.question or "", 160) if bp.title else ""
        unresolved = getattr(bp, "unresolved_experts", None)
        warning = (
            format_html(
                ' <span class="bpm-badge bpm-badge--warn" title="{}">unresolved expert</span>',
                f"{', '.join(unresolved)}: resolves to nobody — admins answer",
            )
            if unresolved
            else ""
        )
        return format_html(
            '<span class="bpm-title">{}{}</span><span class="bpm-question">{}</span>',
            _truncated(bp.display_name, 160),
            warning,
            question,
        )

    @admin.display(description="Tags")
    def tag_list(self, bp: Breakpoint) -> str:
        tags = bp.tags if isinstance(bp.tags, list) else []
        # "tag=" + quote_plus: what urlencode({"tag": tag}) writes, without its checks
        return mark_safe(
            "".join(
                format_html(
                    '<a class="bpm-tag" href="?{}" title="Show only this tag">{}</a>',
                    "tag=" + urllib.parse.quote_plus(tag),
                    tag,
                )
                for tag in tags
                if isinstance(tag, str)
            )
        )

    @admin.display(description="Status", ordering="status")
    def status_badge(self, bp: Breakpoint) -> str:
        # A released row says its decision (approved / rejected / the option chosen).
        return rendering.status_badge(
            bp.status, getattr(bp, "decision_approved", None), getattr(bp, "decision_option", None)
        )

    @admin.display(description="Age", ordering="created_at")
    def age(self, bp: Breakpoint) -> str:
        return format_html(
            '<time datetime="{}" title="{}">{}</time>',
            bp.created_at.isoformat(),
            bp.created_at.strftime("%Y-%m-%d %H:%M:%S UTC"),
            rendering.age(bp.created_at, timezone.now()),
        )

    @admin.display(description="Time left", ordering="expires_at")
    def time_left(self, bp: Breakpoint) -> str:
        now = timezone.now()
        text = self.time_left_text(bp, now)
        if bp.expires_at is None or not bp.is_waiting:
            return format_html('<span class="bpm-muted">{}</span>', text)
        remaining = (bp.expires_at - now).total_seconds()
        css = "bpm-soon" if remaining < SOON_SECONDS else "bpm-left"
        return format_html(
            '<time class="{}" datetime="{}">{}</time>', css, bp.expires_at.isoformat(), text
        )

    @staticmethod
    def time_left_text(bp: Breakpoint, now: datetime) -> str:
        if not bp.is_waiting:
            return "—"
        if bp.expires_at is None:
            return "no expiry"
        if bp.is_overdue(now):
            return "overdue"
        return rendering.compact_duration(bp.expires_at - now)

    # --- actions ---------------------------------------------------------------

    @admin.action(description="Approve selected", permissions=["release"])
    def approve_selected(self, request: HttpRequest, queryset: QuerySet[Breakpoint]):
        """Confirm, then approve each (console.batches: what is refused, and why, first)."""
        return batches.decide_selected(self, request, queryset, approved=True)

    @admin.action(description="Reject selected", permissions=["release"])
    def reject_selected(self, request: HttpRequest, queryset: QuerySet[Breakpoint]):
        """Confirm, then reject each, with one comment for all."""
        return batches.decide_selected(self, request, queryset, approved=False)

    @admin.action(description="Expire selected waiting breakpoints", permissions=["expire"])
    def expire_selected(self, request: HttpRequest, queryset: QuerySet[Breakpoint]) -> None:
        actor = Actor.for_user(request.user)
        expired, skipped = 0, 0
        for pk in queryset.filter(status=Status.WAITING).values_list("pk", flat=True):
            try:
                breakpoint_expire(breakpoint_id=pk, actor=actor, via=Via.CONSOLE)
            except DomainError:
                skipped += 1
            else:
                expired += 1
        if expired:
            self.message_user(request, f"Expired {expired} breakpoint(s).", messages.SUCCESS)
        if skipped or not expired:
            self.message_user(
                request,
                f"{skipped} breakpoint(s) were no longer waiting and were left as they are."
                if skipped
                else "None of the selected breakpoints was waiting.",
                messages.WARNING,
            )

    # --- per-object screens ----------------------------------------------------

    def get_urls(self):
        def wrap(view):
            def wrapper(request, object_id):
                return view(self, request, object_id)

            return self.admin_site.admin_view(wrapper)

        name = f"{self.opts.app_label}_{self.opts.model_name}"
        return [
            path(
                "groups/",
                self.admin_site.admin_view(lambda request: batches.groups_view(self, request)),
                name=f"{name}_groups",
            ),
            path("<path:object_id>/comment/", wrap(console.comment_view), name=f"{name}_comment"),
            path("<path:object_id>/release/", wrap(console.release_view), name=f"{name}_release"),
            path("<path:object_id>/expire/", wrap(console.expire_view), name=f"{name}_expire"),
            path("<path:object_id>/cancel/", wrap(console.cancel_view), name=f"{name}_cancel"),
            path(
                "<path:object_id>/always-approve/",
                wrap(console.always_approve_view),
                name=f"{name}_always_approve",
            ),
            *super().get_urls(),
        ]

    def change_view(self, request, object_id, form_url="", extra_context=None):
        """The review screen replaces the (never used) edit form."""
        return console.review_view(self, request, object_id)

    def get_deleted_objects(self, objs, request):
        # Events and feedback go with their breakpoint; admins may delete without
        # per-model delete rights on the append-only children.
        deleted, model_count, perms_needed, protected = super().get_deleted_objects(objs, request)
        return deleted, model_count, set(), protected

    def delete_model(self, request: HttpRequest, obj: Breakpoint) -> None:
        """Through breakpoint_delete (admins only), which records the deletion where it
        survives its cascaded events: the breakpoints.audit log."""
        try:
            services.breakpoint_delete(breakpoint_id=obj.pk, actor=Actor.for_user(request.user))
        except DomainError as exc:  # e.g. deleted meanwhile by someone else
            self.message_user(request, exc.message, messages.ERROR)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Breakpoint]) -> None:
        for obj in queryset.only("pk"):
            self.delete_model(request, obj)


def breakpoint_link(breakpoint_id: str) -> str:
    url = reverse("admin:breakpoints_breakpoint_change", args=[quote(breakpoint_id)])
    return format_html('<a href="{}">{}</a>', url, breakpoint_id)


@admin.register(Feedback)
class FeedbackAdmin(ReviewerReadOnly, admin.ModelAdmin):
    """Read-only: feedback is written by reviewers on the review screen, via services."""

    list_display = ("created_at", "author", "excerpt", "releases", "approved", "option", "on")
    list_filter = ("releases", "approved", ("created_at", admin.DateFieldListFilter))
    search_fields = ("author", "comment", "=breakpoint__id")
    list_select_related = ("breakpoint",)
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    ordering = ("-created_at", "-id")

    def get_queryset(self, request):
        return (
            super().get_queryset(request).defer(*(f"breakpoint__{field}" for field in HEAVY_FIELDS))
        )

    @admin.display(description="Comment")
    def excerpt(self, feedback: Feedback) -> str:
        return Truncator(feedback.comment).chars(120)

    @admin.display(description="Breakpoint")
    def on(self, feedback: Feedback) -> str:
        bp = feedback.breakpoint
        url = reverse("admin:breakpoints_breakpoint_change", args=[quote(bp.pk)])
        return format_html('<a href="{}">{}</a>', url, Truncator(bp.display_name).chars(120))
