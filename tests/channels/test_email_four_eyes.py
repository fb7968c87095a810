"""Under four eyes the requester is mailed a notice, not decision links (issue 47): a mail
offers Approve and Reject only to a person the service would let decide (release_refusal,
the question the decision page asks too), so the requester who holds the routed seat
reads why another reviewer decides instead. Mailed through the real SMTP stand-in."""

from tests.support.email import ROUTED, parts, send_all, text_links

SELF_REVIEW = "You requested this breakpoint (tina): another reviewer must decide it"


def _mail_to(smtp, address: str):
    [message] = [m for m in smtp.messages if address in m["To"]]
    return parts(message)


def test_the_requester_under_four_eyes_gets_a_notice_and_no_links(
    smtp, make_breakpoint, expert_member
):
    expert_member("tina", "tech-lead")
    expert_member("otto", "tech-lead")
    payload = {**ROUTED, "preventSelfReview": True}
    bp = make_breakpoint(payload=payload, requested_by="tina")
    send_all(bp)

    text, html = _mail_to(smtp, "tina@")
    assert text_links(text) == {}
    assert 'data-bpm-link="approve"' not in html and 'data-bpm-link="reject"' not in html
    assert "/decide/" not in text + html
    assert SELF_REVIEW in text and SELF_REVIEW in html
    assert 'data-bpm-link="console"' in html  # she may still follow it and comment

    other_text, _ = _mail_to(smtp, "otto@")
    assert set(text_links(other_text)) == {"approve", "reject"}
    assert SELF_REVIEW not in other_text


def test_without_four_eyes_the_requester_is_mailed_the_links(smtp, make_breakpoint, expert_member):
    expert_member("tina", "tech-lead")
    bp = make_breakpoint(payload=ROUTED, requested_by="tina")
    send_all(bp)
    text, _ = _mail_to(smtp, "tina@")
    assert set(text_links(text)) == {"approve", "reject"}
