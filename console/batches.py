"""The queue's batch decisions and its groups.

"Approve selected" / "Reject selected" (admin actions on the queue's checkboxes): a
confirmation page lists what will be decided and what will be refused, and why (the
question every channel asks: breakpoints.services.batch_refusals), with one comment for
all; confirmed, the batch goes through breakpoints.services.decisions_batch, each
breakpoint decided as on its review page. The grouped queue counts the waiting
breakpoints by key and run (breakpoints.selectors.breakpoint_groups); a group opens the
queue filtered to it, where "select all" and an action decide it.
"""

import urllib.parse
from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.contrib.admin import helpers
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone

from breakpoints import selectors, services
from breakpoints.models import Breakpoint
from console.forms import CommentForm
from core.actors import Actor
from core.choices import Status, Via
from core.limits import MAX_BATCH_DECISIONS
from web.rendering import html as rendering

if TYPE_CHECKING:
    from console.admin import BreakpointAdmin

TEMPLATES = "admin/breakpoints/breakpoint"
# What the queue's rows need of a breakpoint here, and what release_refusal reads.
BATCH_COLUMNS = (
    "id",
    "status",
    "title",
    "question",
    "key",
    "agent_id",
    "run_id",
    "created_at",
    "expires_at",
    "experts",
    "votes",
    "strategy",
    "requested_by",
    "prevent_self_review",
)
VERB = {True: "approve", False: "reject"}


class BatchForm(CommentForm):
    """The one comment every breakpoint of the batch is decided with (optional)."""


def decide_selected(
    model_admin: "BreakpointAdmin",
    request: HttpRequest,
    queryset: QuerySet[Breakpoint],
    *,
    approved: bool,
) -> HttpResponse | None:
    """An admin action: the confirmation page, then (post=yes) the decisions. None goes
    back to the queue, with what was done in its messages."""
    if not model_admin.has_release_permission(request):
        raise PermissionDenied
    if request.POST.get("post") == "yes":
        return _decide(model_admin, request, approved=approved)
    ids = list(queryset.order_by().values_list("pk", flat=True)[: MAX_BATCH_DECISIONS + 1])
    if len(ids) > MAX_BATCH_DECISIONS:
        messages.error(
            request,
            f"Select at most {MAX_BATCH_DECISIONS} breakpoints to decide at once "
            "(filter the queue, or open a group).",
        )
        return None
    return _confirm(model_admin, request, ids, approved=approved, form=BatchForm())


def _confirm(
    model_admin: "BreakpointAdmin",
    request: HttpRequest,
    ids: list[str],
    *,
    approved: bool,
    form: BatchForm,
) -> TemplateResponse:
    """What will be decided and what refused, and why, in the queue's order (oldest first)."""
    actor = Actor.for_user(request.user)
    rows = list(
        Breakpoint.objects.filter(pk__in=ids).only(*BATCH_COLUMNS).order_by("created_at", "id")
    )
    rows = services.breakpoints_page_read(request.user, rows)  # the overdue ones expired
    refusals = services.batch_refusals(actor=actor, breakpoints=rows)
    now = timezone.now()
    listed = [
        {"bp": bp, "refusal": refusal, "age": rendering.age(bp.created_at, now)}
        for bp, refusal in zip(rows, refusals, strict=True)
    ]
    deciding = [row for row in listed if row["refusal"] is None]
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.opts,
        "title": f"{VERB[approved].capitalize()} selected breakpoints",
        "approved": approved,
        "verb": VERB[approved],
        "action": f"{VERB[approved]}_selected",
        "deciding": deciding,
        "refused": [row for row in listed if row["refusal"] is not None],
        "form": form,
        "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        "changelist_url": _changelist_url(model_admin, request),
    }
    return TemplateResponse(request, f"{TEMPLATES}/batch_confirm.html", context)


def _decide(
    model_admin: "BreakpointAdmin", request: HttpRequest, *, approved: bool
) -> HttpResponse | None:
    """The confirmed batch: each breakpoint listed as decided, through the service (which
    refuses, and records, what changed since the confirmation page)."""
    ids = request.POST.getlist(helpers.ACTION_CHECKBOX_NAME)[:MAX_BATCH_DECISIONS]
    form = BatchForm(request.POST)
    if not form.is_valid():
        return _confirm(model_admin, request, ids, approved=approved, form=form)
    comment = form.cleaned_data["comment"]
    outcomes = services.decisions_batch(
        actor=Actor.for_user(request.user),
        items=[services.BatchItem(pk, approved=approved, comment=comment) for pk in ids],
        via=Via.CONSOLE,
    )
    decided = [o.breakpoint for o in outcomes if o.breakpoint is not None]
    released = sum(1 for bp in decided if bp.status != Status.WAITING)
    if released:
        done = "Approved" if approved else "Rejected"
        messages.success(
            request,
            f"{done} {_count(released)}. The agents receive the results on their next poll.",
        )
    if len(decided) > released:
        messages.success(
            request,
            f"Your vote was recorded on {_count(len(decided) - released)}; "
            "other reviewers still have to respond.",
        )
    names = dict(
        Breakpoint.objects.filter(pk__in=[o.breakpoint_id for o in outcomes if o.error])
        .only("id", "title", "question", "key")
        .in_bulk()
    )
    for outcome in outcomes:
        if outcome.error is not None:
            shown = names.get(outcome.breakpoint_id)
            name = shown.display_name if shown is not None else outcome.breakpoint_id
            messages.warning(request, f"“{name}” was not decided: {outcome.error.message}")
    return None


def _count(n: int) -> str:
    return f"{n} breakpoint" if n == 1 else f"{n} breakpoints"


def _changelist_url(model_admin: "BreakpointAdmin", request: HttpRequest) -> str:
    """The queue as the reviewer left it (its filters), to go back to."""
    opts = model_admin.opts
    url = reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")
    query = request.META.get("QUERY_STRING", "")
    return f"{url}?{query}" if query else url


def groups_view(model_admin: "BreakpointAdmin", request: HttpRequest) -> TemplateResponse:
    """The queue grouped: "17 × key in run r-42" per row, the largest groups first (at most
    100), each opening the waiting queue filtered to it."""
    if not model_admin.has_view_permission(request):
        raise PermissionDenied
    opts = model_admin.opts
    queue = reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")
    now = timezone.now()
    groups = [
        {**group, "url": f"{queue}?{_group_query(group)}", "age": _age(group, now)}
        for group in selectors.breakpoint_groups(request.user)
    ]
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": opts,
        "title": "Queue, grouped by key and run",
        "groups": groups,
        "changelist_url": f"{queue}?status__exact={Status.WAITING}",
    }
    return TemplateResponse(request, f"{TEMPLATES}/groups.html", context)


def _group_query(group: dict[str, Any]) -> str:
    """The queue's filters that show exactly one group's waiting breakpoints."""
    params = {"status__exact": Status.WAITING, "key": group["key"]}
    if group["runId"] is None:
        params["norun"] = "1"
    else:
        params["run"] = group["runId"]
    return urllib.parse.urlencode(params)


def _age(group: dict[str, Any], now: Any) -> str:
    return rendering.age(group["oldestCreatedAt"], now)
