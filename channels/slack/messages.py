"""The Slack channel: one attempt of a delivery, through slack-sdk's WebClient.

- created / reminder / escalated: chat.postMessage to the target's channel, or to the
  user found by email (a DM); reminders and escalations go in the thread of the created
  message once it is posted. `reply` keeps the message's channel and ts.
- released / expired / cancelled: chat.update of the message the `created` delivery to
  the same target posted, showing the decision and no buttons (not posted yet: retry
  later; failed for good or gone: a new message instead).

The outbox retries: slack-sdk's own retries are off, so one attempt is one request. 429
(with its Retry-After), 5xx and network errors are retryable; Slack's other errors
(invalid_auth, channel_not_found, users_not_found...) are not. Errors name Slack's error
code and the HTTP status, never the token.
"""

import http.client
from typing import Any
from urllib.error import URLError

from django.conf import settings
from django.utils import timezone
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from audit.models import EventType
from channels.slack import SLACK
from channels.slack import blocks as slack_blocks
from notifications.base import Sent
from notifications.models import Delivery, DeliveryStatus

API_TIMEOUT_SECONDS = 10
ANNOUNCING = frozenset({EventType.CREATED, EventType.REMINDER, EventType.ESCALATED})
OUTCOMES = frozenset({EventType.RELEASED, EventType.EXPIRED, EventType.CANCELLED})
NOT_POSTED_YET = "the message to update is not posted yet"
# Slack's own words for "try again later", answered with HTTP 200.
TRANSIENT_ERRORS = frozenset(
    {"ratelimited", "internal_error", "fatal_error", "service_unavailable", "request_timeout"}
)
GONE_ERRORS = frozenset({"message_not_found", "cant_update_message", "edit_window_closed"})
NETWORK_ERRORS = (URLError, OSError, http.client.HTTPException)


def web_client(timeout: int = API_TIMEOUT_SECONDS) -> WebClient:
    """The bot's client on SLACK_API_URL, without slack-sdk's retries (the outbox retries)."""
    base_url = settings.SLACK_API_URL
    base_url = base_url if base_url.endswith("/") else base_url + "/"
    return WebClient(
        token=settings.SLACK_BOT_TOKEN, base_url=base_url, timeout=timeout, retry_handlers=[]
    )


class BadTarget(Exception):
    """A delivery's target names neither a channel nor an email."""


def send(delivery: Delivery) -> Sent:
    """One attempt of a Slack delivery (see the module docstring)."""
    if not settings.SLACK_BOT_TOKEN:
        return Sent(error="Slack is not configured (SLACK_BOT_TOKEN is empty)", retryable=False)
    client = web_client()
    try:
        if delivery.event_type in ANNOUNCING:
            return _announce(client, delivery)
        if delivery.event_type in OUTCOMES:
            return _outcome(client, delivery)
    except SlackApiError as exc:
        return api_failure(exc)
    except NETWORK_ERRORS as exc:
        return Sent(error=f"Slack unreachable: {network_reason(exc)}")
    except BadTarget as exc:
        return Sent(error=str(exc), retryable=False)
    return Sent(error=f"Slack does not announce {delivery.event_type} events", retryable=False)


def api_failure(exc: SlackApiError) -> Sent:
    """A Slack error as a Sent: its error code, HTTP status, and whether to retry when."""
    response = exc.response
    status = getattr(response, "status_code", None)
    data = getattr(response, "data", None)
    code = str(data.get("error") or "error") if isinstance(data, dict) else "error"
    method = str(getattr(response, "api_url", "")).rsplit("/", 1)[-1].split("?")[0]
    error = f"Slack {method}: {code[:200]} (HTTP {status})"
    if status == 429:
        return Sent(status, error, retryable=True, retry_after=retry_after(response))
    retryable = status is None or status >= 500 or code in TRANSIENT_ERRORS
    return Sent(status, error, retryable=retryable)


def retry_after(response: Any) -> float | None:
    """Retry-After in seconds (Slack sends whole seconds), or None."""
    headers = getattr(response, "headers", None) or {}
    value = next((v for k, v in headers.items() if str(k).lower() == "retry-after"), None)
    value = value[0] if isinstance(value, list) and value else value
    try:
        seconds = float(str(value))
    except ValueError:
        return None
    return min(max(seconds, 0.0), 24 * 60 * 60) if seconds == seconds else None


def network_reason(exc: BaseException) -> str:
    """What went wrong on the wire, without the request (its headers hold the token)."""
    reason = getattr(exc, "reason", None) or exc
    return f"{type(exc).__name__}: {str(reason)[:200]}"


def _created_delivery(delivery: Delivery) -> Delivery | None:
    """The `created` delivery of this breakpoint to the same Slack target, if any."""
    rows = Delivery.objects.filter(
        breakpoint_id=delivery.breakpoint_id, channel=SLACK, event_type=EventType.CREATED
    ).only("status", "target", "reply")
    return next((row for row in rows if row.target == delivery.target), None)


def _posted(created: Delivery | None) -> dict[str, str] | None:
    """{"channel", "ts"} of the message a created delivery posted, once it is posted."""
    if created is None or created.status != DeliveryStatus.DELIVERED:
        return None
    reply = created.reply or {}
    if isinstance(reply.get("channel"), str) and isinstance(reply.get("ts"), str):
        return {"channel": reply["channel"], "ts": reply["ts"]}
    return None


def _channel_of(client: WebClient, target: dict[str, Any]) -> str:
    """A channel id, or the Slack user (by email) a DM goes to."""
    if isinstance(target.get("channel"), str):
        return target["channel"]
    if isinstance(target.get("email"), str):
        return str(client.users_lookupByEmail(email=target["email"])["user"]["id"])
    raise BadTarget(f"A Slack target needs a channel or an email, not {sorted(target)}")


def _post(client: WebClient, channel: str, text: str, blocks: list, **extra: Any) -> Sent:
    response = client.chat_postMessage(
        channel=channel, text=text, blocks=blocks, unfurl_links=False, unfurl_media=False, **extra
    )
    return Sent(response.status_code, reply={"channel": response["channel"], "ts": response["ts"]})


def _announce(client: WebClient, delivery: Delivery) -> Sent:
    data = (delivery.body or {}).get("data") or {}
    thread = None
    if delivery.event_type != EventType.CREATED:
        thread = _posted(_created_delivery(delivery))
    text, blocks = slack_blocks.announcement(
        data, delivery.event_type, timezone.now(), in_thread=thread is not None
    )
    if thread is not None:
        return _post(client, thread["channel"], text, blocks, thread_ts=thread["ts"])
    return _post(client, _channel_of(client, delivery.target), text, blocks)


def _outcome(client: WebClient, delivery: Delivery) -> Sent:
    data = (delivery.body or {}).get("data") or {}
    text, blocks = slack_blocks.outcome(data, delivery.event_type)
    created = _created_delivery(delivery)
    if created is not None and created.status == DeliveryStatus.PENDING:
        return Sent(error=NOT_POSTED_YET, retryable=True)
    message = _posted(created)
    if message is not None:
        try:
            response = client.chat_update(
                channel=message["channel"], ts=message["ts"], text=text, blocks=blocks
            )
            return Sent(response.status_code, reply={**message, "updated": True})
        except SlackApiError as exc:
            data_error = getattr(exc.response, "data", None)
            if not isinstance(data_error, dict) or data_error.get("error") not in GONE_ERRORS:
                raise
    return _post(client, _channel_of(client, delivery.target), text, blocks)
