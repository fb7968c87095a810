"""The Teams channel: one attempt of a delivery, through the Bot Framework connector.

- created: the card, posted to the target's conversation (a team channel or a chat):
  POST {serviceUrl}/v3/conversations/{id}/activities. `reply` keeps the conversation, the
  activity id the connector answered and the service URL.
- reminder / escalated: a short card in reply to that activity once it is posted
  (POST .../activities/{activityId}); not posted, the whole card instead.
- released / expired / cancelled: the card of that activity replaced by the decided one,
  without buttons (PUT .../activities/{activityId}); not posted yet: retry later; failed
  for good or gone (404): a new message instead.

The outbox retries: one attempt is one request (and the bot's token, when it has none).
429 (with its Retry-After), 5xx, a refused token (a new one is asked for) and network
errors are retryable; the connector's other answers (400, 403, 404) are not. Errors name
the HTTP status, never a token.
"""

from typing import Any
from urllib.parse import quote

import httpx
from django.conf import settings
from django.utils import timezone

from audit.models import EventType
from channels.teams import TEAMS, auth, cards
from notifications.base import Sent
from notifications.models import Delivery, DeliveryStatus

API_TIMEOUT_SECONDS = 10
ANNOUNCING = frozenset({EventType.CREATED, EventType.REMINDER, EventType.ESCALATED})
OUTCOMES = frozenset({EventType.RELEASED, EventType.EXPIRED, EventType.CANCELLED})
NOT_POSTED_YET = "the card to update is not posted yet"


class ConnectorError(Exception):
    """The connector (or the token endpoint) did not do what was asked."""

    def __init__(
        self,
        message: str,
        status: int | None = None,
        *,
        retryable: bool = True,
        retry_after: float | None = None,
    ):
        super().__init__(message)
        self.message, self.status = message, status
        self.retryable, self.retry_after = retryable, retry_after


class BadTarget(Exception):
    """A delivery's target names no conversation."""


def service_url() -> str:
    base = settings.TEAMS_SERVICE_URL
    return base if base.endswith("/") else base + "/"


def activities_url(base: str, conversation: str, activity: str = "") -> str:
    url = f"{base.rstrip('/')}/v3/conversations/{quote(conversation, safe='')}/activities"
    return f"{url}/{quote(activity, safe='')}" if activity else url


def member_url(base: str, conversation: str, user_id: str) -> str:
    """Where the connector tells who a member of a conversation is (their email, UPN)."""
    conversation, user_id = quote(conversation, safe=""), quote(user_id, safe="")
    return f"{base.rstrip('/')}/v3/conversations/{conversation}/members/{user_id}"


def connector(
    method: str, url: str, body: dict[str, Any] | None = None, timeout: float = API_TIMEOUT_SECONDS
) -> dict[str, Any]:
    """One call to the connector with the bot's token: its JSON answer, or ConnectorError."""
    try:
        token = auth.bot_token()
    except auth.TokenUnavailable as exc:
        raise ConnectorError(str(exc), exc.status, retryable=exc.retryable) from None
    try:
        response = httpx.request(
            method, url, json=body, headers={"Authorization": f"Bearer {token}"}, timeout=timeout
        )
    except httpx.HTTPError as exc:
        raise ConnectorError(f"Teams unreachable: {type(exc).__name__}") from None
    status = response.status_code
    what = f"Teams {method} {url.rsplit('/v3/', 1)[-1].split('/', 1)[0]}: HTTP {status}"
    if status == 401:
        auth.forget_bot_token()  # revoked or a changed secret: the next try asks anew
        raise ConnectorError(what, status)
    if status == 429:
        raise ConnectorError(what, status, retry_after=retry_after(response))
    if status >= 400:
        raise ConnectorError(what, status, retryable=status >= 500)
    try:
        data = response.json() if response.content else {}
    except ValueError:
        data = {}
    return data if isinstance(data, dict) else {}


def retry_after(response: httpx.Response) -> float | None:
    try:
        seconds = float(response.headers.get("Retry-After", ""))
    except ValueError:
        return None
    return min(max(seconds, 0.0), 24 * 60 * 60) if seconds == seconds else None


def send(delivery: Delivery) -> Sent:
    """One attempt of a Teams delivery (see the module docstring)."""
    if not (settings.TEAMS_APP_ID and settings.TEAMS_APP_PASSWORD):
        return Sent(error="Teams is not configured (TEAMS_APP_ID is empty)", retryable=False)
    try:
        if delivery.event_type in ANNOUNCING:
            return _announce(delivery)
        if delivery.event_type in OUTCOMES:
            return _outcome(delivery)
    except ConnectorError as exc:
        return Sent(exc.status, exc.message, retryable=exc.retryable, retry_after=exc.retry_after)
    except BadTarget as exc:
        return Sent(error=str(exc), retryable=False)
    return Sent(error=f"Teams does not announce {delivery.event_type} events", retryable=False)


def _conversation(target: dict[str, Any]) -> str:
    conversation = target.get("conversation")
    if not isinstance(conversation, str) or not conversation:
        raise BadTarget(f"A Teams target needs a conversation, not {sorted(target)}")
    return conversation


def _created_delivery(delivery: Delivery) -> Delivery | None:
    """The `created` delivery of this breakpoint to the same Teams target, if any."""
    rows = Delivery.objects.filter(
        breakpoint_id=delivery.breakpoint_id, channel=TEAMS, event_type=EventType.CREATED
    ).only("status", "target", "reply")
    return next((row for row in rows if row.target == delivery.target), None)


def posted(created: Delivery | None) -> dict[str, str] | None:
    """{"conversation", "activity", "serviceUrl"} of the card a created delivery posted."""
    if created is None or created.status != DeliveryStatus.DELIVERED:
        return None
    reply = created.reply or {}
    keys = ("conversation", "activity", "serviceUrl")
    if all(isinstance(reply.get(key), str) and reply[key] for key in keys):
        return {key: reply[key] for key in keys}
    return None


def _post(conversation: str, content: dict[str, Any], reply_to: str = "") -> Sent:
    base = service_url()
    activity = {"type": "message", "attachments": [cards.attachment(content)]}
    answer = connector("POST", activities_url(base, conversation, reply_to), activity)
    activity_id = answer.get("id")
    if not isinstance(activity_id, str) or not activity_id:
        raise ConnectorError("Teams answered no activity id", 200, retryable=False)
    return Sent(
        200, reply={"conversation": conversation, "activity": activity_id, "serviceUrl": base}
    )


def _announce(delivery: Delivery) -> Sent:
    data = (delivery.body or {}).get("data") or {}
    now = timezone.now()
    if delivery.event_type != EventType.CREATED:
        card = posted(_created_delivery(delivery))
        if card is not None:
            nudge = cards.nudge(data, delivery.event_type, now)
            return _post(card["conversation"], nudge, reply_to=card["activity"])
    content = cards.announcement(data, delivery.event_type, now)
    return _post(_conversation(delivery.target), content)


def _outcome(delivery: Delivery) -> Sent:
    data = (delivery.body or {}).get("data") or {}
    content = cards.outcome(data, delivery.event_type)
    created = _created_delivery(delivery)
    if created is not None and created.status == DeliveryStatus.PENDING:
        return Sent(error=NOT_POSTED_YET, retryable=True)
    card = posted(created)
    if card is not None:
        url = activities_url(card["serviceUrl"], card["conversation"], card["activity"])
        activity = {
            "type": "message",
            "id": card["activity"],
            "attachments": [cards.attachment(content)],
        }
        try:
            connector("PUT", url, activity)
            return Sent(200, reply={**card, "updated": True})
        except ConnectorError as exc:
            if exc.status != 404:
                raise
    return _post(_conversation(delivery.target), content)
