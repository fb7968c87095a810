"""The decision page behind an email's one-time link (/decide/<token>).

GET and HEAD never change anything (mail scanners fetch every link): they show the
breakpoint and a form, or say why the link no longer works, or why this person may not
decide it (services.release_refusal, the question every channel asks). The form's POST
reads the token again, then records the link's use and the decision in one transaction,
through feedback_add with via=email: the same rules, seats and conditional transition as
the console. Refused POSTs with a known breakpoint are audited (REFUSED): by feedback_add
for a refused decision, here for the link's own refusals (used, expired, inactive); a
token that is not ours is only logged, on the `breakpoints.audit` logger.
"""

import json
import logging
from typing import Any

from django import forms
from django.db import IntegrityError, transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from audit.services import refusal_record
from breakpoints.answers.answer_form import AnswerForm, answer_form
from breakpoints.answers.outcome import outcome_of
from breakpoints.models import Breakpoint
from breakpoints.representation.contract import console_url
from breakpoints.selectors import decided_via
from breakpoints.services import feedback_add, release_refusal
from channels.email import EMAIL
from channels.email.links import (
    APPROVE,
    REJECT,
    Link,
    LinkExpired,
    LinkInvalid,
    link_read,
    link_use,
    link_user,
)
from channels.email.messages import outcome_text, time_left
from channels.models import DecisionLinkUse
from core import limits
from core.actors import Actor
from core.exceptions import Forbidden, InvalidInput, InvalidState
from web.rendering import html as rendering

audit_log = logging.getLogger("breakpoints.audit")


class LinkUsed(Exception):
    """The link's nonce was spent, possibly by a concurrent request a moment ago."""


class DecisionForm(forms.Form):
    """The page's form: a comment, and the button pressed (Approve or Reject)."""

    comment = forms.CharField(
        required=False,
        strip=False,
        max_length=limits.MAX_COMMENT_LENGTH,
        widget=forms.Textarea(attrs={"rows": 5}),
    )
    decision = forms.ChoiceField(choices=[(APPROVE, "Approve"), (REJECT, "Reject")])

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        comment = (data.get("comment") or "").replace("\r\n", "\n").replace("\r", "\n")
        data["comment"] = comment
        return data


# csrf_exempt: the signed one-time token in the URL is the credential. Recipients open
# the link from a mail client with no session (so no CSRF cookie), and a cross-site
# request could only forge a POST by knowing the token, which is the secret itself.
@csrf_exempt
@never_cache
@require_http_methods(["GET", "HEAD", "POST"])
def view(request: HttpRequest, token: str) -> HttpResponse:
    """Show the breakpoint and the form (GET, HEAD), or decide (POST), or say why not."""
    response = _answer(request, token)
    # Django logs every 4xx with its path, which holds the token: a link refused for now
    # (403, a form error) still works, so it must not land in the logs. Refusals are
    # audited (or logged without the token) instead.
    response._has_been_logged = True  # type: ignore[attr-defined]
    return response


def _answer(request: HttpRequest, token: str) -> HttpResponse:
    try:
        link = link_read(token)
    except LinkInvalid as exc:
        _log_invalid(request, token, str(exc))
        return _message(request, "invalid", status=400)
    except LinkExpired as exc:
        _refuse_post(request, exc.link, "expired", "The link has expired.")
        return _message(request, "expired", status=410)
    bp = Breakpoint.objects.filter(pk=link.breakpoint_id).first()
    if bp is None:
        return _message(request, "gone", status=404)
    use = link_use(link)
    if use is not None:
        _refuse_post(request, link, "used", "The link was already used.")
        return _used(request, use)
    user = link_user(link)
    if user is None:
        _refuse_post(request, link, "inactive", "The link's user is no longer active.")
        return _message(request, "inactive", status=403)
    if request.method == "POST":
        return _decide(request, link, bp, user)
    if not bp.is_waiting or bp.is_overdue():
        return _decided(request, bp)
    refusal = release_refusal(bp, Actor.for_user(user))  # told instead of the form
    if refusal is not None:
        return _message(request, "forbidden", status=403, detail=refusal)
    form = DecisionForm(initial={"decision": link.verdict})
    return _form_page(request, link, bp, user, form, answer_form(bp.payload))


def _decide(request: HttpRequest, link: Link, bp: Breakpoint, user: Any) -> HttpResponse:
    """Decide with the page's comment and, for an approval of a form, its values (the
    service validates them: its problems land on the fields)."""
    form, answer = DecisionForm(request.POST), answer_form(bp.payload, request.POST)
    approving = form.data.get("decision") == APPROVE
    if not form.is_valid() or (answer is not None and approving and not answer.is_valid()):
        return _form_page(request, link, bp, user, form, answer, status=400)
    values = answer.values() if answer is not None and approving else None
    try:
        decided = link_decide(
            link,
            user=user,
            approved=approving,
            comment=form.cleaned_data["comment"],
            values=values,
        )
    except LinkUsed:
        _refuse(link, user, "used", "The link was already used.")
        return _used(request, link_use(link))
    except Forbidden as exc:  # feedback_add recorded the refusal, as it does on every channel
        return _message(request, "forbidden", status=403, detail=exc.message)
    except InvalidState as exc:
        current = Breakpoint.objects.filter(pk=bp.pk).first()
        if current is None:
            return _message(request, "gone", status=404)
        if current.is_waiting:  # e.g. this reviewer's seat has voted already
            return _message(request, "refused", status=409, detail=exc.message)
        return _decided(request, current)
    except InvalidInput as exc:
        if answer is not None:
            answer.show_problems(exc.details)
        form.add_error(None, exc.message)
        return _form_page(request, link, bp, user, form, answer, status=400)
    return _message(request, "done", detail=_summary(decided), bp=decided)


def link_decide(
    link: Link, *, user: Any, approved: bool, comment: str, values: Any = None
) -> Breakpoint:
    """Decide through the link, once: its use and the decision commit together.

    Raises LinkUsed when the nonce was spent (also by a concurrent request: the unique
    INSERT waits for it, then fails), else what feedback_add raises (and records), with
    nothing else written, so the link stays usable after a refused decision.
    """

    def use() -> None:
        try:
            with transaction.atomic():
                DecisionLinkUse.objects.create(
                    nonce=link.nonce,
                    breakpoint_id=link.breakpoint_id,
                    user=user,
                    outcome="approved" if approved else "rejected",
                )
        except IntegrityError:
            raise LinkUsed() from None

    _, bp = feedback_add(
        breakpoint_id=link.breakpoint_id,
        actor=Actor.for_user(user).known_as(userId=link.user_id),
        comment=comment,
        release=True,
        approved=approved,
        values=values,
        via=EMAIL,
        within=use,
    )
    return bp


def _summary(bp: Breakpoint) -> str:
    if bp.is_waiting:
        return "Your vote is recorded; the breakpoint waits for the other experts."
    return outcome_text(outcome_of(bp.status, bp.result), decided_via(bp.pk))


def _refuse_post(request: HttpRequest, link: Link, reason: str, message: str) -> None:
    """Audit a refused decision (POST) of an authentic link; GET and HEAD record nothing."""
    if request.method == "POST":
        _refuse(link, link_user(link), reason, message)


def _refuse(link: Link, user: Any, reason: str, message: str) -> None:
    """The link's own refusal (used, expired, inactive) as a REFUSED event on the
    breakpoint, when it still exists (a decision's refusal is feedback_add's to record)."""
    if not Breakpoint.objects.filter(pk=link.breakpoint_id).exists():
        return
    who = user.get_username() if user is not None else f"user-{link.user_id}"
    refusal_record(
        breakpoint_id=link.breakpoint_id,
        via=EMAIL,
        who=who,
        reason=reason,
        message=message,
        userId=link.user_id,
    )


def _log_invalid(request: HttpRequest, token: str, problem: str) -> None:
    """Nothing in a token we did not sign can be trusted: one WARNING line, no event."""
    record = {
        "via": EMAIL,
        "reason": "bad_signature",
        "problem": problem,
        "method": request.method,
        "tokenLength": len(token),
        "client": request.META.get("REMOTE_ADDR", ""),
    }
    audit_log.warning(
        "Email decision link refused: %s",
        json.dumps(record, sort_keys=True),
        extra={"via": EMAIL, "reason": "bad_signature", "client": record["client"]},
    )


MESSAGES = {
    "invalid": (
        "This link is not valid",
        "It may have been cut or altered. Open the breakpoint in the console instead.",
    ),
    "expired": (
        "This link has expired",
        "Decision links work for a limited time. Open the breakpoint in the console instead.",
    ),
    "gone": ("This breakpoint no longer exists", "It was deleted."),
    "inactive": (
        "This link can no longer be used",
        "The account it was sent to is no longer active.",
    ),
    "forbidden": ("You may not decide this breakpoint", ""),
    "refused": ("Your decision was not recorded", ""),
    "used": ("This link was already used", ""),
    "decided": ("Already decided", ""),
    "done": ("Thank you: your decision is recorded", ""),
}


def _message(
    request: HttpRequest,
    kind: str,
    *,
    status: int = 200,
    detail: str = "",
    bp: Breakpoint | None = None,
) -> HttpResponse:
    title, text = MESSAGES[kind]
    context = {
        "kind": kind,
        "heading": title,
        "text": text,
        "detail": detail,
        "bp": bp,
        "console_url": console_url(bp.pk) if bp is not None else "",
    }
    return render(request, "decide/message.html", context, status=status)


def _used(request: HttpRequest, use: DecisionLinkUse | None) -> HttpResponse:
    detail = ""
    if use is not None:
        who = use.user.get_username() if use.user is not None else "a reviewer"
        detail = f"It {use.outcome} the breakpoint ({who}, {use.used_at:%Y-%m-%d %H:%M} UTC)."
    return _message(request, "used", status=409, detail=detail)


def _decided(request: HttpRequest, bp: Breakpoint) -> HttpResponse:
    """The breakpoint no longer waits: what became of it (an overdue one has expired)."""
    if bp.is_waiting:
        detail = "Expired: nobody decided before its time ran out."
    else:
        detail = outcome_text(outcome_of(bp.status, bp.result), decided_via(bp.pk))
    return _message(request, "decided", detail=f"Already decided: {detail}", bp=bp)


def _form_page(
    request: HttpRequest,
    link: Link,
    bp: Breakpoint,
    user: Any,
    form: DecisionForm,
    answer: AnswerForm | None = None,
    status: int = 200,
) -> HttpResponse:
    context = {
        "bp": bp,
        "title": bp.display_name,
        "question": bp.question or "",
        "tags": [str(tag) for tag in bp.tags or []],
        "time_left": time_left(bp.expires_at.isoformat() if bp.expires_at else None),
        "files": rendering.context_files(bp.payload),
        "form": form,
        "answer": answer,
        "verdict": link.verdict,
        "reviewer": user.get_username(),
        "console_url": console_url(bp.pk),
    }
    return render(request, "decide/form.html", context, status=status)
