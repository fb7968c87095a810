"""The audit trail in the console: delivery events never show a webhook's credentials."""

from audit.models import Event

EVENTS_URL = "/admin/audit/event/"
LEAKS = ("S3cret", "token=abc")


def test_reviewers_see_delivery_events_with_the_url_redacted(reviewer_browser, make_breakpoint):
    """Rows written before the redaction held the full URL; the console redacts on output."""
    bp = make_breakpoint()
    event = Event.objects.create(
        breakpoint=bp,
        type="notification",
        actor="system:webhooks",
        metadata={
            "webhookId": 7,
            "url": "http://u:S3cret@hooks.example:8080/x?token=abc",
            "outcome": "delivered",
        },
    )

    listing = reviewer_browser.get(EVENTS_URL)
    detail = reviewer_browser.get(f"{EVENTS_URL}{event.pk}/change/")

    assert listing.status_code == 200 and detail.status_code == 200
    for response in (listing, detail):
        html = response.content.decode()
        assert "http://hooks.example:8080/x" in html
        assert "webhookId" in html
        assert not [leak for leak in LEAKS if leak in html], html
