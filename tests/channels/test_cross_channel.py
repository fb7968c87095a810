"""Issue 11's end-to-end cases across channels: one breakpoint announced in Slack and by
email; decided in one, the other shows it (real Slack stand-in, real local SMTP server)."""

import pytest
from django.contrib.auth.models import Group

from breakpoints.models import Feedback
from core.actors import Actor
from policies.routes import route_add
from tests.standins.smtp import SmtpServer, use_smtp
from tests.support.email import link_path, parts, send_all, text_links
from tests.support.factories import AdminFactory, ReviewerFactory
from tests.support.slack import CHANNEL, attempt, interact, only

pytest_plugins = ["tests.support.slack"]  # standin

ROUTED = {"question": "Ship v2 to prod?", "title": "Ship v2", "expert": "tech-lead"}


@pytest.fixture
def both(db, standin, settings):
    """Slack (the stand-in) and email (a local SMTP server) on; tina (tech-lead, U0TINA in
    Slack) is the routed expert; a route announces everything in Slack and mails experts."""
    server = SmtpServer().start()
    use_smtp(settings, server)
    settings.BPM_NOTIFY_EMAIL = True
    tina = ReviewerFactory(username="tina", email="tina@example.com")
    tina.groups.add(Group.objects.get_or_create(name="tech-lead")[0])
    route_add(
        actor=Actor.for_user(AdminFactory(username="root")),
        name="slack-and-mail",
        pattern="*",
        channels=[{"kind": "slack", "channel": CHANNEL}, {"kind": "email", "to": "experts"}],
    )
    yield server
    server.stop()


def announced(make_breakpoint, standin, smtp):
    """Create, post to Slack, mail tina: (bp, the Slack message, tina's links by verdict)."""
    bp = make_breakpoint(payload=ROUTED)
    posted = attempt(only(bp))
    assert posted.status == "delivered", posted.last_error
    send_all(bp)
    [message] = smtp.messages
    links = {verdict: link_path(url) for verdict, url in text_links(parts(message)[0]).items()}
    return bp, posted.reply, links


def test_approved_in_slack_the_mail_link_then_says_already_decided(
    both, standin, make_breakpoint, agent_client, admin_client, client, settings
):
    settings.BPM_PUBLIC_URL = "http://testserver"  # the mailed links point at this test server
    bp, message, links = announced(make_breakpoint, standin, both)

    clicked = standin.click_payload(message["channel"], message["ts"], "bpm_approve", "U0TINA")
    assert interact(client, clicked).status_code == 200

    result = agent_client.get(f"/api/breakpoints/{bp.pk}/status").json()["result"]
    assert (result["approved"], result["respondedBy"]) == (True, "tina")
    page = client.get(links["approve"])
    assert page.status_code == 200
    assert "Already decided" in page.content.decode()
    late = client.post(links["approve"], {"decision": "reject", "comment": "late"})
    assert "Already decided" in late.content.decode()
    (feedback,) = Feedback.objects.filter(breakpoint_id=bp.pk)  # the late POST added none
    assert (feedback.via, feedback.approved) == ("slack", True)
    admin_client.force_login(AdminFactory(username="console-admin"))
    review = admin_client.get(f"/admin/breakpoints/breakpoint/{bp.pk}/change/")
    assert "via Slack" in review.content.decode()


def test_rejected_by_mail_with_feedback_the_slack_message_shows_it(
    both, standin, make_breakpoint, agent_client, client, settings
):
    settings.BPM_PUBLIC_URL = "http://testserver"
    bp, message, links = announced(make_breakpoint, standin, both)

    done = client.post(links["reject"], {"decision": "reject", "comment": "Not before the audit"})

    assert done.status_code == 200
    result = agent_client.get(f"/api/breakpoints/{bp.pk}/status").json()["result"]
    assert (result["approved"], result["feedback"]) == (False, "Not before the audit")
    updated = attempt(only(bp, "released"))
    assert updated.status == "delivered", updated.last_error
    (update,) = standin.succeeded("chat.update")
    assert (update["channel"], update["ts"]) == (message["channel"], message["ts"])
    shown = str(update["blocks"])
    assert "Rejected" in shown and "tina" in shown and "Not before the audit" in shown
