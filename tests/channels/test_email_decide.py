"""Following a mail's decision links: the page at /decide/<token>, GET shows, POST decides.

Each test mails a routed breakpoint through the real SMTP stand-in (test_email.py), takes
the links out of the received message and follows them with Django's test client, as a
reviewer's browser (or a mail scanner) would.
"""

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.contrib.auth.models import Group
from django.core import signing
from django.db import connection
from django.test import Client
from django.utils import timezone

from audit.models import Event
from breakpoints.models import Breakpoint, Feedback
from channels.email import links as email_links
from channels.email.links import Link
from channels.email.views import LinkUsed, link_decide
from channels.models import DecisionLinkUse
from core.actors import REVIEWERS_GROUP
from tests.support.email import (
    link_path,
    parts,
    routed,
    send_all,
    text_links,
)
from tests.support.records import refusals

AUDIT_LOGGER = "breakpoints.audit"
HOSTILE = "<script>alert(1)</script>"
THREADS = 8


@pytest.fixture
def mailed(smtp, make_breakpoint, expert_member):
    """A breakpoint routed to tech-lead (tina), announced by mail: (bp, tina, links)."""
    bp, tina = routed(
        make_breakpoint,
        expert_member,
        context={"files": [{"path": "plan.md", "format": "markdown", "content": "**bold** plan"}]},
    )
    send_all(bp)
    [message] = smtp.messages
    links = {verdict: link_path(url) for verdict, url in text_links(parts(message)[0]).items()}
    return bp, tina, links


def unchanged(bp) -> bool:
    """Still waiting, with no feedback and no link used."""
    current = Breakpoint.objects.get(pk=bp.pk)
    return (
        current.status == "waiting"
        and not Feedback.objects.filter(breakpoint=bp).exists()
        and not DecisionLinkUse.objects.filter(breakpoint=bp).exists()
    )


def page(response) -> str:
    return response.content.decode()


# --- GET shows, and changes nothing ----------------------------------------------------------


def test_get_shows_the_breakpoint_and_a_form_and_changes_nothing(client, mailed):
    bp, _, links = mailed

    first = client.get(links["approve"])
    again = client.get(links["approve"])  # a scanner, then the reviewer
    head = client.head(links["reject"])

    assert first.status_code == again.status_code == head.status_code == 200
    body = page(first)
    assert 'data-bpm-page="form"' in body
    assert "Deploy v2" in body and "Deploy &lt;b&gt;v2&lt;/b&gt; to prod?" in body
    assert "<strong>bold</strong> plan" in body  # markdown rendered and sanitized, as the console
    assert "Deciding as <strong>tina</strong>" in body
    assert 'value="approve" class="approve preferred"' in body
    assert 'method="post"' in body
    assert first["Cache-Control"].startswith("max-age=0")
    assert "no-referrer" in body
    assert head.content == b""
    assert unchanged(bp)
    assert refusals(bp) == []


def test_other_methods_are_refused(client, mailed):
    _, _, links = mailed
    assert client.put(links["approve"]).status_code == 405


# --- POST decides ------------------------------------------------------------------------------


def test_post_approve_releases_for_that_reviewer_via_email(client, smtp, mailed, agent_client):
    bp, tina, links = mailed

    response = client.post(links["approve"], {"decision": "approve", "comment": ""})

    assert response.status_code == 200
    assert 'data-bpm-page="done"' in page(response)
    assert "Approved by tina via email" in page(response)
    poll = agent_client.get(f"/api/breakpoints/{bp.pk}/status").json()
    assert poll["status"] == "released"
    assert poll["result"]["approved"] is True
    assert poll["result"]["respondedBy"] == "tina"
    [feedback] = Feedback.objects.filter(breakpoint=bp)
    assert (feedback.via, feedback.author_user, feedback.releases) == ("email", tina, True)
    [use] = DecisionLinkUse.objects.filter(breakpoint=bp)
    assert (use.user, use.outcome) == (tina, "approved")
    assert len(use.nonce) >= 20 and use.nonce not in links["approve"]  # not the token
    assert Event.objects.filter(breakpoint=bp, type="released", actor="tina").exists()

    send_all(bp, "released")  # the outcome mail, threaded under the announcement

    outcome = smtp.messages[-1]
    assert outcome["Subject"] == "Approved: Deploy v2"
    assert "Approved by tina via email" in parts(outcome)[0]


def test_reject_sends_its_feedback(client, mailed, agent_client):
    bp, _, links = mailed

    done = client.post(links["reject"], {"decision": "reject", "comment": "Not on a <Friday>"})

    assert done.status_code == 200
    assert "Rejected by tina via email: Not on a &lt;Friday&gt;" in page(done)
    result = agent_client.get(f"/api/breakpoints/{bp.pk}/status").json()["result"]
    assert (result["approved"], result["feedback"]) == (False, "Not on a <Friday>")


def test_the_button_decides_not_the_link_followed(client, mailed):
    bp, _, links = mailed
    client.post(links["approve"], {"decision": "reject", "comment": "changed my mind"})
    assert Breakpoint.objects.get(pk=bp.pk).result["approved"] is False


def test_a_used_link_is_refused_with_its_outcome_and_decides_once(client, mailed):
    bp, _, links = mailed
    client.post(links["approve"], {"decision": "approve"})

    again = client.post(links["approve"], {"decision": "reject", "comment": "again"})
    sibling = client.post(links["reject"], {"decision": "reject", "comment": "other link"})
    shown = client.get(links["approve"])

    for response in (again, sibling, shown):
        assert response.status_code == 409
        assert "This link was already used" in page(response)
        assert "It approved the breakpoint (tina," in page(response)
    assert Feedback.objects.filter(breakpoint=bp).count() == 1
    assert Breakpoint.objects.get(pk=bp.pk).result["approved"] is True
    assert [e.metadata["reason"] for e in refusals(bp)] == ["used", "used"]  # POSTs only
    assert refusals(bp)[0].actor == "email:tina"
    assert refusals(bp)[0].metadata["via"] == "email"


def test_a_racing_second_use_fails_on_the_unique_nonce(mailed):
    bp, tina, links = mailed
    link = email_links.link_read(links["approve"].removeprefix("/decide/"))
    link_decide(link, user=tina, approved=True, comment="")

    with pytest.raises(LinkUsed):
        link_decide(link, user=tina, approved=False, comment="second")

    assert DecisionLinkUse.objects.filter(nonce=link.nonce).count() == 1
    assert Feedback.objects.filter(breakpoint=bp).count() == 1


# --- links that do not work ------------------------------------------------------------------


def tampered_tokens(token: str) -> list[str]:
    payload, timestamp, signature = token.rsplit(":", 2)
    flip = {"A": "B"}.get(signature[5], "A")
    data = signing.loads(token, salt=email_links.SALT)
    return [
        f"{payload}:{timestamp}:{signature[:5]}{flip}{signature[6:]}",  # one character
        signing.dumps({**data, "v": "reject"}, salt="another-salt"),
        signing.dumps(data, salt=email_links.SALT, key="another-secret-key"),
        f"{payload[:-2]}xx:{timestamp}:{signature}",  # the content altered
        "garbage",
    ]


def test_tampered_links_are_400_and_logged_not_audited(client, mailed, caplog):
    bp, _, links = mailed
    token = links["approve"].removeprefix("/decide/")

    for forged in tampered_tokens(token):
        with caplog.at_level(logging.WARNING, logger=AUDIT_LOGGER):
            shown = client.get(f"/decide/{forged}")
            posted = client.post(f"/decide/{forged}", {"decision": "approve"})
        assert shown.status_code == posted.status_code == 400, forged
        assert "This link is not valid" in page(posted)

    warnings = [r for r in caplog.records if r.name == AUDIT_LOGGER]
    assert len(warnings) == 2 * len(tampered_tokens(token))
    assert all(r.levelno == logging.WARNING and r.reason == "bad_signature" for r in warnings)
    assert token not in caplog.text  # the credential is never logged
    assert unchanged(bp)
    assert refusals(bp) == []


def test_an_expired_link_is_410_and_its_refused_post_audited(client, settings, mailed, monkeypatch):
    bp, _, links = mailed
    later = time.time() + settings.BPM_EMAIL_LINK_MAX_AGE_SECONDS + 60
    monkeypatch.setattr(signing, "time", SimpleNamespace(time=lambda: later))

    shown = client.get(links["approve"])
    posted = client.post(links["approve"], {"decision": "approve"})

    assert shown.status_code == posted.status_code == 410
    assert "This link has expired" in page(posted)
    assert unchanged(bp)
    [refused] = refusals(bp)
    assert (refused.actor, refused.metadata["reason"]) == ("email:tina", "expired")


def test_a_short_max_age_applies_to_links_already_mailed(client, settings, mailed, monkeypatch):
    bp, _, links = mailed
    settings.BPM_EMAIL_LINK_MAX_AGE_SECONDS = 30
    assert client.get(links["approve"]).status_code == 200
    later = time.time() + 31
    monkeypatch.setattr(signing, "time", SimpleNamespace(time=lambda: later))
    assert client.get(links["approve"]).status_code == 410


def test_after_a_decision_elsewhere_the_link_says_already_decided(client, mailed, reviewer_client):
    bp, tina, links = mailed
    bp.experts = []  # alice (not routed) decides through the API as any reviewer would
    Breakpoint.objects.filter(pk=bp.pk).update(experts=[])
    decided = reviewer_client.post(
        f"/api/breakpoints/{bp.pk}/feedback",
        {"comment": "done by API", "release": True, "approved": False},
        format="json",
    )
    assert decided.status_code == 201, decided.content

    shown = client.get(links["approve"])
    posted = client.post(links["approve"], {"decision": "approve"})

    assert shown.status_code == posted.status_code == 200
    for response in (shown, posted):
        assert "Already decided: Rejected by alice via the API: done by API" in page(response)
        assert 'data-bpm-page="decided"' in page(response)
    assert Breakpoint.objects.get(pk=bp.pk).result["respondedBy"] == "alice"
    assert not DecisionLinkUse.objects.filter(breakpoint=bp).exists()
    assert [e.metadata["reason"] for e in refusals(bp)] == ["invalid_state"]


def test_a_reviewer_who_lost_the_role_gets_403_and_the_link_keeps_working(client, mailed, caplog):
    bp, tina, links = mailed
    reviewers = Group.objects.get(name=REVIEWERS_GROUP)
    tina.groups.remove(reviewers)

    with caplog.at_level(logging.INFO):
        shown = client.get(links["approve"])
        posted = client.post(links["approve"], {"decision": "approve"})
        client.post(links["approve"], {"decision": "maybe"})  # a form error, 400

    assert links["approve"].removeprefix("/decide/") not in caplog.text  # still a credential

    assert shown.status_code == posted.status_code == 403
    assert "Only reviewers and admins can give feedback." in page(posted)
    assert unchanged(bp)  # the use rolled back with the refused decision
    [refused] = refusals(bp)
    assert (refused.actor, refused.metadata["reason"]) == ("email:tina", "permission_denied")
    assert refused.metadata["message"] == "Only reviewers and admins can give feedback."

    tina.groups.add(reviewers)
    assert client.post(links["approve"], {"decision": "approve"}).status_code == 200
    assert Breakpoint.objects.get(pk=bp.pk).status == "released"


def test_a_link_to_an_overdue_breakpoint_expires_it_and_says_so(client, mailed):
    bp, _, links = mailed
    Breakpoint.objects.filter(pk=bp.pk).update(
        ttl_seconds=60, expires_at=timezone.now() - timedelta(seconds=1)
    )

    shown = client.get(links["approve"])
    assert "Already decided: Expired: nobody decided" in page(shown)
    assert Breakpoint.objects.get(pk=bp.pk).status == "waiting"  # a GET writes nothing

    posted = client.post(links["approve"], {"decision": "approve"})

    assert posted.status_code == 200
    assert "Already decided: Expired: no decision within 60 seconds." in page(posted)
    assert Breakpoint.objects.get(pk=bp.pk).status == "expired"
    assert not DecisionLinkUse.objects.filter(breakpoint=bp).exists()


def test_a_reviewer_outside_the_routed_seat_gets_403(client, mailed, expert_member):
    bp, tina, links = mailed
    tina.groups.remove(Group.objects.get(name="tech-lead"))
    expert_member("tom", "tech-lead")  # the seat still resolves, to someone else

    posted = client.post(links["approve"], {"decision": "approve"})

    assert posted.status_code == 403
    assert "Only members of tech-lead" in page(posted)
    assert unchanged(bp)


def test_a_deactivated_user_cannot_use_the_link(client, mailed):
    bp, tina, links = mailed
    tina.is_active = False
    tina.save()

    assert client.get(links["approve"]).status_code == 403
    posted = client.post(links["approve"], {"decision": "approve"})

    assert posted.status_code == 403
    assert "no longer active" in page(posted)
    assert unchanged(bp)
    assert [e.metadata["reason"] for e in refusals(bp)] == ["inactive"]


def test_a_deleted_breakpoint_is_404(client, mailed):
    bp, _, links = mailed
    Breakpoint.objects.filter(pk=bp.pk).delete()
    response = client.get(links["approve"])
    assert response.status_code == 404
    assert "This breakpoint no longer exists" in page(response)


def test_hostile_agent_text_is_escaped_on_the_page(client, smtp, make_breakpoint, expert_member):
    bp, _ = routed(
        make_breakpoint,
        expert_member,
        title=f"T {HOSTILE}",
        question=f'Q <img src=x onerror="alert(2)"> {HOSTILE}',
        tags=[HOSTILE],
        context={
            "files": [
                {
                    "path": f"<i>{HOSTILE}</i>",
                    "format": "markdown",
                    "content": f"[x](javascript:1){HOSTILE}",
                },
                {"path": "r.html", "format": "html", "content": f"<p>{HOSTILE}</p>"},
                {"path": "c.py", "format": "code", "content": f"x = '{HOSTILE}'"},
            ]
        },
    )
    send_all(bp)
    path = link_path(text_links(parts(smtp.messages[0])[0])["approve"])

    body = page(client.get(path))

    assert "<script" not in body and "<img" not in body and "<i>" not in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body
    assert "javascript:" not in body
    assert 'sandbox=""' in body and "srcdoc=" in body  # HTML only in a sandboxed iframe


def test_links_carry_what_they_were_mailed_for():
    link = Link("bp_x", 7, "n" * 22, "reject")
    assert email_links.link_read(link.as_token()) == link


@pytest.mark.django_db(transaction=True)
@pytest.mark.postgres  # concurrent connections
def test_one_link_posted_eight_times_at_once_decides_once(mailed):
    bp, _, links = mailed
    barrier = threading.Barrier(THREADS)

    def post(i: int) -> tuple[int, str]:
        try:
            barrier.wait(timeout=10)
            response = Client().post(links["approve"], {"decision": "approve", "comment": str(i)})
            return response.status_code, page(response)
        finally:
            connection.close()

    with ThreadPoolExecutor(THREADS) as pool:
        results = list(pool.map(post, range(THREADS)))

    statuses = sorted(status for status, _ in results)
    assert statuses == [200] + [409] * (THREADS - 1), results
    assert all("This link was already used" in body for status, body in results if status == 409)
    assert Feedback.objects.filter(breakpoint=bp).count() == 1
    assert DecisionLinkUse.objects.filter(breakpoint=bp).count() == 1
    assert Breakpoint.objects.get(pk=bp.pk).status == "released"


def test_a_vote_by_link_waits_for_the_other_seats_and_a_second_vote_is_refused(
    client, smtp, make_breakpoint, expert_member
):
    bp, tina = routed(
        make_breakpoint, expert_member, expert=["tech-lead", "ops-lead"], strategy="collect-all"
    )
    expert_member("oscar", "ops-lead")
    send_all(bp)
    tina_mail = next(m for m in smtp.messages if m["To"] == "tina@example.com")
    first = link_path(text_links(parts(tina_mail)[0])["approve"])
    # A second mail to tina (a reminder, say): a new link, but her seat has voted by then.
    second = link_path(email_links.decision_urls(bp.pk, tina.pk)["approve"])

    voted = client.post(first, {"decision": "approve"})
    again = client.post(second, {"decision": "approve"})

    assert "Your vote is recorded; the breakpoint waits for the other experts." in page(voted)
    assert again.status_code == 409
    assert "tina has already voted on this breakpoint (seat tech-lead)" in page(again)
    current = Breakpoint.objects.get(pk=bp.pk)
    assert current.status == "waiting" and len(current.votes) == 1
    assert DecisionLinkUse.objects.filter(breakpoint=bp).count() == 1
