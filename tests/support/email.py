"""The email channel's tests, shared: its deliveries sent, a received mail's parts and
links, and a breakpoint routed to the expert group tech-lead."""

import re
from email.message import EmailMessage
from urllib.parse import urlsplit

from notifications.models import Delivery
from notifications.services import delivery_attempt
from tests.standins.smtp import PUBLIC_URL

ROUTED = {"question": "Deploy <b>v2</b> to prod?", "title": "Deploy v2", "expert": "tech-lead"}


def email_deliveries(bp, event_type: str = "created") -> list[Delivery]:
    return list(
        Delivery.objects.filter(breakpoint=bp, channel="email", event_type=event_type).order_by(
            "created_at"
        )
    )


def send_all(bp, event_type: str = "created") -> list[Delivery]:
    """Attempt each email delivery of the event once; every one must be delivered."""
    rows = email_deliveries(bp, event_type)
    for row in rows:
        assert delivery_attempt(row.pk).status == "delivered", row.pk
    return rows


def parts(message: EmailMessage) -> tuple[str, str]:
    """The plain-text and HTML parts of a received mail."""
    text = message.get_body(("plain",))
    html = message.get_body(("html",))
    assert text is not None and html is not None, message
    return (
        text.get_content().replace("\r\n", "\n"),
        html.get_content().replace("\r\n", "\n"),
    )


def text_links(text: str) -> dict[str, str]:
    found = dict(re.findall(r"^(Approve|Reject)… (\S+)$", text, re.MULTILINE))
    return {verdict.lower(): url for verdict, url in found.items()}


def link_path(url: str) -> str:
    parts_ = urlsplit(url)
    assert f"{parts_.scheme}://{parts_.netloc}" == PUBLIC_URL
    return parts_.path


def routed(make_breakpoint, expert_member, **payload):
    """tina (group tech-lead) is the routed expert; no route: the default emails her."""
    tina = expert_member("tina", "tech-lead")
    bp = make_breakpoint(payload={**ROUTED, **payload})
    return bp, tina
