"""Breakpoint states and the transitions allowed between them."""

from django.db import models

from core.channels import channel_choices, channel_provider


class Status(models.TextChoices):
    WAITING = "waiting", "Waiting"
    RELEASED = "released", "Released"
    EXPIRED = "expired", "Expired"
    CANCELLED = "cancelled", "Cancelled"


ALLOWED_TRANSITIONS: dict[str, frozenset[str]] = {
    Status.WAITING: frozenset({Status.RELEASED, Status.EXPIRED, Status.CANCELLED}),
    Status.RELEASED: frozenset(),
    Status.EXPIRED: frozenset(),
    Status.CANCELLED: frozenset(),
}

FINAL_STATUSES = frozenset({Status.RELEASED, Status.EXPIRED, Status.CANCELLED})


class Strategy(models.TextChoices):
    SINGLE = "single"
    FIRST_RESPONSE_WINS = "first-response-wins"
    COLLECT_ALL = "collect-all"
    QUORUM = "quorum"


class FileFormat(models.TextChoices):
    MARKDOWN = "markdown"
    HTML = "html"
    CODE = "code"
    TEXT = "text"


class TokenKind(models.TextChoices):
    AGENT = "agent", "Agent"
    USER = "user", "Personal (user)"


class OnTimeout(models.TextChoices):
    """payload.onTimeout: what happens when nobody decides before expiresAt."""

    EXPIRE = "expire"  # the default: expire, as without a policy
    APPROVE = "approve"  # release approved (unless a rule forbids auto-approval: then expire)
    REJECT = "reject"  # release rejected
    ESCALATE = "escalate"  # route also to escalateTo and wait one more TTL, then expire


class Via(models.TextChoices):
    """Where a reviewer's feedback came from, besides the channels: feedback given on a
    channel (core.channels) records its kind ("slack"), and is named by its label."""

    API = "api"
    CONSOLE = "console"
    TRIGGER = "trigger"  # a trigger rule acting on an external event


def via_choices() -> list[tuple[str, str]]:
    """Feedback.via's choices: the API, the console, each listed channel, a trigger."""
    api, console, trigger = Via.choices
    return [api, console, *channel_choices(), trigger]


# Where feedback came from, as pages and messages say it ("via the console").
VIA_LABELS: dict[str, str] = {
    Via.API: "the API",
    Via.CONSOLE: "the console",
    Via.TRIGGER: "an event trigger",
}


def via_label(via: str) -> str:
    """How pages and messages say where feedback came from ("via Slack"); "" for old rows
    (no via) and for a channel no longer listed."""
    if via in VIA_LABELS:
        return VIA_LABELS[via]
    channel = channel_provider(via)
    return channel.label if channel is not None else ""
