"""The reviewer console's per-breakpoint screens: review, comment, release (with the grant
an approval may carry: "Approve, and allow this") and "Always approve" (each with a
confirmation step), and for admins expire and cancel.

BreakpointAdmin.get_urls() mounts these behind admin_site.admin_view(); each takes the
ModelAdmin first. Every write goes through breakpoints.services with the reviewer as
Actor, and every DomainError becomes a message, never an error page. What the pages
show of a breakpoint comes from console.presenters.
"""

from dataclasses import dataclass
from datetime import timedelta
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
from django.utils.formats import date_format

from accounts import experts as routing
from breakpoints import selectors, services
from breakpoints.answers.answer_form import AnswerForm, answer_form
from breakpoints.answers.voting import VOTING_STRATEGIES
from breakpoints.models import Breakpoint
from breakpoints.payload.validation import options_of
from console import presenters
from console.forms import CommentForm, DecisionForm, GrantForm, ReasonForm
from core.actors import Actor
from core.choices import Status, Via
from core.exceptions import DomainError, InvalidInput, InvalidState, NotFound
from grants import services as grants
from grants.models import Grant, GrantScope
from policies import autoapproval

if TYPE_CHECKING:
    from console.admin import BreakpointAdmin

TEMPLATES = "admin/breakpoints/breakpoint"
# The review page's links to this breakpoint's other screens: context key -> URL name.
ACTION_URLS = {
    "comment_url": "comment",
    "release_url": "release",
    "expire_url": "expire",
    "cancel_url": "cancel",
    "always_url": "always_approve",
    "delete_url": "delete",
}
# What a refused write says of a breakpoint no longer waiting; {} is its status.
ALREADY_SENT = (
    "This breakpoint is already {}: nothing was sent to the agent. "
    "Another reviewer, the agent or the expiry timer got there first."
)
ALREADY_NO_COMMENTS = "This breakpoint is already {}: it takes no more comments."
ALREADY = "This breakpoint is already {}."


# --- the steps every screen shares ----------------------------------------------


@dataclass(frozen=True)
class _Screen:
    """One request to a per-breakpoint screen: its ModelAdmin, the request and the
    (admin-quoted) id from the URL, which every shared step below needs."""

    model_admin: "BreakpointAdmin"
    request: HttpRequest
    object_id: str

    @property
    def actor(self) -> Actor:
        return Actor.for_user(self.request.user)

    def url(self, name: str, *args: Any) -> str:
        """An admin URL for this model that keeps the reviewer's queue filters."""
        opts = self.model_admin.opts
        url = reverse(
            f"admin:{opts.app_label}_{opts.model_name}_{name}",
            args=[quote(arg) for arg in args],
            current_app=self.model_admin.admin_site.name,
        )
        context: dict[str, Options[Any] | str] = {
            "opts": opts,
            "preserved_filters": self.model_admin.get_preserved_filters(self.request),
        }
        return add_preserved_filters(context, url)

    def back(self, error: str | None = None) -> HttpResponseRedirect:
        """Back to the review screen, with why nothing was done if `error`."""
        if error is not None:
            messages.error(self.request, error)
        return HttpResponseRedirect(self.url("change", unquote(self.object_id)))

    def not_found(self) -> HttpResponse:
        # A private ModelAdmin helper (Django's own "does not exist" message); not in the stubs.
        return self.model_admin._get_obj_does_not_exist_redirect(  # type: ignore[attr-defined]
            self.request, self.model_admin.opts, self.object_id
        )

    def load(self) -> Breakpoint | HttpResponse:
        """The breakpoint (expired on the spot if overdue: services.breakpoint_read), or
        Django's "does not exist" redirect."""
        if not self.model_admin.has_view_permission(self.request):
            raise PermissionDenied
        try:
            return services.breakpoint_read(self.request.user, unquote(self.object_id))
        except NotFound:
            return self.not_found()

    def render(self, template: str, **extra: Any) -> TemplateResponse:
        """A console page: the admin's chrome and the queue's filters, then `extra`."""
        context = {
            **self.model_admin.admin_site.each_context(self.request),
            "opts": self.model_admin.opts,
            "app_label": self.model_admin.opts.app_label,
            "preserved_filters": self.model_admin.get_preserved_filters(self.request),
            "changelist_url": self.url("changelist"),
            **extra,
        }
        return TemplateResponse(self.request, f"{TEMPLATES}/{template}", context)

    def confirm(self, template: str, bp: Breakpoint, **extra: Any) -> HttpResponse:
        """A confirmation step (release, always approve, expire, cancel) before the write."""
        detail_url = self.url("change", bp.pk)
        return self.render(
            template,
            subtitle=None,
            bp=bp,
            original=bp,
            detail_url=detail_url,
            **presenters.headline(bp),
            **extra,
        )

    def failed(
        self,
        exc: DomainError,
        *,
        form: DecisionForm | None = None,
        already: str | None = ALREADY_SENT,
        answer: AnswerForm | None = None,
    ) -> HttpResponse:
        """The answer to a write the service refused. With a `form`, refused input shows
        the review page again, the reviewer's choices kept, with why (an approve/reject
        that contradicts the option's verdict). A status the breakpoint already left is
        told by `already` (a format, see ALREADY_SENT); the rest (a seat that voted
        already, InvalidState when `already` is None) by the service's message."""
        if form is not None and isinstance(exc, InvalidInput):
            if answer is not None and not set(exc.details) & {"option", "approved"}:
                answer.show_problems(exc.details)  # the form's answer, on its fields
            form.add_error(None, exc.message)
            return review_view(
                self.model_admin, self.request, self.object_id, form=form, answer=answer
            )
        if (
            already is not None
            and isinstance(exc, InvalidState)
            and exc.current_status != Status.WAITING
        ):
            return self.back(already.format(exc.current_status))
        return self.back(exc.message)

    def released(self, bp: Breakpoint, *, recorded: str, released: str) -> HttpResponse:
        """After a release: a vote that leaves the breakpoint waiting (collect-all, quorum)
        returns to it saying `recorded`; a decision returns to the queue saying what it was
        (`released`: "rejected.", "approved with option “x”.", …)."""
        if bp.is_waiting:
            messages.success(self.request, recorded)
            return self.back()
        messages.success(
            self.request,
            f"“{bp.display_name}” was {released} The agent receives the result on its next poll.",
        )
        return HttpResponseRedirect(self.url("changelist"))


# --- review and comment --------------------------------------------------------


def _decision_form(request: HttpRequest, payload: dict[str, Any]) -> DecisionForm:
    """An empty decision form, or, when "Back" on the confirmation page posted the
    decision here, that decision to edit again."""
    initial = {key: request.POST.get(key, "") for key in ("comment", "decision", "option")}
    return DecisionForm(
        options=options_of(payload),
        initial=initial if request.method == "POST" else None,
    )


def review_view(
    model_admin: "BreakpointAdmin",
    request: HttpRequest,
    object_id: str,
    form: DecisionForm | None = None,
    answer: AnswerForm | None = None,
) -> HttpResponse:
    """The detail page: question first, context files, result, feedback, timeline, actions;
    with a form (payload.form/proposal), its fields prefilled with the proposal."""
    screen = _Screen(model_admin, request, object_id)
    bp = screen.load()
    if isinstance(bp, HttpResponse):
        return bp
    payload = presenters.payload_of(bp)
    can_release = bp.is_waiting and model_admin.has_release_permission(request)
    if form is None and can_release:
        form = _decision_form(request, payload)
    if answer is None and can_release:  # "Back to edit" posts the answer here
        answer = answer_form(payload, request.POST if request.method == "POST" else None)
    resolved = routing.resolve(bp.experts)  # once, for the seats panel and the refusal
    release_note = services.release_refusal(bp, screen.actor, resolved) if can_release else None
    can_decide = can_release and release_note is None
    offer = presenters.grant_offer(bp) if can_decide else {}
    events = selectors.breakpoint_events(request.user, bp.pk)
    now = timezone.now()
    return screen.render(
        "review.html",
        **presenters.review_page(bp, events, resolved, now),
        form=form if can_release else None,
        answer=answer if can_release else None,
        grant_form=_grant_form(request, offer),
        grant_refusal=offer.get("grant_refusal"),
        grant_run_refusal=offer.get("grant_run_refusal"),
        can_release=can_release,
        can_decide=can_decide,
        can_always_approve=can_decide and autoapproval.always_approve_refusal(bp) is None,
        release_note=release_note,
        can_expire=bp.is_waiting and model_admin.has_expire_permission(request),
        can_cancel=bp.is_waiting and model_admin.has_cancel_permission(request),
        can_delete=model_admin.has_delete_permission(request, bp),
        time_left=model_admin.time_left_text(bp, now),
        queue_url=reverse("admin:breakpoints_breakpoint_changelist"),
        **{key: screen.url(name, bp.pk) for key, name in ACTION_URLS.items()},
    )


def _grant_form(request: HttpRequest, offer: dict[str, Any]) -> GrantForm | None:
    """The "Approve, and allow this" choices, when the grants service offers a grant: none
    chosen, or the reviewer's choice when the page comes back ("Back to edit", a refusal)."""
    if not offer or offer["grant_refusal"] is not None:
        return None
    data = request.POST if request.method == "POST" else None
    return GrantForm(data, run=offer["grant_run"])


def comment_view(model_admin: "BreakpointAdmin", request: HttpRequest, object_id: str):
    """Add a comment without deciding (feedback_add with release=False)."""
    screen = _Screen(model_admin, request, object_id)
    if request.method != "POST":
        return screen.back()
    if not model_admin.has_release_permission(request):
        raise PermissionDenied
    comment = (request.POST.get("comment") or "").strip()
    try:  # an empty comment: the service refuses it, as it does through the API
        services.feedback_add(
            breakpoint_id=unquote(object_id), actor=screen.actor, comment=comment, via=Via.CONSOLE
        )
    except NotFound:
        return screen.not_found()
    except DomainError as exc:
        return screen.failed(exc, already=ALREADY_NO_COMMENTS)
    messages.success(request, "Comment added. The agent sees it with the breakpoint.")
    return screen.back()


# --- release and always approve ------------------------------------------------


def _releasable(screen: _Screen) -> Breakpoint | HttpResponse:
    """The breakpoint this reviewer may release now, or the response that says why not.
    The service asks "may this person release this?" and records a refusal, as it does
    whichever channel asked; someone who is not a reviewer is answered 403."""
    if screen.request.method != "POST":
        return screen.back()
    reviewer = screen.model_admin.has_release_permission(screen.request)
    try:
        return services.release_check(
            breakpoint_id=unquote(screen.object_id), actor=screen.actor, via=Via.CONSOLE
        )
    except NotFound:
        if not reviewer:
            raise PermissionDenied from None
        return screen.not_found()
    except DomainError as exc:
        if not reviewer:
            raise PermissionDenied from None
        return screen.failed(exc)


def _answer(
    screen: _Screen, bp: Breakpoint, form: DecisionForm
) -> tuple[AnswerForm | None, dict[str, Any] | None] | HttpResponse:
    """The reviewer's answer to the breakpoint's form (an approval's only), or the review
    page again with the fields' errors."""
    answer = answer_form(bp.payload, screen.request.POST)
    chosen = form.cleaned_data.get("option")
    verdict = form.approved if form.approved is not None else getattr(chosen, "approved", None)
    if answer is None or verdict is False:  # a rejection carries no values
        return answer, None
    if not answer.is_valid():
        return review_view(
            screen.model_admin, screen.request, screen.object_id, form=form, answer=answer
        )
    return answer, answer.values()


def _release_confirm(
    screen: _Screen,
    bp: Breakpoint,
    form: DecisionForm,
    answer: AnswerForm | None,
    values: Any,
    grant: GrantForm,
) -> HttpResponse:
    """Step one of a release: what the agent will receive, or the vote to be recorded; with
    a form, what the reviewer changed against the proposal; with a grant, what it covers
    (refused here, before anything is written, as the service would refuse it)."""
    try:
        outcome = services.release_preview(
            bp=bp,
            actor=screen.actor,
            approved=form.approved,
            comment=form.cleaned_data["comment"],
            option=form.option_label,
            values=values,
        )
    except DomainError as exc:
        return screen.failed(exc, form=form, already=None, answer=answer)
    answered = outcome.votes[-1].get("values")
    approved = bool(outcome.votes[-1]["approved"])  # the verdict, as the service set it
    try:
        terms = _grant_terms(bp, grant, approved=approved)
    except DomainError as exc:
        return screen.failed(exc, form=form, already=None, answer=answer)
    send_label = form.send_label(approved) + (" and give the grant" if terms else "")
    return screen.confirm(
        "release_confirm.html",
        bp,
        form=form,
        **presenters.preview_page(bp, outcome),
        title="Confirm release",
        decision_label=form.decision_label(approved),
        approved=approved,
        grant_form=grant,
        grant_terms=terms,
        # A vote that does not decide yet is recorded; anything else is sent.
        confirm_label="Record vote" if outcome.result is None else send_label,
        release_url=screen.url("release", bp.pk),
        answer=answer,
        changes=(
            presenters.change_rows(bp, answer, answered)
            if answer is not None and answered is not None
            else []
        ),
    )


def _grant_terms(bp: Breakpoint, grant: GrantForm, *, approved: bool) -> dict[str, Any] | None:
    """What the chosen grant would cover, or None without one; raises the grants service's
    refusal (grant_spec, grant_refusal: the checks the release itself makes)."""
    raw = grant.spec()
    if raw is None:
        return None
    spec = grants.grant_spec(raw)
    refusal = grants.grant_refusal(
        bp, spec, approved=approved, voting=bp.strategy in VOTING_STRATEGIES
    )
    if refusal is not None:
        raise refusal
    seconds = spec.expires_in_seconds
    return presenters.grant_terms(
        agent_id=bp.agent_id,
        key=bp.key,
        run_id=bp.run_id if spec.scope == GrantScope.RUN else None,
        uses=spec.uses,
        until=timezone.now() + timedelta(seconds=seconds) if seconds else None,
        seconds=seconds,
        values=spec.values,
    )


def release_view(model_admin: "BreakpointAdmin", request: HttpRequest, object_id: str):
    """Release in two steps: show what the agent will receive (and what a grant would
    cover), then send it on confirm: one service call, the grant given in the decision's
    own transaction or neither written."""
    screen = _Screen(model_admin, request, object_id)
    bp = _releasable(screen)
    if isinstance(bp, HttpResponse):
        return bp
    form = DecisionForm(request.POST, options=options_of(bp.payload))
    grant = GrantForm(request.POST)  # every choice: the service says which may not be given
    if not form.is_valid() or not grant.is_valid():
        return review_view(model_admin, request, object_id, form=form)
    answered = _answer(screen, bp, form)
    if isinstance(answered, HttpResponse):
        return answered
    answer, values = answered
    if request.POST.get("confirm") != "yes":
        return _release_confirm(screen, bp, form, answer, values, grant)
    try:
        feedback, bp, given = services.feedback_add_granting(
            via=Via.CONSOLE,
            breakpoint_id=bp.pk,
            actor=screen.actor,
            comment=form.cleaned_data["comment"],
            release=True,
            approved=form.approved,
            option=form.option_label,
            values=values,
            grant=grant.spec(),
        )
    except DomainError as exc:  # a refusal is recorded by the service
        return screen.failed(exc, form=form, answer=answer)
    return screen.released(
        bp,
        recorded="Your decision was recorded; other reviewers still have to respond.",
        released=f"{form.outcome(bool(feedback.approved))}.{_granted_note(given)}",
    )


def _granted_note(grant: Grant | None) -> str:
    """The success message's account of the grant just given."""
    if grant is None:
        return ""
    run = f"run “{grant.run_id}”" if grant.run_id else "any run"
    limits = []
    if grant.uses_granted is not None:
        limits.append(f"the next {grant.uses_granted}")
    if grant.expires_at is not None:
        limits.append(f"until {date_format(grant.expires_at, 'Y-m-d H:i')} UTC")
    return (
        f" Grant {grant.pk} approves the breakpoints of agent “{grant.agent_id}” with the key "
        f"“{grant.key}” in {run}, {' and '.join(limits)}: revoke it under Grants."
    )


def _always_approve_confirm(screen: _Screen, bp: Breakpoint, form: CommentForm) -> HttpResponse:
    """Step one of "Always approve": the approval the agent will receive and the rule."""
    comment = form.cleaned_data["comment"]
    try:
        outcome = services.release_preview(
            bp=bp, actor=screen.actor, approved=True, comment=comment, option=None
        )
    except DomainError as exc:
        return screen.failed(exc, already=None)
    return screen.confirm(
        "release_confirm.html",
        bp,
        form=form,
        **presenters.preview_page(bp, outcome),
        title="Confirm always approve",
        decision_label="Always approve",
        approved=True,
        rule_key=bp.key,
        confirm_url=screen.url("always_approve", bp.pk),
        confirm_label="Confirm: approve and add the rule",
    )


def always_approve_view(model_admin: "BreakpointAdmin", request: HttpRequest, object_id: str):
    """Approve and add an auto-approve rule for the key, after a confirmation step showing both."""
    screen = _Screen(model_admin, request, object_id)
    bp = _releasable(screen)
    if isinstance(bp, HttpResponse):
        return bp
    refusal = autoapproval.always_approve_refusal(bp)
    if refusal is not None:
        return screen.back(f"“Always approve” is not offered here. {refusal}")
    form = CommentForm(request.POST)
    if not form.is_valid():
        return review_view(model_admin, request, object_id)
    if request.POST.get("confirm") != "yes":
        return _always_approve_confirm(screen, bp, form)
    try:
        _, bp, rule = services.breakpoint_always_approve(
            breakpoint_id=bp.pk, actor=screen.actor, comment=form.cleaned_data["comment"]
        )
    except DomainError as exc:
        return screen.failed(exc)
    rule_note = f"Rule {rule.pk} now auto-approves key “{rule.pattern}”."
    return screen.released(
        bp,
        recorded=f"Your approval was recorded; other seats still have to vote. {rule_note}",
        released=f"approved. {rule_note}",
    )


# --- expire and cancel (admins) ------------------------------------------------


def _end_view(screen: _Screen, *, action: str, service: Any, done: str) -> HttpResponse:
    """Admins: confirm with a reason, then end a waiting breakpoint (expire or cancel)."""
    if not getattr(screen.model_admin, f"has_{action}_permission")(screen.request):
        raise PermissionDenied
    bp = screen.load()
    if isinstance(bp, HttpResponse):
        return bp
    if not bp.is_waiting:
        return screen.back(f"This breakpoint is already {bp.status}: it cannot be {done}.")
    form = ReasonForm(screen.request.POST or None)
    if screen.request.method == "POST" and form.is_valid():
        try:
            service(
                breakpoint_id=bp.pk,
                actor=screen.actor,
                reason=form.cleaned_data["reason"],
                via=Via.CONSOLE,
            )
        except DomainError as exc:
            return screen.failed(exc, already=ALREADY)
        messages.success(screen.request, f"{done.capitalize()} “{bp.display_name}”.")
        return screen.back()
    return screen.confirm(
        f"{action}_confirm.html",
        bp,
        form=form,
        title=f"{action.capitalize()} breakpoint",
        action_url=screen.url(action, bp.pk),
    )


def expire_view(model_admin: "BreakpointAdmin", request: HttpRequest, object_id: str):
    """Admins only: confirm, then expire a waiting breakpoint (breakpoint_expire)."""
    screen = _Screen(model_admin, request, object_id)
    return _end_view(screen, action="expire", service=services.breakpoint_expire, done="expired")


def cancel_view(model_admin: "BreakpointAdmin", request: HttpRequest, object_id: str):
    """Admins only: confirm, then cancel a waiting breakpoint (breakpoint_cancel)."""
    screen = _Screen(model_admin, request, object_id)
    return _end_view(screen, action="cancel", service=services.breakpoint_cancel, done="cancelled")
