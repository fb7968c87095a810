"""The reviewer console's per-breakpoint screens: review, comment, release and "Always
approve" (each with a confirmation step), and for admins expire and cancel.

BreakpointAdmin.get_urls() mounts these behind admin_site.admin_view(); each takes the
ModelAdmin first. Every write goes through breakpoints.services with the reviewer as
Actor, and every DomainError becomes a message, never an error page.
"""

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.contrib.admin.templatetags.admin_urls import add_preserved_filters
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.db.models.options import Options
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone

from audit.models import Event, EventType
from breakpoints import autoapproval, routing, selectors, services
from breakpoints.actors import Actor
from breakpoints.choices import Status
from breakpoints.models import Breakpoint
from breakpoints.payload import options_of
from config.exceptions import DomainError, InvalidInput, InvalidState, NotFound
from reviews import rendering
from reviews.forms import CommentForm, DecisionForm, ReasonForm
from reviews.seats import seats_panel

if TYPE_CHECKING:
    from reviews.admin import BreakpointAdmin

# --- helpers -----------------------------------------------------------------


def _actor(request: HttpRequest) -> Actor:
    return Actor.for_user(request.user)


def _url(model_admin: "BreakpointAdmin", request: HttpRequest, name: str, *args: Any) -> str:
    """An admin URL for this model that keeps the reviewer's queue filters."""
    opts = model_admin.opts
    url = reverse(
        f"admin:{opts.app_label}_{opts.model_name}_{name}",
        args=[quote(arg) for arg in args],
        current_app=model_admin.admin_site.name,
    )
    context: dict[str, Options[Any] | str] = {
        "opts": opts,
        "preserved_filters": model_admin.get_preserved_filters(request),
    }
    return add_preserved_filters(context, url)


def detail_url(model_admin: "BreakpointAdmin", request: HttpRequest, breakpoint_id: str) -> str:
    return _url(model_admin, request, "change", breakpoint_id)


def _redirect_detail(model_admin, request, object_id: str) -> HttpResponseRedirect:
    """Back to the review screen; `object_id` is the (admin-quoted) id from the URL."""
    return HttpResponseRedirect(detail_url(model_admin, request, unquote(object_id)))


def _load(model_admin: "BreakpointAdmin", request: HttpRequest, object_id: str) -> Breakpoint:
    """The breakpoint, expired on the spot if overdue (selectors do that on every read)."""
    if not model_admin.has_view_permission(request):
        raise PermissionDenied
    return selectors.breakpoint_get(request.user, unquote(object_id))


def _not_found(model_admin: "BreakpointAdmin", request: HttpRequest, object_id: str):
    # A private ModelAdmin helper (Django's own "does not exist" message); not in the stubs.
    return model_admin._get_obj_does_not_exist_redirect(  # type: ignore[attr-defined]
        request, model_admin.opts, object_id
    )


def _context(model_admin: "BreakpointAdmin", request: HttpRequest, **extra: Any) -> dict:
    return {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.opts,
        "app_label": model_admin.opts.app_label,
        "preserved_filters": model_admin.get_preserved_filters(request),
        "changelist_url": _url(model_admin, request, "changelist"),
        **extra,
    }


def _status_message(bp_status: str) -> str:
    return (
        f"This breakpoint is already {bp_status}: nothing was sent to the agent. "
        "Another reviewer, the agent or the expiry timer got there first."
    )


def _release_refusal(
    request: HttpRequest, bp: Breakpoint, resolved: dict[str, routing.Seat] | None = None
) -> str | None:
    """Why this reviewer may comment but not release a routed breakpoint, or None."""
    if not bp.experts:
        return None
    seats = routing.seats_for(bp.experts, resolved)
    try:
        routing.seat_for_response(request.user, seats, [v.get("seat") for v in bp.votes])
    except DomainError as exc:
        return exc.message
    return None


def _as_list(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    return [str(item) for item in value] if isinstance(value, list) else []


# How a finished breakpoint's header says it ended, and which timestamp says when.
FINISH = {
    Status.RELEASED: ("decided", "released_at"),
    Status.EXPIRED: ("expired", "expired_at"),
    Status.CANCELLED: ("cancelled", "cancelled_at"),
}
DELIVERY_OUTCOMES = {"delivered": "delivered", "retry": "retrying", "failed": "failed"}
DELIVERY_BADGE = {"delivered": "released", "retry": "waiting", "failed": "expired"}


@dataclass(frozen=True)
class Finish:
    """How a released, expired or cancelled breakpoint ended ("decided 3m ago by rita")."""

    verb: str
    at: datetime
    ago: str
    by: str


def _finish(bp: Breakpoint, now: datetime) -> Finish | None:
    if bp.status not in FINISH:
        return None
    verb, field = FINISH[Status(bp.status)]
    at = getattr(bp, field) or bp.updated_at
    result = bp.result if isinstance(bp.result, dict) else {}
    by = ", ".join(_as_list(result.get("respondedBy")))  # a list when seats voted
    return Finish(verb=verb, at=at, ago=rendering.age(at, now), by=by)


@dataclass(frozen=True)
class Delivery:
    """One webhook delivery of this breakpoint, as its latest attempt left it."""

    event_type: str
    webhook_id: Any
    outcome: str  # delivered / retrying / failed
    badge: str
    attempts: int
    status_code: Any
    error: str
    at: datetime


def _split_notifications(events: Iterable[Event]) -> tuple[list[Event], list[Delivery]]:
    """The timeline without webhook attempts, and those attempts folded per delivery."""
    timeline: list[Event] = []
    latest: dict[str, tuple[Event, int]] = {}  # deliveryId -> (last attempt, attempts seen)
    for event in events:
        if event.type != EventType.NOTIFICATION:
            timeline.append(event)
            continue
        meta = event.metadata if isinstance(event.metadata, dict) else {}
        key = str(meta.get("deliveryId") or f"event-{event.pk}")
        seen = latest.get(key, (event, 0))[1]
        latest[key] = (event, seen + 1)
    deliveries = []
    for event, seen in latest.values():  # in order of each delivery's first attempt
        meta = event.metadata if isinstance(event.metadata, dict) else {}
        raw = str(meta.get("outcome") or "")
        attempt = meta.get("attempt")
        error = str(meta.get("error") or "")
        if error == f"HTTP {meta.get('statusCode')}":
            error = ""  # the status code already says it
        deliveries.append(
            Delivery(
                event_type=str(meta.get("eventType") or "?"),
                webhook_id=meta.get("webhookId"),
                outcome=DELIVERY_OUTCOMES.get(raw, raw or "unknown"),
                badge=DELIVERY_BADGE.get(raw, "expired"),
                attempts=attempt if isinstance(attempt, int) and attempt > seen else seen,
                status_code=meta.get("statusCode"),
                error=error,
                at=event.timestamp,
            )
        )
    return timeline, deliveries


def _delivery_summary(deliveries: list[Delivery]) -> str:
    """One count per outcome, e.g. "2 delivered, 1 failed"."""
    counts = Counter(delivery.outcome for delivery in deliveries)
    return ", ".join(f"{count} {outcome}" for outcome, count in counts.items())


# --- views -------------------------------------------------------------------


def review_view(
    model_admin: "BreakpointAdmin",
    request: HttpRequest,
    object_id: str,
    form: DecisionForm | None = None,
) -> HttpResponse:
    """The detail page: question first, context files, result, feedback, timeline, actions."""
    try:
        bp = _load(model_admin, request, object_id)
    except NotFound:
        return _not_found(model_admin, request, object_id)
    payload = bp.payload if isinstance(bp.payload, dict) else {}
    can_release = bp.is_waiting and model_admin.has_release_permission(request)
    if form is None and can_release:
        # "Back" on the confirmation page posts the decision here to edit it again.
        initial = {key: request.POST.get(key, "") for key in ("comment", "decision", "option")}
        form = DecisionForm(
            options=options_of(payload),
            initial=initial if request.method == "POST" else None,
        )
    resolved = routing.resolve(bp.experts)  # once, for the seats panel and the refusal
    release_note = _release_refusal(request, bp, resolved) if can_release else None
    can_decide = can_release and release_note is None
    events, deliveries = _split_notifications(selectors.breakpoint_events(request.user, bp.pk))
    now = timezone.now()
    result = bp.result if isinstance(bp.result, dict) else {}
    context = _context(
        model_admin,
        request,
        title=bp.title or bp.key,
        subtitle=None,
        bp=bp,
        original=bp,
        question=bp.question,
        payload=payload,
        attempt=payload.get("attempt"),
        previous_feedback=payload.get("previousFeedback"),
        experts=_as_list(payload.get("expert")),
        strategy=payload.get("strategy"),
        options=options_of(payload),
        files=rendering.context_files(payload),
        payload_html=rendering.render_json(payload),
        result_html=rendering.render_json(bp.result) if bp.result is not None else None,
        feedback=list(bp.feedback.all()),
        events=events,
        deliveries=deliveries,
        delivery_summary=_delivery_summary(deliveries),
        status_badge=rendering.status_badge(
            bp.status, result.get("approved"), result.get("option"), large=True
        ),
        finish=_finish(bp, now),
        decision=rendering.decision(result.get("approved")) if bp.status == Status.RELEASED else "",
        form=form if can_release else None,
        can_release=can_release,
        can_decide=can_decide,
        can_always_approve=can_decide and autoapproval.offers_always_approve(payload),
        release_note=release_note,
        seats=seats_panel(bp, resolved),
        can_expire=bp.is_waiting and model_admin.has_expire_permission(request),
        can_cancel=bp.is_waiting and model_admin.has_cancel_permission(request),
        can_delete=model_admin.has_delete_permission(request, bp),
        age=rendering.age(bp.created_at, now),
        time_left=model_admin.time_left_text(bp, now),
        queue_url=reverse("admin:breakpoints_breakpoint_changelist"),
        comment_url=_url(model_admin, request, "comment", bp.pk),
        release_url=_url(model_admin, request, "release", bp.pk),
        expire_url=_url(model_admin, request, "expire", bp.pk),
        cancel_url=_url(model_admin, request, "cancel", bp.pk),
        always_url=_url(model_admin, request, "always_approve", bp.pk),
        delete_url=_url(model_admin, request, "delete", bp.pk),
    )
    return TemplateResponse(request, "admin/breakpoints/breakpoint/review.html", context)


def comment_view(model_admin: "BreakpointAdmin", request: HttpRequest, object_id: str):
    """Add a comment without deciding (feedback_add with release=False)."""
    if request.method != "POST":
        return _redirect_detail(model_admin, request, object_id)
    if not model_admin.has_release_permission(request):
        raise PermissionDenied
    comment = (request.POST.get("comment") or "").strip()
    if not comment:
        messages.error(request, "Write a comment first: an empty comment was not added.")
        return _redirect_detail(model_admin, request, object_id)
    try:
        services.feedback_add(
            breakpoint_id=unquote(object_id), actor=_actor(request), comment=comment
        )
    except NotFound:
        return _not_found(model_admin, request, object_id)
    except InvalidState as exc:
        messages.error(
            request, f"This breakpoint is already {exc.current_status}: it takes no more comments."
        )
    except DomainError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, "Comment added. The agent sees it with the breakpoint.")
    return _redirect_detail(model_admin, request, object_id)


def _releasable(
    model_admin: "BreakpointAdmin", request: HttpRequest, object_id: str
) -> Breakpoint | HttpResponse:
    """The breakpoint this reviewer may release now, or the response that says why not."""
    if request.method != "POST":
        return _redirect_detail(model_admin, request, object_id)
    if not model_admin.has_release_permission(request):
        raise PermissionDenied
    try:
        bp = _load(model_admin, request, object_id)
    except NotFound:
        return _not_found(model_admin, request, object_id)
    if not bp.is_waiting:
        messages.error(request, _status_message(bp.status))
        return _redirect_detail(model_admin, request, object_id)
    refusal = _release_refusal(request, bp)
    if refusal:
        messages.error(request, refusal)
        return _redirect_detail(model_admin, request, object_id)
    return bp


def _refused(
    model_admin: "BreakpointAdmin",
    request: HttpRequest,
    object_id: str,
    form: DecisionForm,
    exc: InvalidInput,
) -> HttpResponse:
    """The review page again, the reviewer's choices kept, with why the service refused
    them (an approve/reject that contradicts the option's verdict)."""
    form.add_error(None, exc.message)
    return review_view(model_admin, request, object_id, form=form)


def release_view(model_admin: "BreakpointAdmin", request: HttpRequest, object_id: str):
    """Release in two steps: show what the agent will receive, then send it on confirm."""
    bp = _releasable(model_admin, request, object_id)
    if isinstance(bp, HttpResponse):
        return bp
    form = DecisionForm(request.POST, options=options_of(bp.payload))
    if not form.is_valid():
        return review_view(model_admin, request, object_id, form=form)
    comment = form.cleaned_data["comment"]
    if request.POST.get("confirm") != "yes":
        try:
            outcome = services.release_preview(
                bp=bp,
                actor=Actor.for_user(request.user),
                approved=form.approved,
                comment=comment,
                option=form.option_label,
            )
        except InvalidInput as exc:
            return _refused(model_admin, request, object_id, form, exc)
        except DomainError as exc:
            messages.error(request, exc.message)
            return _redirect_detail(model_admin, request, object_id)
        # A vote that does not decide yet sends nothing: show the vote being recorded.
        preview = outcome.result if outcome.result is not None else outcome.votes[-1]
        approved = bool(outcome.votes[-1]["approved"])  # the verdict, as the service set it
        context = _context(
            model_admin,
            request,
            title="Confirm release",
            subtitle=None,
            bp=bp,
            original=bp,
            form=form,
            decision_label=form.decision_label(approved),
            is_vote=bool(bp.experts) and bp.strategy in services.VOTING_STRATEGIES,
            approved=approved,
            result_html=rendering.render_json(preview),
            # A vote that does not decide yet is recorded; anything else is sent.
            confirm_label="Record vote" if outcome.result is None else form.send_label(approved),
            release_url=_url(model_admin, request, "release", bp.pk),
            detail_url=detail_url(model_admin, request, bp.pk),
        )
        return TemplateResponse(
            request, "admin/breakpoints/breakpoint/release_confirm.html", context
        )
    try:
        feedback, bp = services.feedback_add(
            breakpoint_id=bp.pk,
            actor=_actor(request),
            comment=comment,
            release=True,
            approved=form.approved,
            option=form.option_label,
        )
    except InvalidState as exc:
        messages.error(request, _status_message(exc.current_status))
        return _redirect_detail(model_admin, request, object_id)
    except InvalidInput as exc:
        return _refused(model_admin, request, object_id, form, exc)
    except DomainError as exc:
        messages.error(request, exc.message)
        return _redirect_detail(model_admin, request, object_id)
    if bp.is_waiting:
        # A multi-reviewer strategy (collect-all, quorum) counted the vote but is not done.
        messages.success(
            request, "Your decision was recorded; other reviewers still have to respond."
        )
        return _redirect_detail(model_admin, request, object_id)
    messages.success(
        request,
        f"Released “{bp.title or bp.key}”: {form.outcome(bool(feedback.approved))}. "
        "The agent receives the result on its next poll.",
    )
    return HttpResponseRedirect(_url(model_admin, request, "changelist"))


def _end_view(
    model_admin: "BreakpointAdmin",
    request: HttpRequest,
    object_id: str,
    *,
    action: str,
    service: Any,
    done: str,
) -> HttpResponse:
    """Admins: confirm with a reason, then end a waiting breakpoint (expire or cancel)."""
    if not getattr(model_admin, f"has_{action}_permission")(request):
        raise PermissionDenied
    try:
        bp = _load(model_admin, request, object_id)
    except NotFound:
        return _not_found(model_admin, request, object_id)
    if not bp.is_waiting:
        messages.error(request, f"This breakpoint is already {bp.status}: it cannot be {done}.")
        return _redirect_detail(model_admin, request, object_id)
    form = ReasonForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            service(breakpoint_id=bp.pk, actor=_actor(request), reason=form.cleaned_data["reason"])
        except InvalidState as exc:
            messages.error(request, f"This breakpoint is already {exc.current_status}.")
        except DomainError as exc:
            messages.error(request, exc.message)
        else:
            messages.success(request, f"{done.capitalize()} “{bp.title or bp.key}”.")
        return _redirect_detail(model_admin, request, object_id)
    context = _context(
        model_admin,
        request,
        title=f"{action.capitalize()} breakpoint",
        subtitle=None,
        bp=bp,
        original=bp,
        form=form,
        action_url=_url(model_admin, request, action, bp.pk),
        detail_url=detail_url(model_admin, request, bp.pk),
    )
    return TemplateResponse(request, f"admin/breakpoints/breakpoint/{action}_confirm.html", context)


def expire_view(model_admin: "BreakpointAdmin", request: HttpRequest, object_id: str):
    """Admins only: confirm, then expire a waiting breakpoint (breakpoint_expire)."""
    return _end_view(
        model_admin,
        request,
        object_id,
        action="expire",
        service=services.breakpoint_expire,
        done="expired",
    )


def cancel_view(model_admin: "BreakpointAdmin", request: HttpRequest, object_id: str):
    """Admins only: confirm, then cancel a waiting breakpoint (breakpoint_cancel)."""
    return _end_view(
        model_admin,
        request,
        object_id,
        action="cancel",
        service=services.breakpoint_cancel,
        done="cancelled",
    )


def always_approve_view(model_admin: "BreakpointAdmin", request: HttpRequest, object_id: str):
    """Approve and add an auto-approve rule for the key, after a confirmation step showing both."""
    bp = _releasable(model_admin, request, object_id)
    if isinstance(bp, HttpResponse):
        return bp
    if not autoapproval.offers_always_approve(bp.payload):
        messages.error(request, "The agent asked not to offer “Always approve” here.")
        return _redirect_detail(model_admin, request, object_id)
    form = CommentForm(request.POST)
    if not form.is_valid():
        return review_view(model_admin, request, object_id)
    comment = form.cleaned_data["comment"]
    actor = _actor(request)
    if request.POST.get("confirm") != "yes":
        try:
            outcome = services.release_preview(
                bp=bp, actor=actor, approved=True, comment=comment, option=None
            )
        except DomainError as exc:
            messages.error(request, exc.message)
            return _redirect_detail(model_admin, request, object_id)
        preview = outcome.result if outcome.result is not None else outcome.votes[-1]
        context = _context(
            model_admin,
            request,
            title="Confirm always approve",
            subtitle=None,
            bp=bp,
            original=bp,
            form=form,
            decision_label="Always approve",
            is_vote=bool(bp.experts) and bp.strategy in services.VOTING_STRATEGIES,
            approved=True,
            rule_key=bp.key,
            result_html=rendering.render_json(preview),
            confirm_url=_url(model_admin, request, "always_approve", bp.pk),
            confirm_label="Confirm: approve and add the rule",
            detail_url=detail_url(model_admin, request, bp.pk),
        )
        return TemplateResponse(
            request, "admin/breakpoints/breakpoint/release_confirm.html", context
        )
    try:
        _, bp, rule = services.breakpoint_always_approve(
            breakpoint_id=bp.pk, actor=actor, comment=comment
        )
    except InvalidState as exc:
        messages.error(request, _status_message(exc.current_status))
        return _redirect_detail(model_admin, request, object_id)
    except DomainError as exc:
        messages.error(request, exc.message)
        return _redirect_detail(model_admin, request, object_id)
    rule_note = f"Rule {rule.pk} now auto-approves key “{rule.pattern}”."
    if bp.is_waiting:
        messages.success(
            request, f"Your approval was recorded; other seats still have to vote. {rule_note}"
        )
        return _redirect_detail(model_admin, request, object_id)
    messages.success(
        request,
        f"Released “{bp.title or bp.key}”: approved. {rule_note} "
        "The agent receives the result on its next poll.",
    )
    return HttpResponseRedirect(_url(model_admin, request, "changelist"))
