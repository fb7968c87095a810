"""The email channel against a real SMTP server (aiosmtpd on 127.0.0.1): what is mailed,
to whom, with which links, and how SMTP failures are retried or dead-lettered.

Deliveries are run with `delivery_attempt(id)`, as a worker would; every assertion is about
a message that crossed a socket, parsed back with the standard library, and rows in the
database. The decision page behind the links is tested in test_email_decide.py.
"""

import re

from django.utils import timezone

from audit.models import Event
from breakpoints.services import breakpoint_cancel, feedback_add
from channels.email import messages as email_channel
from core.actors import Actor
from notifications.delivery import MAX_ATTEMPTS
from notifications.models import Delivery
from notifications.services import delivery_attempt
from policies.models import NotificationRoute
from tests.standins.smtp import PUBLIC_URL
from tests.support.email import email_deliveries, link_path, parts, routed, send_all, text_links
from tests.support.records import make_due

# --- helpers ---------------------------------------------------------------------------------


def html_links(html: str) -> dict[str, str]:
    found = re.findall(r'<a href="([^"]+)" data-bpm-link="(\w+)"', html)
    return {kind: href.replace("&amp;", "&") for href, kind in found}


# --- what is mailed --------------------------------------------------------------------------


def test_created_mails_the_routed_expert_with_both_parts_and_one_time_links(
    smtp, make_breakpoint, expert_member
):
    bp, tina = routed(
        make_breakpoint,
        expert_member,
        context={"files": [{"path": "plan.md", "format": "markdown", "content": "# Plan\nstep"}]},
    )
    [delivery] = email_deliveries(bp)
    assert delivery.target == {"email": "tina@example.com", "user": tina.pk}

    send_all(bp)

    [message] = smtp.messages
    assert smtp.inbox.envelopes == [("breakpoints@example.com", ["tina@example.com"])]
    assert message["To"] == "tina@example.com"
    assert message["Subject"] == "Review needed: Deploy v2"
    assert message["Auto-Submitted"] == "auto-generated"
    assert message["X-Breakpoint-Id"] == bp.pk
    text, html = parts(message)
    assert "Deploy <b>v2</b> to prod?" in text  # plain text stays as written
    assert "Deploy &lt;b&gt;v2&lt;/b&gt; to prod?" in html
    assert "Agent: agent-a" in text
    assert "Experts: tech-lead" in text
    assert re.search(r"Time left: \d+[smhd]", text) or "Time left: no expiry" in text
    assert "--- plan.md (markdown) ---\n# Plan\nstep" in text
    # The markdown file rendered as the console renders it (sanitized HTML).
    assert "<code>plan.md</code>" in html and '<div class="bpm-markdown"><h1>Plan</h1>' in html
    console = f"{PUBLIC_URL}/admin/breakpoints/breakpoint/{bp.pk}/change/"
    assert f"Review in the console: {console}" in text and f'href="{console}"' in html
    links = text_links(text)
    assert set(links) == {"approve", "reject"}
    assert links != {} and links["approve"] != links["reject"]
    assert all(link_path(url).startswith("/decide/") for url in links.values())
    assert html_links(html)["approve"] == links["approve"]
    assert html_links(html)["reject"] == links["reject"]
    delivery.refresh_from_db()
    assert delivery.status == "delivered" and delivery.attempts == 1
    assert delivery.reply["messageId"] == message["Message-ID"]


def test_an_address_list_route_gets_the_console_link_but_no_decision_links(
    smtp, make_breakpoint, admin_user
):
    NotificationRoute.objects.create(
        name="ops", pattern="*", channels=[{"kind": "email", "to": ["ops@example.com"]}]
    )
    bp = make_breakpoint(payload={"question": "Rotate keys?", "title": "Keys"}, tags=["prod"])

    [delivery] = send_all(bp)

    assert delivery.target == {"email": "ops@example.com"}
    [message] = smtp.messages
    text, html = parts(message)
    assert "Tags: prod" in text
    assert "/decide/" not in text and "/decide/" not in html
    assert f"/admin/breakpoints/breakpoint/{bp.pk}/change/" in text


def test_hostile_agent_text_is_escaped_in_the_html_part(smtp, make_breakpoint, expert_member):
    script = "<script>alert(1)</script>"
    bp, _ = routed(
        make_breakpoint,
        expert_member,
        title=f"Evil {script}\r\nBcc: victim@example.com",
        question=f'<img src=x onerror="alert(2)"> {script}',
        context={
            "files": [
                {"path": f"<b>{script}</b>.html", "format": "html", "content": script},
                {
                    "path": "notes.md",
                    "format": "markdown",
                    "content": f"[x](javascript:1) {script}",
                },
            ]
        },
    )

    send_all(bp)

    [message] = smtp.messages
    assert smtp.inbox.envelopes[0][1] == ["tina@example.com"]  # no header injection
    assert message["Bcc"] is None
    assert (
        message["Subject"]
        == "Review needed: Evil <script>alert(1)</script> Bcc: victim@example.com"
    )
    text, html = parts(message)
    assert "<script" not in html and "<img" not in html and "<b>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=&quot;alert(2)&quot;&gt;" in html
    assert not [href for href in re.findall(r'href="([^"]*)"', html) if "javascript" in href]
    assert script in text  # the plain part is not HTML: shown as sent


def test_long_files_are_cut_and_further_files_counted(smtp, make_breakpoint, expert_member):
    files = [{"path": f"f{i}.txt", "format": "text", "content": "x" * 5000} for i in range(7)]
    bp, _ = routed(make_breakpoint, expert_member, context={"files": files})

    send_all(bp)

    text, html = parts(smtp.messages[0])
    assert text.count("--- f") == email_channel.MAX_EXCERPT_FILES
    assert "x" * email_channel.EXCERPT_CHARS in text
    assert "x" * (email_channel.EXCERPT_CHARS + 1) not in text
    assert "[… cut here: the whole file is in the console]" in text
    assert "… and 2 more file(s) in the console." in text
    assert "… and 2 more file(s) in the console." in html


def test_no_mail_when_email_is_off(settings, smtp, make_breakpoint, expert_member):
    settings.BPM_NOTIFY_EMAIL = False
    bp, _ = routed(make_breakpoint, expert_member)
    assert email_deliveries(bp) == []


def test_reminder_threads_under_the_announcement(smtp, make_breakpoint, expert_member):
    bp, tina = routed(make_breakpoint, expert_member)
    [created] = send_all(bp)
    reminder = Delivery.objects.create(
        channel="email",
        target=created.target,
        breakpoint=bp,
        event_type="reminder",
        body={**created.body, "type": "breakpoint.reminder"},
        next_attempt_at=timezone.now(),
    )

    assert delivery_attempt(reminder.pk).status == "delivered"

    first, second = smtp.messages
    assert second["Subject"] == "Reminder: Deploy v2"
    assert second["In-Reply-To"] == first["Message-ID"] == second["References"]
    assert second["Message-ID"] != first["Message-ID"]
    # A new mail, new links: the reminder's are not the announcement's.
    assert text_links(parts(second)[0])["approve"] != text_links(parts(first)[0])["approve"]


# --- outcomes --------------------------------------------------------------------------------


def test_a_decision_elsewhere_mails_the_outcome_to_whoever_was_told(
    smtp, make_breakpoint, expert_member
):
    bp, tina = routed(make_breakpoint, expert_member)
    send_all(bp)

    feedback_add(
        breakpoint_id=bp.pk,
        actor=Actor.for_user(tina),
        comment="Looks <fine>",
        release=True,
        approved=True,
        via="slack",
    )
    [outcome] = send_all(bp, "released")

    assert outcome.target == {"email": "tina@example.com", "user": tina.pk}
    announcement, mail = smtp.messages
    assert mail["Subject"] == "Approved: Deploy v2"
    assert mail["In-Reply-To"] == announcement["Message-ID"]
    text, html = parts(mail)
    assert "Approved by tina via Slack: Looks <fine>" in text
    assert "Approved by tina via Slack: Looks &lt;fine&gt;" in html
    assert "/decide/" not in text


def test_a_cancellation_mails_a_short_outcome(smtp, make_breakpoint, expert_member):
    bp, _ = routed(make_breakpoint, expert_member)
    send_all(bp)

    breakpoint_cancel(breakpoint_id=bp.pk, actor=Actor.for_agent("agent-a"), reason="Not needed")
    send_all(bp, "cancelled")

    mail = smtp.messages[-1]
    assert mail["Subject"] == "Cancelled: Deploy v2"
    assert "Not needed" in parts(mail)[0]


# --- failures --------------------------------------------------------------------------------


def test_smtp_down_is_retried_and_delivered_once_back(smtp, make_breakpoint, expert_member):
    bp, _ = routed(make_breakpoint, expert_member)
    [delivery] = email_deliveries(bp)
    smtp.stop()

    outcome = delivery_attempt(delivery.pk)

    assert outcome.status == "retry"
    assert "ConnectionRefusedError" in outcome.error
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("pending", 1)
    assert delivery.next_attempt_at > timezone.now()
    assert delivery_attempt(delivery.pk).status == "skipped"  # not due yet

    smtp.start()
    make_due(delivery)
    assert delivery_attempt(delivery.pk).status == "delivered"

    assert len(smtp.messages) == 1
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("delivered", 2)
    outcomes = list(
        Event.objects.filter(type="notification", metadata__deliveryId=delivery.pk)
        .order_by("id")
        .values_list("metadata__outcome", flat=True)
    )
    assert outcomes == ["retry", "delivered"]


def test_a_temporary_refusal_is_retried(smtp, make_breakpoint, expert_member):
    bp, _ = routed(make_breakpoint, expert_member)
    [delivery] = email_deliveries(bp)
    smtp.inbox.refuse = "451 4.7.1 Greylisted, try again later"

    outcome = delivery_attempt(delivery.pk)

    assert (outcome.status, outcome.status_code) == ("retry", 451)
    assert smtp.messages == []


def test_a_permanent_refusal_fails_at_once_as_a_dead_letter(smtp, make_breakpoint, expert_member):
    bp, _ = routed(make_breakpoint, expert_member)
    [delivery] = email_deliveries(bp)
    smtp.inbox.refuse = "550 5.1.1 No such user here"

    outcome = delivery_attempt(delivery.pk)

    assert (outcome.status, outcome.status_code) == ("failed", 550)
    assert "SMTPRecipientsRefused" in outcome.error and "No such user" in outcome.error
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("failed", 1, 550)
    assert 1 < MAX_ATTEMPTS  # failed on the first attempt, not by running out of them
    assert smtp.messages == []


def test_a_target_without_an_address_fails_without_sending(smtp, make_breakpoint, expert_member):
    bp, _ = routed(make_breakpoint, expert_member)
    [delivery] = email_deliveries(bp)
    Delivery.objects.filter(pk=delivery.pk).update(target={"user": 1})

    outcome = delivery_attempt(delivery.pk)

    assert outcome.status == "failed" and "no email address" in outcome.error
    assert smtp.messages == []


def test_under_make_run_the_console_backend_prints_the_mail(
    settings, smtp, make_breakpoint, expert_member, capsys
):
    settings.EMAIL_BACKEND = "django.core.mail.backends.console.EmailBackend"
    bp, _ = routed(make_breakpoint, expert_member)

    send_all(bp)

    printed = capsys.readouterr().out
    assert "Subject: Review needed: Deploy v2" in printed
    assert f"Approve… {PUBLIC_URL}/decide/" in printed
    assert smtp.messages == []
