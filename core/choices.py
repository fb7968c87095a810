"""Breakpoint states and the transitions allowed between them."""

from django.db import models


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


class Channel(models.TextChoices):
    """Where a notification goes: every one is a row of the same outbox."""

    WEBHOOK = "webhook"
    SLACK = "slack"
    EMAIL = "email"
    JIRA = "jira"


class Via(models.TextChoices):
    """Where a reviewer's feedback came from."""

    API = "api"
    CONSOLE = "console"
    SLACK = "slack"
    EMAIL = "email"
    JIRA = "jira"
    TRIGGER = "trigger"  # a trigger rule acting on an external event


# Where feedback came from, as pages and messages say it ("via Slack"); old rows: "".
VIA_LABELS: dict[str, str] = {
    Via.API: "the API",
    Via.CONSOLE: "the console",
    Via.SLACK: "Slack",
    Via.EMAIL: "email",
    Via.JIRA: "JIRA",
    Via.TRIGGER: "an event trigger",
}


def via_label(via: str) -> str:
    return VIA_LABELS.get(via, "") if via else ""
