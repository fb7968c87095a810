"""The email channel: one mail per delivery, through Django's mail backend (SMTP in
production, the console backend under `make run`).

created, reminder and escalated announce the breakpoint: title, question, tags,
agent/run, time left, excerpts of the context files, the console link and, for a
reviewer (a target naming a user), one-time Approve/Reject links (email_links).
released, expired and cancelled send the outcome. The mail is built from the delivery's
body (the breakpoint as the event left it). Both parts come from templates under
templates/decide/mail/; the HTML part autoescapes everything the agent sent, context file
excerpts included (rendered by web.rendering.markup, the console's own sanitizer; HTML files
stay escaped text, as a mail client has no sandbox for them).
"""

import hashlib
import smtplib
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import EmailMultiAlternatives, get_connection
from django.core.mail.message import make_msgid
from django.template.loader import render_to_string
from django.utils import timezone

from audit.models import EventType
from breakpoints.answers.outcome import Outcome, outcome_of
from breakpoints.models import Breakpoint
from breakpoints.representation.contract import console_url
from breakpoints.selectors import decided_via
from breakpoints.services import release_refusal
from channels.email.links import decision_urls
from core import fileformats
from core.actors import Actor
from core.naming import display_name
from notifications.base import Sent
from notifications.models import Delivery
from web.rendering.budget import RenderBudget
from web.rendering.markup import compact_duration, render_context_file

ANNOUNCING: dict[str, str] = {
    EventType.CREATED: "Review needed",
    EventType.REMINDER: "Reminder",
    EventType.ESCALATED: "Escalated",
}
OUTCOMES = frozenset({EventType.RELEASED, EventType.EXPIRED, EventType.CANCELLED})
EXCERPT_CHARS = 2_000  # of each context file; the console shows the rest
MAX_EXCERPT_FILES = 5
SUBJECT_CHARS = 150
SEND_TIMEOUT_SECONDS = 10  # when EMAIL_TIMEOUT is not set: a worker never hangs on SMTP


def send(delivery: Delivery) -> Sent:
    """One attempt: compose the mail for the event and hand it to the mail backend."""
    address = delivery.target.get("email")
    if not isinstance(address, str) or not address.strip():
        return Sent(error="The target has no email address.", retryable=False)
    message = message_for(delivery, address)
    if message is None:
        return Sent(
            error=f"The email channel mails no {delivery.event_type} event.", retryable=False
        )
    try:
        connection = get_connection(
            fail_silently=False, timeout=settings.EMAIL_TIMEOUT or SEND_TIMEOUT_SECONDS
        )
        sent = connection.send_messages([message])
    except (OSError, ValueError) as exc:  # SMTP errors are OSErrors; a bad address a ValueError
        return failure(exc)
    if not sent:
        return Sent(error="The mail backend sent nothing.")
    return Sent(reply={"messageId": message.extra_headers.get("Message-ID", "")})


def failure(exc: OSError | ValueError) -> Sent:
    """An SMTP error as a Sent: temporary (connection, 4xx) is retried, permanent (5xx,
    refused recipient, a malformed address) fails at once."""
    error = f"{type(exc).__name__}: {exc}"[:2000]
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        codes = [code for code, _ in exc.recipients.values()]
        temporary = bool(codes) and all(400 <= code < 500 for code in codes)
        return Sent(status_code=codes[0] if codes else None, error=error, retryable=temporary)
    if isinstance(exc, smtplib.SMTPConnectError | smtplib.SMTPAuthenticationError):
        # The server refused us, not the recipient: our side to fix, then it goes out.
        return Sent(status_code=exc.smtp_code, error=error)
    if isinstance(exc, smtplib.SMTPResponseException):
        return Sent(status_code=exc.smtp_code, error=error, retryable=exc.smtp_code < 500)
    if isinstance(exc, ValueError):  # a malformed address or header: never deliverable
        return Sent(error=error, retryable=False)
    return Sent(error=error)  # refused connection, timeout, TLS, disconnection: retried


def message_for(delivery: Delivery, address: str) -> EmailMultiAlternatives | None:
    """The mail of one delivery (None for an event this channel does not mail)."""
    data = delivery.body.get("data") if isinstance(delivery.body, dict) else None
    data = data if isinstance(data, dict) else {}
    event = delivery.event_type
    if event in ANNOUNCING:
        context = announce_context(data, event, delivery.target)
        template, subject = "announce", f"{context['heading']}: {context['title']}"
    elif event in OUTCOMES:
        context = outcome_context(data)
        template, subject = "outcome", f"{context['verdict']}: {context['title']}"
    else:
        return None
    message = EmailMultiAlternatives(
        subject=_one_line(subject, SUBJECT_CHARS),
        body=render_to_string(f"decide/mail/{template}.txt", context),
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=[address],
        headers=thread_headers(str(data.get("breakpointId") or ""), address, event),
    )
    html = render_to_string(f"decide/mail/{template}.html", context)
    message.attach_alternative(html, "text/html")
    return message


def thread_headers(breakpoint_id: str, address: str, event: str) -> dict[str, str]:
    """Headers that thread every mail about one breakpoint to one address under its
    announcement (whose Message-ID is derived, not stored), and mark them automatic."""
    domain = urlsplit(settings.BPM_PUBLIC_URL).hostname or "breakpoints.invalid"
    recipient = hashlib.sha256(address.lower().encode()).hexdigest()[:16]
    thread = f"<{breakpoint_id}.{recipient}@{domain}>"
    headers = {"Auto-Submitted": "auto-generated", "X-Breakpoint-Id": breakpoint_id}
    if event == EventType.CREATED:
        return {**headers, "Message-ID": thread}
    return {
        **headers,
        "Message-ID": make_msgid(domain=domain),
        "In-Reply-To": thread,
        "References": thread,
    }


def _one_line(text: str, limit: int) -> str:
    """A header-safe line: no line breaks (an agent's title may carry some), cut short."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _title(data: dict[str, Any]) -> str:
    return display_name(data)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def announce_context(data: dict[str, Any], event: str, target: dict[str, Any]) -> dict[str, Any]:
    """What the created/reminder/escalated templates show."""
    breakpoint_id = str(data.get("breakpointId") or "")
    links, notice = decision_links(breakpoint_id, target.get("user"))
    files = _list(_dict(_dict(data.get("payload")).get("context")).get("files"))
    budget = RenderBudget()  # one message, one rendering budget
    shown = [excerpt(item, budget) for item in files[:MAX_EXCERPT_FILES]]
    budget.save()
    return {
        "heading": ANNOUNCING.get(event, event),
        "title": _title(data),
        "question": str(data.get("question") or ""),
        "tags": [str(tag) for tag in _list(data.get("tags"))],
        "agent_id": str(data.get("agentId") or ""),
        "run_id": str(data.get("runId") or ""),
        "experts": [str(_dict(seat).get("name")) for seat in _list(data.get("experts"))],
        "time_left": time_left(data.get("expiresAt")),
        "files": shown,
        "more_files": len(files) - len(shown),
        "console_url": console_url(breakpoint_id),
        "links": links,
        "notice": notice,
        "links_valid_for": compact_duration(
            timedelta(seconds=settings.BPM_EMAIL_LINK_MAX_AGE_SECONDS)
        ),
    }


def decision_links(breakpoint_id: str, user_id: Any) -> tuple[dict[str, str] | None, str]:
    """The Approve and Reject links for the recipient `user_id` (a seat holder), or none
    and why: only a person the service lets decide it now gets them (release_refusal, the
    question the decision page asks too), so the requester under four eyes is told that
    another reviewer decides instead of being handed links that could only be refused."""
    if not isinstance(user_id, int):
        return None, ""
    bp = Breakpoint.objects.filter(pk=breakpoint_id).first()
    user = get_user_model().objects.filter(pk=user_id, is_active=True).first()
    if bp is None or user is None:
        return None, ""
    refusal = release_refusal(bp, Actor.for_user(user))
    if refusal is not None:
        return None, refusal
    return decision_urls(breakpoint_id, user_id), ""


def time_left(expires_at: Any) -> str:
    """'3h 20m left' at sending time ('expired'; 'no expiry' without expiresAt)."""
    if not isinstance(expires_at, str) or not expires_at:
        return "no expiry"
    try:
        left = datetime.fromisoformat(expires_at) - timezone.now()
    except (TypeError, ValueError):
        return "no expiry"
    return f"{compact_duration(left)} left" if left.total_seconds() > 0 else "expired"


def excerpt(item: Any, budget: RenderBudget | None = None) -> dict[str, Any]:
    """One context file cut to EXCERPT_CHARS: text for the plain part, and for the HTML
    part the console's sanitized rendering (web.rendering.markup) of markdown, code and text.
    HTML files stay escaped text: a mail client has no sandbox to show them in."""
    item = _dict(item)
    content = item.get("content")
    path = item.get("path")
    file_format = fileformats.file_format(item)[0]
    text = content[:EXCERPT_CHARS] if isinstance(content, str) else ""
    rendered = (
        render_context_file({**item, "content": text}, budget) if isinstance(content, str) else None
    )
    return {
        "path": path if isinstance(path, str) and path else "(no path)",
        "format": file_format,
        "has_content": isinstance(content, str),
        "text": text,
        "html": rendered.html if rendered is not None and not rendered.is_html else None,
        "truncated": isinstance(content, str) and len(content) > EXCERPT_CHARS,
    }


def outcome_context(data: dict[str, Any]) -> dict[str, Any]:
    """What the released/expired/cancelled templates show."""
    breakpoint_id = str(data.get("breakpointId") or "")
    outcome = outcome_of(data.get("status"), data.get("result"))
    via = decided_via(breakpoint_id) if outcome.released else ""
    return {
        "title": _title(data),
        "verdict": outcome.verdict,
        "summary": outcome_text(outcome, via),
        "console_url": console_url(breakpoint_id),
    }


def outcome_text(outcome: Outcome, via: str = "") -> str:
    """One line for people: "Approved by alice via slack: looks good" / "Expired: …"."""
    feedback = " ".join(outcome.feedback.split())
    if not outcome.released:
        return feedback or outcome.verdict
    head = outcome.verdict
    head += f" ({outcome.option})" if outcome.option else ""
    head += f" by {outcome.by}" if outcome.by else ""
    head += f" via {via}" if via else ""
    return f"{head}: {feedback}" if feedback else head
