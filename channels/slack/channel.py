"""The Slack channel as the registry knows it (core.channels): its route specs, targets,
sender and interactions endpoint."""

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.urls import path

from channels.slack import SLACK, messages, views
from core.channels import EXPERTS, ChannelProvider, ChannelTarget, Spec, short_text
from core.limits import MAX_CHANNEL_FIELD_LENGTH
from notifications.base import Sent
from notifications.models import Delivery
from web.api.schema import EXPERTS_VALUE, spec_shape, text_schema


class SlackChannel(ChannelProvider):
    """A message in a Slack channel, or a DM to each routed expert (found by email)."""

    kind = SLACK
    label = "Slack"
    spec_keys = ("channel", "to")
    example_specs = ({"kind": "slack", "channel": "C0123"}, {"kind": "slack", "to": EXPERTS})
    experts_phrase = "a DM (Slack)"

    def configured(self) -> bool:
        return bool(settings.SLACK_BOT_TOKEN)

    def spec_problem(self, spec: Spec) -> str | None:
        one_of = ("channel" in spec) != ("to" in spec)
        if (
            not one_of
            or ("to" in spec and spec["to"] != EXPERTS)
            or ("channel" in spec and not short_text(spec["channel"]))
        ):
            return 'A slack channel needs "channel" (an id such as C0123) or "to": "experts".'
        return None

    def spec_schemas(self) -> list[dict[str, Any]]:
        channel = text_schema(MAX_CHANNEL_FIELD_LENGTH, "A channel id: C0123.")
        return [
            spec_shape("A Slack channel", self.kind, "channel", channel),
            spec_shape("A Slack DM to each routed expert", self.kind, "to", EXPERTS_VALUE),
        ]

    def targets(
        self, spec: Spec, *, event_type: str, experts: Callable[[], list[ChannelTarget]]
    ) -> list[ChannelTarget]:
        return experts() if spec.get("to") == EXPERTS else [{"channel": spec["channel"]}]

    def target_label(self, target: ChannelTarget) -> str:
        return str(target.get("channel") or target.get("email") or "")

    def send(self, delivery: Delivery) -> Sent:
        return messages.send(delivery)

    def urlpatterns(self) -> list[Any]:
        return [path("integrations/slack/interactions", views.view, name="slack-interactions")]
