"""The email channel as the registry knows it (core.channels): its route specs, targets,
sender and the page of its one-time decision links."""

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.urls import path

from channels.email import EMAIL, messages, views
from core.channels import EXPERTS, ChannelProvider, ChannelTarget, Spec, email_address
from core.limits import MAX_CHANNEL_FIELD_LENGTH, MAX_EMAIL_RECIPIENTS
from notifications.base import Sent
from notifications.models import Delivery
from web.api.schema import EXPERTS_VALUE, spec_shape

# What core.channels.email_address takes: an @, none of these characters.
ADDRESS = r"^[^\r\n,;<>]*@[^\r\n,;<>]*$"
ADDRESSES = {
    "type": "array",
    "minItems": 1,
    "maxItems": MAX_EMAIL_RECIPIENTS,
    "items": {"type": "string", "maxLength": MAX_CHANNEL_FIELD_LENGTH, "pattern": ADDRESS},
}


class EmailChannel(ChannelProvider):
    """A mail to a list of addresses, or to each routed expert; with no matching route,
    the routed experts are mailed (BPM_NOTIFY_EMAIL permitting)."""

    kind = EMAIL
    label = "email"
    spec_keys = ("to",)
    example_specs = ({"kind": "email", "to": ["ops@example.com"]}, {"kind": "email", "to": EXPERTS})
    experts_phrase = "an email"
    unrouted_specs = ({"kind": "email", "to": EXPERTS},)

    def configured(self) -> bool:
        return bool(settings.BPM_NOTIFY_EMAIL)

    def spec_problem(self, spec: Spec) -> str | None:
        to = spec.get("to")
        if to != EXPERTS and not (
            isinstance(to, list)
            and 1 <= len(to) <= MAX_EMAIL_RECIPIENTS
            and all(email_address(address) for address in to)
        ):
            return (
                f'An email channel needs "to": a list of 1 to {MAX_EMAIL_RECIPIENTS} '
                'addresses, or "experts".'
            )
        return None

    def spec_schemas(self) -> list[dict[str, Any]]:
        return [
            spec_shape("An email to a list of addresses", self.kind, "to", ADDRESSES),
            spec_shape("An email to each routed expert", self.kind, "to", EXPERTS_VALUE),
        ]

    def targets(
        self, spec: Spec, *, event_type: str, experts: Callable[[], list[ChannelTarget]]
    ) -> list[ChannelTarget]:
        if spec["to"] == EXPERTS:
            return experts()
        return [{"email": address} for address in spec["to"]]

    def send(self, delivery: Delivery) -> Sent:
        return messages.send(delivery)

    def urlpatterns(self) -> list[Any]:
        return [path("decide/<str:token>", views.view, name="email-decide")]
